//! Named parameters and buffers of a model, derived by a visitor.
//!
//! A model is a tree of structs; each one lists its parameters, its
//! buffers, its training flag and its sub-modules once, in a `visit`
//! method ([`Module::visit`], or [`Parameters::visit`] for a model whose
//! `forward` takes more than one tensor), and the dotted names
//! (`layer1.0.conv1.weight`, `bn1.running_mean`) follow from the tree, as
//! PyTorch's `state_dict` names them. Everything else is derived from
//! that one walk: `named_parameters`, `named_buffers`, `state_dict`,
//! `train()`/`eval()` (which reach every child without forwarding by hand)
//! and saving and loading by name.
//!
//! We chose a visitor over a derive macro (a second, proc-macro crate to
//! build and keep in step) and over a registry (parameters registered at
//! construction, which makes the order depend on construction order and
//! hides the structure): a visitor is ordinary code that reads like the
//! struct, and `forward` stays free to take whatever the model needs
//! (token ids, masks, targets) instead of the single tensor of
//! [`Module::forward`].
//!
//! A tensor reachable under two names (tied weights) is listed once,
//! under the first name visited, as PyTorch's `named_parameters` does.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use super::Module;
use crate::tensor::Tensor;

/// A value that owns named parameters: every [`Module`], and models whose
/// `forward` takes more than one tensor.
pub trait Parameters {
    /// Shows each parameter, buffer and sub-module to `v`, in a fixed order.
    fn visit(&self, v: &mut ParamVisitor);

    /// Every parameter under its dotted name, each tensor once (tied
    /// weights under their first name).
    fn named_params(&self) -> Vec<(String, Tensor)> {
        walk(self, None).of_kind(Kind::Parameter)
    }

    /// The parameters, in [`Parameters::named_params`] order.
    fn params(&self) -> Vec<Tensor> {
        self.named_params().into_iter().map(|(_, t)| t).collect()
    }

    /// Number of scalar parameters (tied weights counted once; buffers
    /// are not parameters).
    fn num_params(&self) -> usize {
        self.params().iter().map(Tensor::numel).sum()
    }

    /// Converts every floating-point parameter and buffer to `dtype` in
    /// place (PyTorch's `module.to(dtype)`: BatchNorm's running
    /// statistics follow; integer buffers such as `num_batches_tracked`
    /// stay), for inference and generation in bf16 or f16. Handles held
    /// elsewhere (an optimiser's) see the change; gradients are dropped.
    #[track_caller]
    fn to_dtype(&self, dtype: crate::DType) {
        for (_, t, _) in walk(self, None).found {
            if t.dtype().is_float() {
                t.set_dtype_(dtype);
            }
        }
    }
}

impl<M: Module + ?Sized> Parameters for M {
    fn visit(&self, v: &mut ParamVisitor) {
        Module::visit(self, v);
    }
}

/// What a visited tensor is to its module.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// Trained: handed to optimisers, has gradients.
    Parameter,
    /// State that is saved and loaded but never trained (BatchNorm's
    /// running statistics).
    Buffer,
}

/// Collects `(dotted name, tensor)` pairs while a model is visited, and
/// sets training flags when the walk is `train()`/`eval()`.
#[derive(Default)]
pub struct ParamVisitor {
    prefix: String,
    /// Every tensor found, in visit order (a state dict's order).
    found: Vec<(String, Tensor, Kind)>,
    /// The handles recorded so far, to skip tied weights in O(1).
    seen: HashSet<usize>,
    /// `Some(training)` when the walk switches modes.
    set_training: Option<bool>,
}

impl ParamVisitor {
    /// Records parameter `name` of the module being visited (skipped if
    /// the same tensor was recorded already: a tied weight).
    pub fn param(&mut self, name: &str, t: &Tensor) {
        self.record(name, t, Kind::Parameter);
    }

    /// Records a layer's optional `weight` and `bias` under those names
    /// (the pair most layers own).
    pub fn weight_and_bias(&mut self, weight: Option<&Tensor>, bias: Option<&Tensor>) {
        for (name, t) in [("weight", weight), ("bias", bias)] {
            if let Some(t) = t {
                self.param(name, t);
            }
        }
    }

    /// Records buffer `name` of the module being visited: a tensor saved
    /// and loaded with the parameters but never trained (running
    /// statistics, counters).
    pub fn buffer(&mut self, name: &str, t: &Tensor) {
        self.record(name, t, Kind::Buffer);
    }

    fn record(&mut self, name: &str, t: &Tensor, kind: Kind) {
        if !self.seen.insert(t.handle_id()) {
            return;
        }
        self.found
            .push((format!("{}{name}", self.prefix), t.clone(), kind));
    }

    /// Shows the visited module's training flag: `train()`/`eval()` set
    /// it; other walks leave it alone.
    pub fn training_flag(&mut self, flag: &AtomicBool) {
        if let Some(training) = self.set_training {
            flag.store(training, Ordering::Relaxed);
        }
    }

    /// Visits sub-module `m` under `name` (its parameters become
    /// `name.<theirs>`).
    pub fn module(&mut self, name: &str, m: &(impl Parameters + ?Sized)) {
        let saved = self.prefix.len();
        self.prefix.push_str(name);
        self.prefix.push('.');
        m.visit(self);
        self.prefix.truncate(saved);
    }

    fn of_kind(self, kind: Kind) -> Vec<(String, Tensor)> {
        self.found
            .into_iter()
            .filter(|(_, _, k)| *k == kind)
            .map(|(n, t, _)| (n, t))
            .collect()
    }
}

/// One walk over `m`, setting training flags to `set_training` if given.
fn walk(m: &(impl Parameters + ?Sized), set_training: Option<bool>) -> ParamVisitor {
    let mut v = ParamVisitor {
        set_training,
        ..ParamVisitor::default()
    };
    m.visit(&mut v);
    v
}

/// Parameters and buffers of `m` in visit order (PyTorch's `state_dict`).
pub(crate) fn state_of(m: &(impl Parameters + ?Sized)) -> Vec<(String, Tensor, Kind)> {
    walk(m, None).found
}

/// The buffers of `m` under their dotted names.
pub(crate) fn buffers_of(m: &(impl Parameters + ?Sized)) -> Vec<(String, Tensor)> {
    walk(m, None).of_kind(Kind::Buffer)
}

/// Sets every training flag in `m`'s tree.
pub(crate) fn set_training_of(m: &(impl Parameters + ?Sized), training: bool) {
    walk(m, Some(training));
}
