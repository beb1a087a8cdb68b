//! Parameter initialisation, as PyTorch's layers do it by default.
//!
//! Parameters are drawn on the host, eagerly, from the device's seeded
//! generator (the same numbers `Tensor::rand`/`randn` would give at that
//! point of the stream) and uploaded as data. Left lazy, the draws would
//! be fused into the first training step, whose kernels would then differ
//! from every later step's: a second compile of the step and, with sizes
//! that change, generic kernels made only at the third (see
//! `runtime::gpu::generalize`). Optimisers make their state the same way
//! (`Tensor::stored_zeros_like`); a user's own pending leaf (a
//! `randn(..).requires_grad_(true)`) still makes the first step's graph
//! differ, and that compile is told apart as warm-up
//! (`GraphKey::explain_recompile`).

use crate::cpu::rng;
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// A leaf parameter of `shape` holding `values`, requiring grad.
#[track_caller]
fn param(shape: &[usize], values: Vec<f32>, dev: &Device) -> Tensor {
    let t = Tensor::from_vec(values, shape.to_vec(), dev)
        .unwrap_or_else(|e| panic!("initialising a parameter of shape {shape:?}: {e}"));
    t.requires_grad_(true);
    t
}

/// `numel` draws (uniform, or standard normal when `normal`) from the
/// device's generator, in stream order.
fn draws(numel: usize, dev: &Device, normal: bool) -> impl Iterator<Item = f32> {
    rng::stream(dev.next_rng(numel), numel, normal)
}

/// A leaf parameter of `shape`, uniform in `[-bound, bound)` from the
/// device's seeded generator, requiring grad.
#[track_caller]
pub(crate) fn uniform_param(shape: &[usize], bound: f32, dev: &Device) -> Tensor {
    let numel = shape.iter().product();
    let values = draws(numel, dev, false)
        .map(|u| u * (2.0 * bound) - bound)
        .collect();
    param(shape, values, dev)
}

/// PyTorch's default weight init for `Linear` and `Conv2d`:
/// `kaiming_uniform_(w, a=sqrt(5))`, which is uniform in
/// `[-1/sqrt(fan_in), 1/sqrt(fan_in))` (`fan_in` = every dim but the first).
#[track_caller]
pub fn kaiming_uniform(shape: &[usize], dev: &Device) -> Tensor {
    let fan_in: usize = shape[1..].iter().product();
    // gain = sqrt(2 / (1 + a^2)) with a = sqrt(5); bound = gain * sqrt(3 / fan_in).
    let gain = (2.0f32 / 6.0).sqrt();
    let bound = gain * (3.0 / fan_in.max(1) as f32).sqrt();
    uniform_param(shape, bound, dev)
}

/// PyTorch's default bias init: uniform in `[-1/sqrt(fan_in), 1/sqrt(fan_in))`.
#[track_caller]
pub(crate) fn bias_uniform(len: usize, fan_in: usize, dev: &Device) -> Tensor {
    uniform_param(&[len], 1.0 / (fan_in.max(1) as f32).sqrt(), dev)
}

/// A leaf parameter of `shape` drawn from `normal(0, std)` (GPT-2's and
/// nanoGPT's init), requiring grad.
#[track_caller]
pub fn normal_param(shape: &[usize], std: f32, dev: &Device) -> Tensor {
    let numel = shape.iter().product();
    let values = draws(numel, dev, true).map(|z| z * std).collect();
    param(shape, values, dev)
}

/// A leaf parameter of `shape` filled with `value`, requiring grad
/// (LayerNorm's weight of ones).
#[track_caller]
pub(crate) fn constant_param(shape: &[usize], value: f32, dev: &Device) -> Tensor {
    param(shape, vec![value; shape.iter().product()], dev)
}
