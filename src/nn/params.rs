//! Named parameters of a model, derived by a visitor.
//!
//! A model is a tree of structs; each one lists its parameters and its
//! sub-modules once, in [`Parameters::visit`], and the dotted names
//! (`blocks.0.attn.qkv.weight`) follow from the tree. We chose a visitor
//! over a derive macro (a second, proc-macro crate to build and keep in
//! step) and over a registry (parameters registered at construction,
//! which makes the order depend on construction order and hides the
//! structure): a visitor is ordinary code that reads like the struct, and
//! `forward` stays free to take whatever the model needs (token ids,
//! masks, targets) instead of the single tensor of [`Module::forward`].
//!
//! A parameter reachable under two names (tied weights) is listed once,
//! under the first name visited, as PyTorch's `named_parameters` does.

use std::collections::HashSet;

use super::Module;
use crate::tensor::Tensor;

/// A value that owns named parameters: every [`Module`], and models whose
/// `forward` takes more than one tensor.
pub trait Parameters {
    /// Shows each parameter and sub-module to `v`, in a fixed order.
    fn visit(&self, v: &mut ParamVisitor);

    /// Every parameter under its dotted name, each tensor once (tied
    /// weights under their first name).
    fn named_params(&self) -> Vec<(String, Tensor)> {
        let mut v = ParamVisitor::default();
        self.visit(&mut v);
        v.found
    }

    /// The parameters, in [`Parameters::named_params`] order.
    fn params(&self) -> Vec<Tensor> {
        self.named_params().into_iter().map(|(_, t)| t).collect()
    }

    /// Number of scalar parameters (tied weights counted once).
    fn num_params(&self) -> usize {
        self.params().iter().map(Tensor::numel).sum()
    }
}

impl<M: Module + ?Sized> Parameters for M {
    fn visit(&self, v: &mut ParamVisitor) {
        for (name, t) in self.named_parameters() {
            v.param(&name, &t);
        }
    }
}

/// Collects `(dotted name, tensor)` pairs while a model is visited.
#[derive(Default)]
pub struct ParamVisitor {
    prefix: String,
    found: Vec<(String, Tensor)>,
    /// The handles recorded so far, to skip tied weights in O(1).
    seen: HashSet<usize>,
}

impl ParamVisitor {
    /// Records parameter `name` of the module being visited (skipped if
    /// the same tensor was recorded already: a tied weight).
    pub fn param(&mut self, name: &str, t: &Tensor) {
        if !self.seen.insert(t.handle_id()) {
            return;
        }
        self.found
            .push((format!("{}{name}", self.prefix), t.clone()));
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
}
