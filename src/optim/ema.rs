//! An exponential moving average of weights, updated on the device.

use crate::autograd::NoGradGuard;
use crate::tensor::Tensor;

/// An exponential moving average of a list of tensors (a model's
/// parameters), kept on their device: each [`Ema::update`] records
/// `ema = decay * ema + (1 - decay) * param` in place, under `no_grad`, so
/// it fuses into the step's graph like an optimiser update and its buffers
/// are reused from step to step. The decay is a scalar runtime parameter:
/// changing it (a warm-up of the decay) compiles nothing.
///
/// The average starts at the tensors' values when it is made and every
/// update decays it, as timm's `ModelEmaV2`; PyTorch's
/// `torch.optim.swa_utils.AveragedModel` with an EMA `avg_fn` instead
/// copies the parameters at its first update. Evaluate with the average
/// through [`Ema::copy_to`] (into the model's parameters, or into a second
/// model's) or read it with [`Ema::shadow`].
///
/// ```
/// use lazywgpu::nn::{self, Module, functional as F};
/// use lazywgpu::optim::{Ema, Optimizer, Sgd};
/// use lazywgpu::{Device, Tensor};
/// # fn main() -> lazywgpu::Result<()> {
/// let dev = Device::cpu();
/// let model = nn::Linear::new(3, 1, &dev);
/// let eval_model = nn::Linear::new(3, 1, &dev);
/// let x = Tensor::from_vec(vec![1.0f32, 0.0, -1.0, 0.5, 2.0, 1.0], [2, 3], &dev)?;
/// let y = Tensor::from_vec(vec![1.0f32, -1.0], [2, 1], &dev)?;
/// let mut opt = Sgd::new(model.parameters(), 0.1);
/// let mut ema = Ema::new(&model.parameters(), 0.99);
/// for _ in 0..3 {
///     opt.zero_grad();
///     F::mse_loss(&model.forward(&x), &y).backward();
///     opt.step();
///     ema.update(&model.parameters()); // in place, on the device
///     dev.mark_step()?; // the update and the average: one graph
/// }
/// ema.copy_to(&eval_model.parameters()); // evaluate with the average
/// let first = eval_model.weight.to_vec::<f32>()?;
/// assert_eq!(first, ema.shadow()[0].to_vec::<f32>()?);
/// # Ok(()) }
/// ```
pub struct Ema {
    shadow: Vec<Tensor>,
    decay: f32,
    updates: usize,
}

impl Ema {
    /// An average of `params` starting at their current values, with
    /// `decay` the weight of the old average at each update (0.999 or
    /// 0.9999 are usual).
    ///
    /// # Panics
    ///
    /// If `decay` is not in `[0, 1]` or a tensor is not floating-point.
    #[track_caller]
    pub fn new(params: &[Tensor], decay: f32) -> Ema {
        check_decay("Ema::new", decay);
        for (k, p) in params.iter().enumerate() {
            assert!(
                p.dtype().is_float(),
                "Ema::new: tensor {k} has dtype {} (shape {:?}); only floating-point tensors are averaged",
                p.dtype(),
                p.shape()
            );
        }
        let _guard = NoGradGuard::new();
        Ema {
            shadow: params.iter().map(Tensor::deep_clone).collect(),
            decay,
            updates: 0,
        }
    }

    /// Records `ema = decay * ema + (1 - decay) * param` for each tensor,
    /// in place on the average (nothing runs before the next
    /// `mark_step` or readback).
    ///
    /// # Panics
    ///
    /// If `params` does not match the tensors the average was made from
    /// in number and shapes.
    #[track_caller]
    pub fn update(&mut self, params: &[Tensor]) {
        self.check_like("Ema::update", params);
        let _guard = NoGradGuard::new();
        let decay = self.decay;
        for (ema, p) in self.shadow.iter().zip(params) {
            ema.mul_(decay).add_(p * (1.0 - decay));
        }
        self.updates += 1;
    }

    /// Copies the average into `params` in place (under `no_grad`), to
    /// evaluate a model with it.
    ///
    /// # Panics
    ///
    /// As [`Ema::update`].
    #[track_caller]
    pub fn copy_to(&self, params: &[Tensor]) {
        self.check_like("Ema::copy_to", params);
        let _guard = NoGradGuard::new();
        for (ema, p) in self.shadow.iter().zip(params) {
            p.copy_(ema);
        }
    }

    /// The averaged tensors, in the order of the tensors they average.
    pub fn shadow(&self) -> &[Tensor] {
        &self.shadow
    }

    /// The decay.
    pub fn decay(&self) -> f32 {
        self.decay
    }

    /// Sets the decay of the next updates (a runtime parameter: no
    /// recompilation).
    ///
    /// # Panics
    ///
    /// If `decay` is not in `[0, 1]`.
    #[track_caller]
    pub fn set_decay(&mut self, decay: f32) {
        check_decay("Ema::set_decay", decay);
        self.decay = decay;
    }

    /// The number of updates so far (for a decay warm-up).
    pub fn updates(&self) -> usize {
        self.updates
    }

    /// Panics naming `op` unless `params` are as many as the averaged
    /// tensors and each has its average's shape.
    #[track_caller]
    fn check_like(&self, op: &str, params: &[Tensor]) {
        assert_eq!(
            params.len(),
            self.shadow.len(),
            "{op}: {} tensors, the average has {}",
            params.len(),
            self.shadow.len()
        );
        for (k, (ema, p)) in self.shadow.iter().zip(params).enumerate() {
            assert_eq!(
                p.shape(),
                ema.shape(),
                "{op}: tensor {k} has shape {:?}, its average {:?}",
                p.shape(),
                ema.shape()
            );
        }
    }
}

/// Panics naming `op` unless `decay` is in `[0, 1]`.
#[track_caller]
fn check_decay(op: &str, decay: f32) {
    assert!(
        (0.0..=1.0).contains(&decay),
        "{op}: decay {decay} is not between 0 and 1"
    );
}
