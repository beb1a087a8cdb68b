//! Parameter initialisation, as PyTorch's layers do it by default, and
//! PyTorch's in-place `nn.init` functions (`kaiming_normal_`, `normal_`,
//! `zeros_`, ...) for models that initialise their own way.
//!
//! Parameters are drawn on the host, eagerly, from the device's seeded
//! generator (the same numbers `Tensor::rand`/`randn` would give at that
//! point of the stream) and uploaded as data. Left lazy, the draws would
//! be fused into the first training step, whose kernels would then differ
//! from every later step's: a second compile of the step and, with sizes
//! that change, generic kernels made only at the third (see
//! `kernel::changing`). Optimisers make their state the same way
//! (`Tensor::stored_zeros_like`); a user's own pending leaf (a
//! `randn(..).requires_grad_(true)`) still makes the first step's graph
//! differ, and that compile is told apart as warm-up
//! (`GraphKey::explain_recompile`).

use std::panic::Location;

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

/// Which fan scales a Kaiming initialisation (PyTorch's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// `fan_in`: every dim but the first (times the receptive field):
    /// keeps the forward pass's variance.
    FanIn,
    /// `fan_out`: the first dim times the receptive field: keeps the
    /// backward pass's variance (torchvision's ResNet uses it).
    FanOut,
}

/// The nonlinearity that follows, for the initialisation's gain
/// (PyTorch's `calculate_gain`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nonlinearity {
    /// Gain 1 (linear layers, convolutions, sigmoid).
    Linear,
    /// Gain `sqrt(2)`.
    Relu,
    /// Gain `sqrt(2 / (1 + slope^2))`.
    LeakyRelu(f32),
    /// Gain 5/3.
    Tanh,
}

impl Nonlinearity {
    fn gain(self) -> f32 {
        match self {
            Nonlinearity::Linear => 1.0,
            Nonlinearity::Relu => 2.0f32.sqrt(),
            Nonlinearity::LeakyRelu(slope) => (2.0 / (1.0 + slope * slope)).sqrt(),
            Nonlinearity::Tanh => 5.0 / 3.0,
        }
    }
}

/// `(fan_in, fan_out)` of a weight of `shape` (PyTorch's
/// `_calculate_fan_in_and_fan_out`); panics below two dims, as PyTorch
/// raises.
#[track_caller]
fn fans(op: &str, shape: &[usize]) -> (usize, usize) {
    if shape.len() < 2 {
        panic!(
            "{op}: fan in and fan out need at least 2 dims, got shape {shape:?} at {}",
            Location::caller()
        );
    }
    let receptive: usize = shape[2..].iter().product();
    (shape[1] * receptive, shape[0] * receptive)
}

/// Overwrites `t` (in place, without gradient) with `values`.
fn overwrite(t: &Tensor, values: Vec<f32>) -> &Tensor {
    let new = Tensor::from_vec(values, t.shape().to_vec(), t.device())
        .unwrap_or_else(|e| panic!("initialising a tensor of shape {:?}: {e}", t.shape()));
    crate::autograd::no_grad(|| {
        t.copy_(&new);
    });
    t
}

/// Fills `t` in place from `normal(mean, std)`, drawn from the device's
/// seeded generator (PyTorch's `nn.init.normal_`).
#[track_caller]
pub fn normal_(t: &Tensor, mean: f32, std: f32) -> &Tensor {
    let values = draws(t.numel(), t.device(), true)
        .map(|z| mean + z * std)
        .collect();
    overwrite(t, values)
}

/// Fills `t` in place from `uniform(low, high)` (PyTorch's `uniform_`).
#[track_caller]
pub fn uniform_(t: &Tensor, low: f32, high: f32) -> &Tensor {
    let values = draws(t.numel(), t.device(), false)
        .map(|u| low + u * (high - low))
        .collect();
    overwrite(t, values)
}

/// Fills `t` with `value` in place (PyTorch's `constant_`).
pub fn constant_(t: &Tensor, value: f32) -> &Tensor {
    overwrite(t, vec![value; t.numel()])
}

/// Fills `t` with zeros in place (PyTorch's `zeros_`).
pub fn zeros_(t: &Tensor) -> &Tensor {
    constant_(t, 0.0)
}

/// Fills `t` with ones in place (PyTorch's `ones_`).
pub fn ones_(t: &Tensor) -> &Tensor {
    constant_(t, 1.0)
}

/// Kaiming (He) normal initialisation in place: `normal(0, gain /
/// sqrt(fan))` (PyTorch's `kaiming_normal_(t, a, mode, nonlinearity)`;
/// its default `nonlinearity='leaky_relu'` with `a = 0` is
/// `Nonlinearity::LeakyRelu(0.0)`).
#[track_caller]
pub fn kaiming_normal_(t: &Tensor, mode: FanMode, nonlinearity: Nonlinearity) -> &Tensor {
    let std = nonlinearity.gain() / (fan("kaiming_normal_", t, mode) as f32).sqrt();
    normal_(t, 0.0, std)
}

/// Kaiming (He) uniform initialisation in place: uniform in `[-b, b)`
/// with `b = gain * sqrt(3 / fan)` (PyTorch's `kaiming_uniform_`).
#[track_caller]
pub fn kaiming_uniform_(t: &Tensor, mode: FanMode, nonlinearity: Nonlinearity) -> &Tensor {
    let bound = nonlinearity.gain() * (3.0 / fan("kaiming_uniform_", t, mode) as f32).sqrt();
    uniform_(t, -bound, bound)
}

/// Xavier (Glorot) uniform initialisation in place: bound `gain *
/// sqrt(6 / (fan_in + fan_out))` (PyTorch's `xavier_uniform_`).
#[track_caller]
pub fn xavier_uniform_(t: &Tensor, gain: f32) -> &Tensor {
    let (fan_in, fan_out) = fans("xavier_uniform_", t.shape());
    let bound = gain * (6.0 / (fan_in + fan_out).max(1) as f32).sqrt();
    uniform_(t, -bound, bound)
}

/// The fan `mode` picks for `t` (at least 1).
#[track_caller]
fn fan(op: &str, t: &Tensor, mode: FanMode) -> usize {
    let (fan_in, fan_out) = fans(op, t.shape());
    match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    }
    .max(1)
}
