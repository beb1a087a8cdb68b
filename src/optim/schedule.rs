//! Learning-rate schedules: a [`Schedule`] says the rate at each step as
//! a function of a group's base rate (and, for [`OneCycleLr`](super::OneCycleLr), the
//! momentum); a [`Scheduler`] applies one to every group of an optimiser.
//! Rates and momenta are runtime parameters of the update kernels, so
//! changing them never recompiles anything.

use super::Optimizer;

/// A learning rate as a function of the step (0-based: the rate of the
/// update that step `step` takes) and of a group's base rate.
pub trait Schedule {
    /// The rate for `step`, for a group whose base rate is `base_lr`.
    fn lr(&self, base_lr: f32, step: usize) -> f32;

    /// The momentum for `step` (SGD's momentum factor, Adam's beta1), or
    /// `None`, the default: the schedule leaves the momentum alone.
    fn momentum(&self, step: usize) -> Option<f32> {
        let _ = step;
        None
    }
}

/// Linear warm-up over `steps` steps, nanoGPT's form: `base * (step + 1) /
/// (steps + 1)` while `step < steps`, then `base`.
#[derive(Clone, Copy, Debug)]
pub struct LinearWarmup {
    /// Steps of warm-up.
    pub steps: usize,
}

impl Schedule for LinearWarmup {
    /// Computed in f64, as Python does.
    fn lr(&self, base_lr: f32, step: usize) -> f32 {
        if step < self.steps {
            (base_lr as f64 * (step + 1) as f64 / (self.steps + 1) as f64) as f32
        } else {
            base_lr
        }
    }
}

/// Cosine annealing from the base rate to `min_lr` over `t_max` steps,
/// then `min_lr` (PyTorch's `CosineAnnealingLR` closed form, without
/// restarts): `min + (base - min) * (1 + cos(pi * step / t_max)) / 2`,
/// computed in f64 as Python does.
#[derive(Clone, Copy, Debug)]
pub struct CosineAnnealing {
    /// Steps from the base rate to `min_lr`.
    pub t_max: usize,
    /// The final rate.
    pub min_lr: f32,
}

impl Schedule for CosineAnnealing {
    fn lr(&self, base_lr: f32, step: usize) -> f32 {
        if step >= self.t_max {
            return self.min_lr;
        }
        let (base, min) = (base_lr as f64, self.min_lr as f64);
        let ratio = step as f64 / self.t_max.max(1) as f64;
        let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
        (min + coeff * (base - min)) as f32
    }
}

/// [`LinearWarmup`] over `warmup` steps, then [`CosineAnnealing`] to
/// `min_lr` at step `total` (and `min_lr` after): nanoGPT's `get_lr`.
#[derive(Clone, Copy, Debug)]
pub struct WarmupCosine {
    /// Steps of linear warm-up ([`LinearWarmup`]'s form).
    pub warmup: usize,
    /// The step at which the decay reaches `min_lr`.
    pub total: usize,
    /// The final rate.
    pub min_lr: f32,
}

impl Schedule for WarmupCosine {
    fn lr(&self, base_lr: f32, step: usize) -> f32 {
        if step < self.warmup {
            return LinearWarmup { steps: self.warmup }.lr(base_lr, step);
        }
        let decay = CosineAnnealing {
            t_max: self.total.saturating_sub(self.warmup),
            min_lr: self.min_lr,
        };
        decay.lr(base_lr, step - self.warmup)
    }
}

/// The base rate times `gamma` once for each milestone reached
/// (PyTorch's `MultiStepLR`, in its closed form): `base * gamma^n` with
/// `n` the number of milestones `<= step`, a milestone listed twice
/// counting twice, as in PyTorch. Milestones need not be sorted.
#[derive(Clone, Debug)]
pub struct MultiStepLr {
    /// The steps (usually epochs) at which the rate decays.
    pub milestones: Vec<usize>,
    /// The factor of each decay.
    pub gamma: f32,
}

impl MultiStepLr {
    /// Decays by `gamma` at each of `milestones`.
    pub fn new(milestones: Vec<usize>, gamma: f32) -> MultiStepLr {
        MultiStepLr { milestones, gamma }
    }
}

impl Schedule for MultiStepLr {
    /// Computed in f64, as Python does.
    fn lr(&self, base_lr: f32, step: usize) -> f32 {
        let reached = self.milestones.iter().filter(|&&m| m <= step).count();
        (base_lr as f64 * (self.gamma as f64).powi(reached as i32)) as f32
    }
}

/// `base * f(step)` for any function `f` (PyTorch's `LambdaLR`).
pub struct LambdaLr<F: Fn(usize) -> f32>(pub F);

impl<F: Fn(usize) -> f32> Schedule for LambdaLr<F> {
    fn lr(&self, base_lr: f32, step: usize) -> f32 {
        base_lr * (self.0)(step)
    }
}

/// Applies a [`Schedule`] to every parameter group of an optimiser, from
/// the groups' rates when it was made, and its momentum (if it has one)
/// to every group. Call [`Scheduler::step`] after each optimiser step, as
/// in PyTorch.
pub struct Scheduler<S: Schedule> {
    schedule: S,
    base_lrs: Vec<f32>,
    step: usize,
}

impl<S: Schedule> Scheduler<S> {
    /// Takes `opt`'s current rates as the base rates and sets the rates
    /// (and momentum) of step 0.
    ///
    /// # Panics
    ///
    /// If the schedule sets a momentum and `opt` has none (see
    /// [`Optimizer::set_group_momentum`]), or the schedule panics at step 0.
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, schedule: S) -> Scheduler<S> {
        let base_lrs = (0..opt.group_count()).map(|g| opt.group_lr(g)).collect();
        let s = Scheduler {
            schedule,
            base_lrs,
            step: 0,
        };
        s.apply(opt);
        s
    }

    /// Advances to the next step and sets its rates (and momentum).
    #[track_caller]
    pub fn step(&mut self, opt: &mut dyn Optimizer) {
        self.step += 1;
        self.apply(opt);
    }

    /// Jumps to `step` (resuming a run) and sets its rates (and
    /// momentum).
    #[track_caller]
    pub fn set_step(&mut self, opt: &mut dyn Optimizer, step: usize) {
        self.step = step;
        self.apply(opt);
    }

    /// The step whose rates are set.
    pub fn current_step(&self) -> usize {
        self.step
    }

    /// The rate of group 0 at the current step.
    pub fn lr(&self) -> f32 {
        self.base_lrs
            .first()
            .map_or(0.0, |&b| self.schedule.lr(b, self.step))
    }

    /// The momentum the schedule sets at the current step, if it sets one.
    pub fn momentum(&self) -> Option<f32> {
        self.schedule.momentum(self.step)
    }

    /// The schedule.
    pub fn schedule(&self) -> &S {
        &self.schedule
    }

    #[track_caller]
    fn apply(&self, opt: &mut dyn Optimizer) {
        let momentum = self.schedule.momentum(self.step);
        for (g, &base) in self.base_lrs.iter().enumerate() {
            opt.set_group_lr(g, self.schedule.lr(base, self.step));
            if let Some(m) = momentum {
                opt.set_group_momentum(g, m);
            }
        }
    }
}
