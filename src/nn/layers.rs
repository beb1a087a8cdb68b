//! The layers: Linear, Conv2d, MaxPool2d, Dropout, ReLU, Flatten.

use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};

use super::init::{bias_uniform, kaiming_uniform};
use super::{Module, ParamVisitor};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// `y = x @ weight.T + bias`, weight `[out, in]` (PyTorch's layout, read
/// transposed in place by the matmul; bias and what follows fuse into the
/// matmul's epilogue).
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Tensor,
    /// `[out_features]`, if the layer has one.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A layer with PyTorch's default initialisation (kaiming-uniform
    /// weight, uniform bias, both bounded by `1/sqrt(in_features)`).
    pub fn new(in_features: usize, out_features: usize, dev: &Device) -> Linear {
        Linear {
            weight: kaiming_uniform(&[out_features, in_features], dev),
            bias: Some(bias_uniform(out_features, in_features, dev)),
        }
    }

    /// A layer without bias.
    pub fn no_bias(in_features: usize, out_features: usize, dev: &Device) -> Linear {
        Linear {
            weight: kaiming_uniform(&[out_features, in_features], dev),
            bias: None,
        }
    }
}

impl Module for Linear {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let in_features = self.weight.shape()[1];
        if x.shape().last() != Some(&in_features) {
            panic!(
                "Linear: input of shape {:?} does not end in in_features = {in_features} at {}",
                x.shape(),
                Location::caller()
            );
        }
        let y = x.matmul(&self.weight.t());
        match &self.bias {
            Some(b) => y + b,
            None => y,
        }
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.param("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
}

/// 2-D convolution over `[N, C, H, W]`, weight `[out, in / groups, KH, KW]`.
pub struct Conv2d {
    /// `[out_channels, in_channels / groups, KH, KW]`.
    pub weight: Tensor,
    /// `[out_channels]`.
    pub bias: Option<Tensor>,
    /// Step between windows (rows, cols).
    pub stride: (usize, usize),
    /// Zero padding on each side (rows, cols).
    pub padding: (usize, usize),
    /// Spacing of kernel taps (rows, cols).
    pub dilation: (usize, usize),
    /// Channel groups (1: every output channel sees every input channel;
    /// `in_channels`: depthwise).
    pub groups: usize,
}

impl Conv2d {
    /// A square-kernel convolution with stride 1, no padding, PyTorch's
    /// default initialisation (fan_in = in_channels * k * k).
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize, dev: &Device) -> Conv2d {
        Conv2d::grouped(in_channels, out_channels, kernel, 1, true, dev)
    }

    /// As [`Conv2d::new`] without a bias (PyTorch's `bias=False`, the
    /// convolutions before a BatchNorm).
    pub fn no_bias(in_channels: usize, out_channels: usize, kernel: usize, dev: &Device) -> Conv2d {
        Conv2d::grouped(in_channels, out_channels, kernel, 1, false, dev)
    }

    /// A square-kernel convolution in `groups` channel groups (PyTorch's
    /// `Conv2d(in, out, k, groups=groups, bias=bias)`; fan_in =
    /// in_channels / groups * k * k). Panics unless both channel counts
    /// divide by `groups`, as PyTorch raises.
    #[track_caller]
    pub fn grouped(
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        groups: usize,
        bias: bool,
        dev: &Device,
    ) -> Conv2d {
        if groups == 0
            || !in_channels.is_multiple_of(groups)
            || !out_channels.is_multiple_of(groups)
        {
            panic!(
                "Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups}) at {}",
                Location::caller()
            );
        }
        let fan_in = in_channels / groups * kernel * kernel;
        Conv2d {
            weight: kaiming_uniform(&[out_channels, in_channels / groups, kernel, kernel], dev),
            bias: bias.then(|| bias_uniform(out_channels, fan_in, dev)),
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups,
        }
    }

    /// Sets the stride (builder style).
    pub fn stride(mut self, stride: (usize, usize)) -> Conv2d {
        self.stride = stride;
        self
    }

    /// Sets the zero padding (builder style).
    pub fn padding(mut self, padding: (usize, usize)) -> Conv2d {
        self.padding = padding;
        self
    }

    /// Sets the dilation (builder style).
    pub fn dilation(mut self, dilation: (usize, usize)) -> Conv2d {
        self.dilation = dilation;
        self
    }
}

impl Module for Conv2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.conv2d_groups(
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        )
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.param("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
}

/// Max pooling; stride defaults to the kernel size, as in PyTorch.
pub struct MaxPool2d {
    /// Window size (rows, cols).
    pub kernel: (usize, usize),
    /// Step between windows.
    pub stride: (usize, usize),
    /// Implicit -inf padding on each side.
    pub padding: (usize, usize),
}

impl MaxPool2d {
    /// A `k x k` pool with stride `k`.
    pub fn new(k: usize) -> MaxPool2d {
        MaxPool2d {
            kernel: (k, k),
            stride: (k, k),
            padding: (0, 0),
        }
    }
}

impl Module for MaxPool2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.max_pool2d(self.kernel, self.stride, self.padding)
    }
}

/// Zeroes each element with probability `p` in training and scales the
/// rest by `1/(1-p)`; the identity in evaluation. The mask comes from the
/// device's counter-based generator (seeded by `Device::manual_seed`): a
/// new counter each call is a runtime parameter, so it never recompiles.
pub struct Dropout {
    /// Probability of zeroing an element.
    pub p: f32,
    training: AtomicBool,
}

impl Dropout {
    /// Dropout with probability `p` (in `[0, 1)`), in training mode.
    #[track_caller]
    pub fn new(p: f32) -> Dropout {
        if !(0.0..1.0).contains(&p) {
            panic!(
                "Dropout: p must be in [0, 1), got {p} at {}",
                Location::caller()
            );
        }
        Dropout {
            p,
            training: AtomicBool::new(true),
        }
    }
}

impl Module for Dropout {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        if !self.training.load(Ordering::Relaxed) || self.p == 0.0 {
            return x.clone();
        }
        let keep = Tensor::rand(x.shape().to_vec(), x.device()).ge(self.p);
        keep.where_cond(x * (1.0 / (1.0 - self.p)), 0.0f32)
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.training_flag(&self.training);
    }
}

/// `max(x, 0)`.
pub struct ReLU;

impl Module for ReLU {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.relu()
    }
}

/// Flattens every dim after the first (PyTorch's `Flatten()` default).
pub struct Flatten;

impl Module for Flatten {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        match x.shape().first() {
            Some(&n) => x.reshape([n as isize, -1]),
            None => x.reshape([1]),
        }
    }
}
