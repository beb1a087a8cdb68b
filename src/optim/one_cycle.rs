//! The one-cycle policy (Smith & Topin, "Super-convergence", 2018) with
//! the semantics of PyTorch's `OneCycleLR`.

use super::Schedule;

/// How each phase of a [`OneCycleLr`] goes from its start value to its
/// end value as `pct` goes from 0 to 1 (PyTorch's `anneal_strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AnnealStrategy {
    /// Half a cosine: `end + (start - end) * (1 + cos(pi * pct)) / 2`.
    #[default]
    Cos,
    /// A straight line: `start + (end - start) * pct`.
    Linear,
}

impl AnnealStrategy {
    /// The value at `pct` of the way from `start` to `end`, in f64 as
    /// Python computes it.
    fn anneal(self, (start, end): (f64, f64), pct: f64) -> f64 {
        match self {
            AnnealStrategy::Cos => {
                let cos_out = (std::f64::consts::PI * pct).cos() + 1.0;
                end + (start - end) / 2.0 * cos_out
            }
            AnnealStrategy::Linear => (end - start) * pct + start,
        }
    }
}

/// One phase of the cycle: the step it ends at (a float, as PyTorch
/// computes it) and the rates and momenta it goes between.
struct Phase {
    end_step: f64,
    lr: (f64, f64),
    momentum: (f64, f64),
}

/// The one-cycle policy, PyTorch's `OneCycleLR`: the rate rises from
/// `max_lr / div_factor` to `max_lr` over the first `pct_start` of
/// `total_steps`, then falls to `max_lr / div_factor / final_div_factor`
/// (with `three_phase`, it first falls back to the initial rate, and only
/// the third phase goes to the minimum). With `cycle_momentum` (the
/// default) the momentum moves the other way, between `max_momentum` and
/// `base_momentum`: SGD's momentum factor, or Adam's and AdamW's beta1.
///
/// Use it through a [`Scheduler`](super::Scheduler), stepped after every
/// batch: it sets step 0's values when made and allows `total_steps`
/// steps, then panics, as PyTorch raises. Every group gets the same rates
/// (PyTorch also takes one `max_lr` per group); the groups' own rates are
/// not read. The rates and momenta are runtime parameters of the update,
/// so the cycle compiles nothing.
///
/// ```
/// use lazywgpu::optim::{AnnealStrategy, OneCycleLr, Optimizer, Scheduler, Sgd};
/// use lazywgpu::{Device, Tensor};
/// let w = Tensor::zeros([3], &Device::cpu());
/// let mut opt = Sgd::new(vec![w], 0.0);
/// let cycle = OneCycleLr::new(0.1, 100).anneal_strategy(AnnealStrategy::Linear);
/// let sched = Scheduler::new(&mut opt, cycle);
/// assert!((opt.lr() - 0.1 / 25.0).abs() < 1e-9);
/// assert_eq!(opt.group_momentum(0), Some(0.95));
/// assert_eq!(sched.momentum(), Some(0.95));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct OneCycleLr {
    max_lr: f32,
    total_steps: usize,
    pct_start: f32,
    anneal: AnnealStrategy,
    div_factor: f32,
    final_div_factor: f32,
    three_phase: bool,
    cycle_momentum: bool,
    base_momentum: f32,
    max_momentum: f32,
}

impl OneCycleLr {
    /// A cycle peaking at `max_lr` over `total_steps` steps, with
    /// PyTorch's defaults: `pct_start` 0.3, cosine annealing,
    /// `div_factor` 25, `final_div_factor` 1e4, two phases, momentum
    /// cycled between 0.85 and 0.95.
    ///
    /// # Panics
    ///
    /// If `total_steps` is 0.
    #[track_caller]
    pub fn new(max_lr: f32, total_steps: usize) -> OneCycleLr {
        assert!(
            total_steps > 0,
            "OneCycleLr::new: total_steps must be positive (max_lr {max_lr}, total_steps 0)"
        );
        OneCycleLr {
            max_lr,
            total_steps,
            pct_start: 0.3,
            anneal: AnnealStrategy::Cos,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: false,
            cycle_momentum: true,
            base_momentum: 0.85,
            max_momentum: 0.95,
        }
    }

    /// Sets the fraction of the steps spent raising the rate (builder
    /// style).
    ///
    /// # Panics
    ///
    /// If `pct_start` is not in `[0, 1]`.
    #[track_caller]
    pub fn pct_start(mut self, pct_start: f32) -> OneCycleLr {
        assert!(
            (0.0..=1.0).contains(&pct_start),
            "OneCycleLr::pct_start: {pct_start} is not between 0 and 1"
        );
        self.pct_start = pct_start;
        self
    }

    /// Sets how each phase moves between its values (builder style).
    pub fn anneal_strategy(mut self, anneal: AnnealStrategy) -> OneCycleLr {
        self.anneal = anneal;
        self
    }

    /// Sets the initial rate to `max_lr / div_factor` (builder style).
    pub fn div_factor(mut self, div_factor: f32) -> OneCycleLr {
        self.div_factor = div_factor;
        self
    }

    /// Sets the final rate to `initial_lr / final_div_factor` (builder
    /// style).
    pub fn final_div_factor(mut self, final_div_factor: f32) -> OneCycleLr {
        self.final_div_factor = final_div_factor;
        self
    }

    /// Uses three phases, fast.ai's original form: up, back down to the
    /// initial rate symmetrically, then down to the final rate (builder
    /// style).
    pub fn three_phase(mut self, on: bool) -> OneCycleLr {
        self.three_phase = on;
        self
    }

    /// Cycles the optimiser's momentum against the rate (the default;
    /// builder style). Off, the schedule leaves the momentum alone and
    /// works with optimisers that have none.
    pub fn cycle_momentum(mut self, on: bool) -> OneCycleLr {
        self.cycle_momentum = on;
        self
    }

    /// Sets the momentum at the peak rate (builder style).
    pub fn base_momentum(mut self, momentum: f32) -> OneCycleLr {
        self.base_momentum = momentum;
        self
    }

    /// Sets the momentum at the start and the end (builder style).
    pub fn max_momentum(mut self, momentum: f32) -> OneCycleLr {
        self.max_momentum = momentum;
        self
    }

    /// The number of steps of the cycle.
    pub fn total_steps(&self) -> usize {
        self.total_steps
    }

    /// The phases, as PyTorch's `_schedule_phases`: their end steps are
    /// floats (`pct_start * total_steps - 1`), so a phase may end between
    /// two steps.
    fn phases(&self) -> Vec<Phase> {
        let max = self.max_lr as f64;
        let initial = max / self.div_factor as f64;
        let min = initial / self.final_div_factor as f64;
        let (low, high) = (self.base_momentum as f64, self.max_momentum as f64);
        let total = self.total_steps as f64;
        let up_end = self.pct_start as f64 * total - 1.0;
        let last_end = total - 1.0;
        let phase = |end_step, lr, momentum| Phase {
            end_step,
            lr,
            momentum,
        };
        if self.three_phase {
            let down_end = 2.0 * self.pct_start as f64 * total - 2.0;
            vec![
                phase(up_end, (initial, max), (high, low)),
                phase(down_end, (max, initial), (low, high)),
                phase(last_end, (initial, min), (high, high)),
            ]
        } else {
            vec![
                phase(up_end, (initial, max), (high, low)),
                phase(last_end, (max, min), (low, high)),
            ]
        }
    }

    /// The rate and the momentum at `step`: the first phase that ends at
    /// or after it (or the last), at the fraction of the way through it.
    #[track_caller]
    fn at(&self, step: usize) -> (f64, f64) {
        assert!(
            step <= self.total_steps,
            "OneCycleLr: stepped {step} times, past total_steps {}",
            self.total_steps
        );
        let phases = self.phases();
        let s = step as f64;
        let i = phases
            .iter()
            .position(|p| s <= p.end_step)
            .unwrap_or(phases.len() - 1);
        let start = if i == 0 { 0.0 } else { phases[i - 1].end_step };
        let width = phases[i].end_step - start;
        // PyTorch divides by zero here (a ZeroDivisionError).
        assert!(
            width != 0.0,
            "OneCycleLr: phase {i} is empty at step {step} (pct_start {}, total_steps {})",
            self.pct_start,
            self.total_steps
        );
        let pct = (s - start) / width;
        let lr = self.anneal.anneal(phases[i].lr, pct);
        let momentum = self.anneal.anneal(phases[i].momentum, pct);
        (lr, momentum)
    }
}

impl Schedule for OneCycleLr {
    /// The cycle's rate at `step` (`base_lr` is not read).
    ///
    /// # Panics
    ///
    /// Past `total_steps`, or in an empty phase (see [`OneCycleLr`]).
    #[track_caller]
    fn lr(&self, base_lr: f32, step: usize) -> f32 {
        let _ = base_lr;
        self.at(step).0 as f32
    }

    /// The cycle's momentum at `step`, unless `cycle_momentum` is off.
    #[track_caller]
    fn momentum(&self, step: usize) -> Option<f32> {
        // Not `bool::then`: its closure would hide the caller's place.
        if self.cycle_momentum {
            Some(self.at(step).1 as f32)
        } else {
            None
        }
    }
}
