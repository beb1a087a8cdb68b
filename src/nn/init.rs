//! Parameter initialisation, as PyTorch's layers do it by default.

use crate::autograd::no_grad;
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// A leaf parameter of `shape`, uniform in `[-bound, bound)` from the
/// device's seeded generator, requiring grad.
pub(crate) fn uniform_param(shape: &[usize], bound: f32, dev: &Device) -> Tensor {
    let t = no_grad(|| Tensor::rand(shape.to_vec(), dev) * (2.0 * bound) - bound);
    t.requires_grad_(true);
    t
}

/// PyTorch's default weight init for `Linear` and `Conv2d`:
/// `kaiming_uniform_(w, a=sqrt(5))`, which is uniform in
/// `[-1/sqrt(fan_in), 1/sqrt(fan_in))` (`fan_in` = every dim but the first).
pub fn kaiming_uniform(shape: &[usize], dev: &Device) -> Tensor {
    let fan_in: usize = shape[1..].iter().product();
    // gain = sqrt(2 / (1 + a^2)) with a = sqrt(5); bound = gain * sqrt(3 / fan_in).
    let gain = (2.0f32 / 6.0).sqrt();
    let bound = gain * (3.0 / fan_in.max(1) as f32).sqrt();
    uniform_param(shape, bound, dev)
}

/// PyTorch's default bias init: uniform in `[-1/sqrt(fan_in), 1/sqrt(fan_in))`.
pub(crate) fn bias_uniform(len: usize, fan_in: usize, dev: &Device) -> Tensor {
    uniform_param(&[len], 1.0 / (fan_in.max(1) as f32).sqrt(), dev)
}

/// A leaf parameter of `shape` drawn from `normal(0, std)` (GPT-2's and
/// nanoGPT's init), requiring grad.
pub fn normal_param(shape: &[usize], std: f32, dev: &Device) -> Tensor {
    let t = no_grad(|| Tensor::randn(shape.to_vec(), dev) * std);
    t.requires_grad_(true);
    t
}

/// A leaf parameter of `shape` filled with `value`, requiring grad
/// (LayerNorm's weight of ones).
pub(crate) fn constant_param(shape: &[usize], value: f32, dev: &Device) -> Tensor {
    let t = no_grad(|| Tensor::full(shape.to_vec(), value, dev));
    t.requires_grad_(true);
    t
}
