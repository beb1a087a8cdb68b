//! Dynamic loss scaling for `f16` training.

use crate::autograd::no_grad;
use crate::error::Result;
use crate::optim::Optimizer;
use crate::tensor::Tensor;

/// Scales the loss before `backward` so that small gradients survive the
/// trip through `f16` activations, then unscales the gradients, skips the
/// step when any is infinite or NaN and adjusts the scale: halved after
/// each skipped step, doubled after `growth_interval` good steps in a
/// row. PyTorch's `torch.amp.GradScaler`, with its defaults.
///
/// ```
/// # use lazywgpu::{Device, Tensor, DType, amp::{autocast, GradScaler}};
/// # use lazywgpu::nn::{self, Module, functional as F};
/// # use lazywgpu::optim::{Optimizer, Sgd};
/// # let dev = Device::cpu();
/// # let model = nn::Linear::new(784, 10, &dev);
/// # let (x, y) = (Tensor::randn([64, 784], &dev), Tensor::zeros([64], &dev).cast(DType::I32));
/// let mut opt = Sgd::new(model.parameters(), 0.1);
/// let mut scaler = GradScaler::new();
/// let loss = autocast(DType::F16, || F::cross_entropy(&model.forward(&x), &y));
/// scaler.scale(&loss).backward();
/// scaler.step(&mut opt)?; // skipped if a gradient overflowed
/// scaler.update();
/// opt.zero_grad();
/// # Ok::<(), lazywgpu::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct GradScaler {
    scale: f32,
    growth_factor: f32,
    backoff_factor: f32,
    growth_interval: usize,
    /// Good steps in a row since the scale last changed.
    good_steps: usize,
    /// Whether this step's gradients were unscaled, and whether any was
    /// not finite (`None`: not unscaled yet).
    found_inf: Option<bool>,
    /// Steps skipped so far.
    skipped: usize,
}

impl Default for GradScaler {
    fn default() -> GradScaler {
        GradScaler::new()
    }
}

impl GradScaler {
    /// Scale 2^16, growth ×2 every 2,000 good steps, backoff ×0.5.
    pub fn new() -> GradScaler {
        GradScaler {
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            good_steps: 0,
            found_inf: None,
            skipped: 0,
        }
    }

    /// Starts from `scale` instead of 2^16.
    pub fn init_scale(mut self, scale: f32) -> GradScaler {
        self.scale = scale;
        self
    }

    /// Good steps in a row before the scale grows.
    pub fn growth_interval(mut self, steps: usize) -> GradScaler {
        self.growth_interval = steps.max(1);
        self
    }

    /// The current scale.
    pub fn get_scale(&self) -> f32 {
        self.scale
    }

    /// Steps skipped so far because a gradient was not finite.
    pub fn skipped_steps(&self) -> usize {
        self.skipped
    }

    /// `loss` times the current scale (call `backward` on this).
    #[track_caller]
    pub fn scale(&self, loss: &Tensor) -> Tensor {
        loss * self.scale
    }

    /// Divides every gradient of `opt`'s parameters by the scale, in
    /// place, and reads back whether any is infinite or NaN (one wait for
    /// the device, as PyTorch's scaler makes). Call it before clipping
    /// gradients; [`GradScaler::step`] calls it if you did not.
    pub fn unscale_(&mut self, opt: &dyn Optimizer) -> Result<bool> {
        if let Some(found) = self.found_inf {
            return Ok(found);
        }
        let inv = 1.0 / self.scale;
        let grads: Vec<Tensor> = opt.params().iter().filter_map(Tensor::grad).collect();
        let found = no_grad(|| -> Result<bool> {
            let mut probe: Option<Tensor> = None;
            for g in &grads {
                g.mul_(inv);
                // x * 0 is 0 for a finite x and NaN for infinity or NaN.
                let part = (g.float() * 0.0f32).sum_all();
                probe = Some(match probe {
                    Some(p) => p + part,
                    None => part,
                });
            }
            match probe {
                Some(p) => Ok(!p.item::<f32>()?.is_finite()),
                None => Ok(false),
            }
        })?;
        self.found_inf = Some(found);
        Ok(found)
    }

    /// Unscales the gradients (unless [`GradScaler::unscale_`] already
    /// did) and runs `opt.step()` when they are all finite. Returns
    /// whether the step ran.
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> Result<bool> {
        let found = self.unscale_(opt)?;
        if found {
            self.skipped += 1;
        } else {
            opt.step();
        }
        Ok(!found)
    }

    /// Adjusts the scale after a step: ×`backoff` if it was skipped, ×
    /// `growth` after `growth_interval` good steps in a row.
    pub fn update(&mut self) {
        match self.found_inf.take() {
            Some(true) => {
                self.scale *= self.backoff_factor;
                self.good_steps = 0;
            }
            Some(false) => {
                self.good_steps += 1;
                if self.good_steps >= self.growth_interval {
                    self.scale *= self.growth_factor;
                    self.good_steps = 0;
                }
            }
            None => {}
        }
    }
}
