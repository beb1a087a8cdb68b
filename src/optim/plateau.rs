//! Lowering the learning rate when a metric stops improving, with the
//! semantics of PyTorch's `ReduceLROnPlateau`.

use super::Optimizer;

/// Whether a [`ReduceLrOnPlateau`]'s metric improves by going down (a
/// loss) or up (an accuracy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlateauMode {
    /// Lower is better.
    #[default]
    Min,
    /// Higher is better.
    Max,
}

/// How a [`ReduceLrOnPlateau`]'s threshold measures an improvement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThresholdMode {
    /// Relative to the best value: better than `best * (1 - threshold)`
    /// (`best * (1 + threshold)` in max mode).
    #[default]
    Rel,
    /// Absolute: better than `best - threshold` (`best + threshold` in
    /// max mode).
    Abs,
}

/// Multiplies every group's learning rate by `factor` when the metric has
/// not improved for more than `patience` steps (PyTorch's
/// `ReduceLROnPlateau`): after a reduction it waits `cooldown` steps,
/// counting no bad ones, and never goes below `min_lr`; a reduction
/// smaller than `eps` is skipped. Call [`ReduceLrOnPlateau::step`] with
/// the metric, usually once per epoch with the validation loss.
///
/// The metric, the threshold, the factor and eps are f64, and the
/// comparisons are made in f64 as Python makes them, so a metric on the
/// threshold's edge goes the same way as in PyTorch; rates are f32, as
/// everywhere in the crate.
///
/// ```
/// use lazywgpu::optim::{Optimizer, ReduceLrOnPlateau, Sgd};
/// use lazywgpu::{Device, Tensor};
/// let mut opt = Sgd::new(vec![Tensor::zeros([2], &Device::cpu())], 0.1);
/// let mut plateau = ReduceLrOnPlateau::new().patience(1).factor(0.5);
/// for loss in [1.0, 0.9, 0.95, 0.92] {
///     plateau.step(&mut opt, loss);
/// }
/// assert_eq!(opt.lr(), 0.05); // two steps without a new best
/// ```
#[derive(Clone, Debug)]
pub struct ReduceLrOnPlateau {
    mode: PlateauMode,
    factor: f64,
    patience: usize,
    threshold: f64,
    threshold_mode: ThresholdMode,
    cooldown: usize,
    min_lr: f32,
    eps: f64,
    best: f64,
    bad_steps: usize,
    cooldown_left: usize,
    steps: usize,
}

impl Default for ReduceLrOnPlateau {
    fn default() -> ReduceLrOnPlateau {
        ReduceLrOnPlateau::new()
    }
}

impl ReduceLrOnPlateau {
    /// PyTorch's defaults: min mode, factor 0.1, patience 10, relative
    /// threshold 1e-4, no cooldown, `min_lr` 0, eps 1e-8.
    pub fn new() -> ReduceLrOnPlateau {
        ReduceLrOnPlateau {
            mode: PlateauMode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_mode: ThresholdMode::Rel,
            cooldown: 0,
            min_lr: 0.0,
            eps: 1e-8,
            best: f64::INFINITY,
            bad_steps: 0,
            cooldown_left: 0,
            steps: 0,
        }
    }

    /// Sets whether lower or higher is better (builder style); the best
    /// value so far restarts from the worst.
    pub fn mode(mut self, mode: PlateauMode) -> ReduceLrOnPlateau {
        self.mode = mode;
        self.best = self.worst();
        self
    }

    /// Sets the factor of each reduction (builder style).
    ///
    /// # Panics
    ///
    /// Unless `factor < 1`, as PyTorch.
    #[track_caller]
    pub fn factor(mut self, factor: f64) -> ReduceLrOnPlateau {
        assert!(
            factor < 1.0,
            "ReduceLrOnPlateau::factor: {factor} must be below 1"
        );
        self.factor = factor;
        self
    }

    /// Sets how many steps without improvement are tolerated (builder
    /// style); the next one reduces the rate.
    pub fn patience(mut self, patience: usize) -> ReduceLrOnPlateau {
        self.patience = patience;
        self
    }

    /// Sets the smallest change that counts as an improvement (builder
    /// style).
    pub fn threshold(mut self, threshold: f64) -> ReduceLrOnPlateau {
        self.threshold = threshold;
        self
    }

    /// Sets how the threshold is measured (builder style).
    pub fn threshold_mode(mut self, threshold_mode: ThresholdMode) -> ReduceLrOnPlateau {
        self.threshold_mode = threshold_mode;
        self
    }

    /// Sets the steps to wait after a reduction before counting bad
    /// steps again (builder style).
    pub fn cooldown(mut self, cooldown: usize) -> ReduceLrOnPlateau {
        self.cooldown = cooldown;
        self
    }

    /// Sets the lowest rate of every group (builder style).
    pub fn min_lr(mut self, min_lr: f32) -> ReduceLrOnPlateau {
        self.min_lr = min_lr;
        self
    }

    /// Sets the smallest reduction applied (builder style).
    pub fn eps(mut self, eps: f64) -> ReduceLrOnPlateau {
        self.eps = eps;
        self
    }

    /// Takes the step's metric and lowers `opt`'s rates if it has not
    /// improved for more than `patience` steps. A NaN metric is never an
    /// improvement.
    pub fn step(&mut self, opt: &mut dyn Optimizer, metric: impl Into<f64>) {
        let current = metric.into();
        self.steps += 1;
        if self.is_better(current) {
            self.best = current;
            self.bad_steps = 0;
        } else {
            self.bad_steps += 1;
        }
        if self.cooldown_left > 0 {
            // Bad steps in the cooldown do not count.
            self.cooldown_left -= 1;
            self.bad_steps = 0;
        }
        if self.bad_steps > self.patience {
            self.reduce(opt);
            self.cooldown_left = self.cooldown;
            self.bad_steps = 0;
        }
    }

    /// The best metric so far (infinite, the worst, before any).
    pub fn best(&self) -> f64 {
        self.best
    }

    /// Steps since the last improvement, as counted against the patience.
    pub fn bad_steps(&self) -> usize {
        self.bad_steps
    }

    /// Whether a cooldown is under way.
    pub fn in_cooldown(&self) -> bool {
        self.cooldown_left > 0
    }

    /// The number of metrics taken.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The value every metric beats at first.
    fn worst(&self) -> f64 {
        match self.mode {
            PlateauMode::Min => f64::INFINITY,
            PlateauMode::Max => f64::NEG_INFINITY,
        }
    }

    /// Whether `current` beats the best by more than the threshold.
    fn is_better(&self, current: f64) -> bool {
        let (best, t) = (self.best, self.threshold);
        match (self.mode, self.threshold_mode) {
            (PlateauMode::Min, ThresholdMode::Rel) => current < best * (1.0 - t),
            (PlateauMode::Min, ThresholdMode::Abs) => current < best - t,
            (PlateauMode::Max, ThresholdMode::Rel) => current > best * (t + 1.0),
            (PlateauMode::Max, ThresholdMode::Abs) => current > best + t,
        }
    }

    /// Multiplies each group's rate by the factor, down to `min_lr`,
    /// unless that changes it by `eps` or less.
    fn reduce(&self, opt: &mut dyn Optimizer) {
        for g in 0..opt.group_count() {
            let old = opt.group_lr(g) as f64;
            let new = (old * self.factor).max(self.min_lr as f64);
            if old - new > self.eps {
                opt.set_group_lr(g, new as f32);
            }
        }
    }
}
