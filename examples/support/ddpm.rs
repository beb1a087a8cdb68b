//! DDPM's training objective (Ho et al., 2020), shared by
//! `examples/diffusion.rs` and its parity test (tests/diffusion_example.rs):
//! the linear beta schedule and the noise-prediction loss.

// The test uses the loss with given draws, the example the one drawing them.
#![allow(dead_code)]

use crate::unet::UNet;
use lazywgpu::nn::functional as F;
use lazywgpu::{DType, Device, Tensor};

/// The linear beta schedule and what DDPM derives from it.
pub struct Schedule {
    /// `alpha_bar[t] = prod_{s <= t} (1 - beta[s])`.
    pub alpha_bar: Vec<f64>,
    /// `sqrt(alpha_bar)` on the device, `[T]`.
    pub sqrt_ab: Tensor,
    /// `sqrt(1 - alpha_bar)` on the device, `[T]`.
    pub sqrt_1m_ab: Tensor,
}

impl Schedule {
    pub fn linear(timesteps: usize, dev: &Device) -> lazywgpu::Result<Schedule> {
        let mut alpha_bar = Vec::with_capacity(timesteps);
        let mut prod = 1.0f64;
        for t in 0..timesteps {
            let frac = if timesteps > 1 {
                t as f64 / (timesteps - 1) as f64
            } else {
                0.0
            };
            let beta = 1e-4 + (0.02 - 1e-4) * frac;
            prod *= 1.0 - beta;
            alpha_bar.push(prod);
        }
        let table = |f: fn(f64) -> f64| {
            let v: Vec<f32> = alpha_bar.iter().map(|&a| f(a) as f32).collect();
            Tensor::from_vec(v, [timesteps], dev)
        };
        Ok(Schedule {
            sqrt_ab: table(f64::sqrt)?,
            sqrt_1m_ab: table(|a| (1.0 - a).sqrt())?,
            alpha_bar,
        })
    }

    pub fn timesteps(&self) -> usize {
        self.alpha_bar.len()
    }
}

/// One training step's loss: noise and timesteps drawn on the device,
/// `x_t = sqrt(ab_t) x0 + sqrt(1 - ab_t) eps`, MSE between the predicted
/// and the drawn noise.
pub fn diffusion_loss(model: &UNet, schedule: &Schedule, x0: &Tensor) -> Tensor {
    let dev = x0.device();
    let b = x0.shape()[0];
    let t_max = schedule.timesteps();
    // floor(U[0, 1) * T) is in 0..T; the minimum guards against rounding.
    let t = (Tensor::rand([b], dev) * t_max as f32)
        .floor()
        .minimum((t_max - 1) as f32);
    let noise = Tensor::randn(x0.shape(), dev);
    noise_prediction_loss(model, schedule, x0, &t, &noise)
}

/// The loss for given timesteps `t` (`[B]`, whole numbers below `T`, as
/// `f32`) and noise (`x0`'s shape): `x_t = sqrt(ab_t) x0 + sqrt(1 - ab_t)
/// noise`, MSE between the noise the model predicts from `x_t` and `noise`.
/// Parity tests give both from a replayable generator.
pub fn noise_prediction_loss(
    model: &UNet,
    schedule: &Schedule,
    x0: &Tensor,
    t: &Tensor,
    noise: &Tensor,
) -> Tensor {
    let b = x0.shape()[0];
    let t_idx = t.cast(DType::I32);
    let a = schedule
        .sqrt_ab
        .index_select(0, &t_idx)
        .reshape([b, 1, 1, 1]);
    let s = schedule
        .sqrt_1m_ab
        .index_select(0, &t_idx)
        .reshape([b, 1, 1, 1]);
    let x_t = x0 * &a + noise * &s;
    F::mse_loss(&model.forward(&x_t, t), noise)
}
