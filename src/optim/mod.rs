//! Optimisers, learning-rate schedules and weight averaging.
//!
//! - Optimisers ([`Optimizer`]): [`Sgd`] (momentum, dampening, Nesterov,
//!   weight decay), [`Adam`], [`AdamW`], each over [`ParamGroup`]s with
//!   their own learning rate, weight decay and momentum; [`Adadelta`].
//! - Gradient clipping: [`clip_grad_norm_`].
//! - Schedules applied by a [`Scheduler`] after each step ([`Schedule`]):
//!   [`LinearWarmup`], [`CosineAnnealing`], [`WarmupCosine`], [`LambdaLr`],
//!   [`MultiStepLr`], and [`OneCycleLr`], which also cycles the momentum
//!   ([`Optimizer::set_momentum`]: SGD's momentum, Adam's beta1).
//!   [`StepLr`] and [`ReduceLrOnPlateau`] (which takes the metric) step
//!   the optimiser themselves. PyTorch's spellings are aliases: [`SGD`],
//!   [`StepLR`], [`MultiStepLR`], [`OneCycleLR`], [`ReduceLROnPlateau`].
//! - [`Ema`]: an exponential moving average of the weights, on the device.
//!
//! Every update is written in place on the parameter handles under
//! `no_grad`, so a training loop's graph does not grow from step to step and
//! the executor reuses each parameter's buffer for its new value
//! (donation): no parameter is copied. Hyper-parameters (the learning rate,
//! the momentum, bias corrections, an average's decay) enter the graph as
//! scalar runtime parameters, so a schedule that changes them never
//! recompiles anything.
//!
//! ```
//! use lazywgpu::nn::{self, Module, functional as F};
//! use lazywgpu::optim::{Adam, Optimizer, Scheduler, WarmupCosine, clip_grad_norm_};
//! use lazywgpu::{Device, Tensor};
//! # fn main() -> lazywgpu::Result<()> {
//! let dev = Device::cpu();
//! dev.manual_seed(0);
//! // Fit y = 3x - 1 with one linear layer.
//! let model = nn::Linear::new(1, 1, &dev);
//! let x = Tensor::from_vec(vec![-1.0f32, 0.0, 1.0, 2.0], [4, 1], &dev)?;
//! let y = &x * 3.0 - 1.0;
//! let mut opt = Adam::new(model.parameters(), 0.1);
//! let schedule = WarmupCosine { warmup: 10, total: 300, min_lr: 0.01 };
//! let mut sched = Scheduler::new(&mut opt, schedule);
//! let mut losses = Vec::new();
//! for _ in 0..300 {
//!     let loss = F::mse_loss(&model.forward(&x), &y);
//!     loss.backward();
//!     clip_grad_norm_(&model.parameters(), 10.0); // no readback: stays on the device
//!     opt.step();      // in place, under no_grad
//!     opt.zero_grad();
//!     sched.step(&mut opt); // a new learning rate compiles nothing
//!     dev.mark_step()?;     // forward, backward and update: one graph
//!     losses.push(loss);
//! }
//! let (first, last) = (losses[0].item::<f32>()?, losses[299].item::<f32>()?);
//! assert!(last < 1e-3 && last < first, "{first} -> {last}");
//! # Ok(()) }
//! ```

mod adadelta;
mod adam;
mod clip;
mod ema;
mod group;
mod one_cycle;
mod plateau;
mod schedule;
mod sgd;

pub use adadelta::Adadelta;
pub use adam::{Adam, AdamW};
pub use clip::clip_grad_norm_;
pub use ema::Ema;
pub use group::ParamGroup;
pub use one_cycle::{AnnealStrategy, OneCycleLr};
pub use plateau::{PlateauMode, ReduceLrOnPlateau, ThresholdMode};
pub use schedule::{
    CosineAnnealing, LambdaLr, LinearWarmup, MultiStepLr, Schedule, Scheduler, WarmupCosine,
};
pub use sgd::Sgd;

/// PyTorch's spelling of [`Sgd`].
#[allow(clippy::upper_case_acronyms)]
pub type SGD = Sgd;

/// PyTorch's spelling of [`StepLr`].
#[allow(clippy::upper_case_acronyms)]
pub type StepLR = StepLr;

/// PyTorch's spelling of [`MultiStepLr`].
#[allow(clippy::upper_case_acronyms)]
pub type MultiStepLR = MultiStepLr;

/// PyTorch's spelling of [`OneCycleLr`].
#[allow(clippy::upper_case_acronyms)]
pub type OneCycleLR = OneCycleLr;

/// PyTorch's spelling of [`ReduceLrOnPlateau`].
#[allow(clippy::upper_case_acronyms)]
pub type ReduceLROnPlateau = ReduceLrOnPlateau;

use crate::error::Result;
use crate::tensor::Tensor;

/// The gradient with L2 weight decay added: `g + weight_decay * p` (a new
/// tensor; `+=` would write into the parameter's own gradient handle).
pub(crate) fn l2_decayed(g: Tensor, p: &Tensor, weight_decay: f32) -> Tensor {
    if weight_decay == 0.0 {
        g
    } else {
        g + p * weight_decay
    }
}

/// Group `group` of an optimiser's `groups`, or a panic naming the
/// operation `op` and the number of groups.
#[track_caller]
pub(crate) fn nth_group<'a, T>(groups: &'a [T], group: usize, op: &str) -> &'a T {
    let count = groups.len();
    // A `match`, not `unwrap_or_else`: a closure would hide the caller.
    match groups.get(group) {
        Some(g) => g,
        None => panic!("{op}: group {group} of an optimiser with {count} groups"),
    }
}

/// [`nth_group`], to write.
#[track_caller]
pub(crate) fn nth_group_mut<'a, T>(groups: &'a mut [T], group: usize, op: &str) -> &'a mut T {
    let count = groups.len();
    match groups.get_mut(group) {
        Some(g) => g,
        None => panic!("{op}: group {group} of an optimiser with {count} groups"),
    }
}

/// Entry `name` of saved optimiser state, or an error naming it.
pub(crate) fn state_entry<'a>(state: &'a [(String, Tensor)], name: &str) -> Result<&'a Tensor> {
    state
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .ok_or_else(|| crate::Error::State(format!("optimiser state has no entry {name:?}")))
}

/// Copies saved entry `name` into `dst` in place, checking its shape.
pub(crate) fn restore_into(state: &[(String, Tensor)], name: &str, dst: &Tensor) -> Result<()> {
    let src = state_entry(state, name)?;
    if src.shape() != dst.shape() {
        return Err(crate::Error::State(format!(
            "{name}: shape {:?} in the state, {:?} in the optimiser",
            src.shape(),
            dst.shape()
        )));
    }
    crate::autograd::no_grad(|| dst.copy_(src));
    Ok(())
}

/// An optimiser over a fixed list of parameters.
pub trait Optimizer {
    /// Records one update of every parameter that has a gradient.
    fn step(&mut self);

    /// The parameters it updates.
    fn params(&self) -> &[Tensor];

    /// Clears every parameter's gradient (PyTorch's
    /// `zero_grad(set_to_none=True)`).
    fn zero_grad(&self) {
        for p in self.params() {
            p.zero_grad();
        }
    }

    /// The current learning rate.
    fn lr(&self) -> f32;

    /// Sets the learning rate of every group (a runtime parameter: no
    /// recompilation).
    fn set_lr(&mut self, lr: f32);

    /// Number of parameter groups (1 unless made from [`ParamGroup`]s).
    fn group_count(&self) -> usize {
        1
    }

    /// The learning rate of group `group`.
    fn group_lr(&self, group: usize) -> f32 {
        let _ = group;
        self.lr()
    }

    /// Sets the learning rate of group `group`.
    fn set_group_lr(&mut self, group: usize, lr: f32) {
        let _ = group;
        self.set_lr(lr);
    }

    /// The momentum of group `group`: SGD's momentum factor, Adam's and
    /// AdamW's beta1; `None` (the default) for optimisers without one,
    /// such as Adadelta.
    fn group_momentum(&self, group: usize) -> Option<f32> {
        let _ = group;
        None
    }

    /// Sets the momentum of group `group` (what
    /// [`Optimizer::group_momentum`] reads). It is a runtime parameter of
    /// the update, like the learning rate, so changing it every step
    /// compiles nothing.
    ///
    /// # Panics
    ///
    /// If the optimiser has no momentum (the default implementation), or
    /// `group` is not one of its groups.
    #[track_caller]
    fn set_group_momentum(&mut self, group: usize, momentum: f32) {
        panic!(
            "set_group_momentum: {} has no momentum or beta1 to set (group {group}, momentum {momentum})",
            std::any::type_name::<Self>()
        );
    }

    /// Sets every group's momentum: SGD's momentum factor, Adam's and
    /// AdamW's beta1, as PyTorch's `OneCycleLR` cycles `momentum` or
    /// `betas[0]`. No recompilation (see
    /// [`Optimizer::set_group_momentum`], which panics for optimisers
    /// without a momentum).
    #[track_caller]
    fn set_momentum(&mut self, momentum: f32) {
        for g in 0..self.group_count() {
            self.set_group_momentum(g, momentum);
        }
    }

    /// The optimiser's state (step count, moment estimates) as named
    /// tensors, for checkpoints; empty for stateless optimisers.
    fn state(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// Restores state saved by [`Optimizer::state`] (copied in place, so
    /// the optimiser keeps its buffers).
    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        let _ = state;
        Ok(())
    }
}

/// Multiplies the learning rate by `gamma` every `step_size` epochs
/// (PyTorch's `StepLR`); call [`StepLr::step`] once per epoch.
pub struct StepLr {
    base_lr: f32,
    step_size: usize,
    gamma: f32,
    epoch: usize,
}

impl StepLr {
    /// A schedule starting from `opt`'s current learning rate.
    pub fn new(opt: &dyn Optimizer, step_size: usize, gamma: f32) -> StepLr {
        StepLr {
            base_lr: opt.lr(),
            step_size: step_size.max(1),
            gamma,
            epoch: 0,
        }
    }

    /// Ends an epoch: sets `opt`'s learning rate for the next one.
    pub fn step(&mut self, opt: &mut dyn Optimizer) {
        self.epoch += 1;
        let decays = (self.epoch / self.step_size) as i32;
        opt.set_lr(self.base_lr * self.gamma.powi(decays));
    }

    /// Epochs ended so far.
    pub fn epoch(&self) -> usize {
        self.epoch
    }
}
