//! The layers: Linear, Conv2d, MaxPool2d, Dropout, ReLU, Flatten.

use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};

use super::init::{bias_uniform, kaiming_uniform};
use super::{Module, ParamVisitor};
use crate::runtime::device::Device;
use crate::tensor::{InterpolateMode, Tensor};

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
        v.weight_and_bias(Some(&self.weight), self.bias.as_ref());
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
        check_groups("Conv2d", in_channels, out_channels, groups);
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
        v.weight_and_bias(Some(&self.weight), self.bias.as_ref());
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

/// Flattens dims `start_dim..=end_dim` into one (PyTorch's
/// `nn.Flatten(start_dim=1, end_dim=-1)`). The value [`Flatten`](const@Flatten) (a
/// constant of this type) keeps PyTorch's defaults: every dim after the
/// first; [`Flatten::new`] takes other dims.
#[derive(Clone, Copy, Debug)]
pub struct Flatten {
    /// First dim flattened (negative counts from the end).
    pub start_dim: isize,
    /// Last dim flattened, included (negative counts from the end).
    pub end_dim: isize,
}

/// `Flatten` with PyTorch's defaults (`start_dim = 1`, `end_dim = -1`),
/// so `nn::Flatten` reads as PyTorch's `nn.Flatten()`.
#[allow(non_upper_case_globals)]
pub const Flatten: Flatten = Flatten {
    start_dim: 1,
    end_dim: -1,
};

impl Flatten {
    /// Flattens `start_dim..=end_dim`.
    pub fn new(start_dim: isize, end_dim: isize) -> Flatten {
        Flatten { start_dim, end_dim }
    }
}

impl Module for Flatten {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        if x.rank() == 0 {
            return x.reshape([1]);
        }
        let resolve = |d: isize| if d < 0 { d + x.rank() as isize } else { d };
        let (start, end) = (resolve(self.start_dim), resolve(self.end_dim));
        if start < 0 || end >= x.rank() as isize || start > end {
            panic!(
                "Flatten: dims {}..={} do not fit input of shape {:?} at {}",
                self.start_dim,
                self.end_dim,
                x.shape(),
                Location::caller()
            );
        }
        let (start, end) = (start as usize, end as usize);
        let s = x.shape();
        let mut shape: Vec<usize> = s[..start].to_vec();
        shape.push(s[start..=end].iter().product());
        shape.extend_from_slice(&s[end + 1..]);
        x.reshape(shape)
    }
}

/// Average pooling (PyTorch's `nn.AvgPool2d`; padding counts in the
/// average, `count_include_pad=True`); stride defaults to the kernel.
pub struct AvgPool2d {
    /// Window size (rows, cols).
    pub kernel: (usize, usize),
    /// Step between windows.
    pub stride: (usize, usize),
    /// Zero padding on each side.
    pub padding: (usize, usize),
}

impl AvgPool2d {
    /// A `k x k` pool with stride `k`.
    pub fn new(k: usize) -> AvgPool2d {
        AvgPool2d {
            kernel: (k, k),
            stride: (k, k),
            padding: (0, 0),
        }
    }
}

impl Module for AvgPool2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.avg_pool2d(self.kernel, self.stride, self.padding)
    }
}

/// Adaptive average pooling to a fixed `(OH, OW)` (PyTorch's
/// `nn.AdaptiveAvgPool2d`; `(1, 1)` is ResNet's global pool).
pub struct AdaptiveAvgPool2d {
    /// Output size (rows, cols).
    pub output: (usize, usize),
}

impl AdaptiveAvgPool2d {
    /// Pools to `output`.
    pub fn new(output: (usize, usize)) -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d { output }
    }
}

impl Module for AdaptiveAvgPool2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.adaptive_avg_pool2d(self.output)
    }
}

/// Resizing as a layer (PyTorch's `nn.Upsample`): see
/// [`Tensor::interpolate`].
pub struct Upsample {
    /// Output size, or `None` when `scale_factor` gives it.
    pub size: Option<(usize, usize)>,
    /// Factor on each dim, or `None` when `size` is given.
    pub scale_factor: Option<(f64, f64)>,
    /// Nearest or bilinear.
    pub mode: InterpolateMode,
    /// Bilinear's `align_corners`.
    pub align_corners: bool,
}

impl Upsample {
    /// Scales H and W by `factor` (`Upsample(scale_factor=factor, mode=mode)`).
    pub fn scale(factor: f64, mode: InterpolateMode) -> Upsample {
        Upsample {
            size: None,
            scale_factor: Some((factor, factor)),
            mode,
            align_corners: false,
        }
    }

    /// Resizes to `size`.
    pub fn size(size: (usize, usize), mode: InterpolateMode) -> Upsample {
        Upsample {
            size: Some(size),
            scale_factor: None,
            mode,
            align_corners: false,
        }
    }

    /// Sets `align_corners` (builder style).
    pub fn align_corners(mut self, on: bool) -> Upsample {
        self.align_corners = on;
        self
    }
}

impl Module for Upsample {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.interpolate(self.size, self.scale_factor, self.mode, self.align_corners)
    }
}

/// 1-D convolution over `[N, C, L]`, weight `[out, in / groups, K]`
/// (PyTorch's `nn.Conv1d`).
pub struct Conv1d {
    /// `[out_channels, in_channels / groups, K]`.
    pub weight: Tensor,
    /// `[out_channels]`.
    pub bias: Option<Tensor>,
    /// Step between windows.
    pub stride: usize,
    /// Zero padding on each side.
    pub padding: usize,
    /// Spacing of kernel taps.
    pub dilation: usize,
    /// Channel groups.
    pub groups: usize,
}

impl Conv1d {
    /// `Conv1d(in, out, kernel)` with PyTorch's default initialisation.
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize, dev: &Device) -> Conv1d {
        Conv1d::grouped(in_channels, out_channels, kernel, 1, true, dev)
    }

    /// `Conv1d(in, out, kernel, groups=groups, bias=bias)`.
    #[track_caller]
    pub fn grouped(
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        groups: usize,
        bias: bool,
        dev: &Device,
    ) -> Conv1d {
        check_groups("Conv1d", in_channels, out_channels, groups);
        let fan_in = in_channels / groups * kernel;
        Conv1d {
            weight: kaiming_uniform(&[out_channels, in_channels / groups, kernel], dev),
            bias: bias.then(|| bias_uniform(out_channels, fan_in, dev)),
            stride: 1,
            padding: 0,
            dilation: 1,
            groups,
        }
    }

    /// Sets the stride (builder style).
    pub fn stride(mut self, stride: usize) -> Conv1d {
        self.stride = stride;
        self
    }

    /// Sets the zero padding (builder style).
    pub fn padding(mut self, padding: usize) -> Conv1d {
        self.padding = padding;
        self
    }
}

impl Module for Conv1d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.conv1d(
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        )
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.weight_and_bias(Some(&self.weight), self.bias.as_ref());
    }
}

/// Transposed 2-D convolution (PyTorch's `nn.ConvTranspose2d`), weight
/// `[in, out / groups, KH, KW]`; see [`Tensor::conv_transpose2d`].
pub struct ConvTranspose2d {
    /// `[in_channels, out_channels / groups, KH, KW]`.
    pub weight: Tensor,
    /// `[out_channels]`.
    pub bias: Option<Tensor>,
    /// Spread of the input (rows, cols).
    pub stride: (usize, usize),
    /// Cut from each side of the output (rows, cols).
    pub padding: (usize, usize),
    /// Added to one side of the output (rows, cols).
    pub output_padding: (usize, usize),
    /// Channel groups.
    pub groups: usize,
    /// Spacing of kernel taps.
    pub dilation: (usize, usize),
}

impl ConvTranspose2d {
    /// `ConvTranspose2d(in, out, kernel)` with PyTorch's default
    /// initialisation (its fan_in is `out / groups * k * k`: the weight's
    /// dim 1 onwards).
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize, dev: &Device) -> Self {
        ConvTranspose2d::grouped(in_channels, out_channels, kernel, 1, true, dev)
    }

    /// `ConvTranspose2d(in, out, kernel, groups=groups, bias=bias)`.
    #[track_caller]
    pub fn grouped(
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        groups: usize,
        bias: bool,
        dev: &Device,
    ) -> Self {
        check_groups("ConvTranspose2d", in_channels, out_channels, groups);
        let fan_in = out_channels / groups * kernel * kernel;
        ConvTranspose2d {
            weight: kaiming_uniform(&[in_channels, out_channels / groups, kernel, kernel], dev),
            bias: bias.then(|| bias_uniform(out_channels, fan_in, dev)),
            stride: (1, 1),
            padding: (0, 0),
            output_padding: (0, 0),
            groups,
            dilation: (1, 1),
        }
    }

    /// Sets the stride (builder style).
    pub fn stride(mut self, stride: (usize, usize)) -> Self {
        self.stride = stride;
        self
    }

    /// Sets the padding (builder style).
    pub fn padding(mut self, padding: (usize, usize)) -> Self {
        self.padding = padding;
        self
    }

    /// Sets the output padding (builder style).
    pub fn output_padding(mut self, output_padding: (usize, usize)) -> Self {
        self.output_padding = output_padding;
        self
    }
}

impl Module for ConvTranspose2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.conv_transpose2d(
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.output_padding,
            self.groups,
            self.dilation,
        )
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.weight_and_bias(Some(&self.weight), self.bias.as_ref());
    }
}

/// Panics, as PyTorch raises, unless both channel counts divide by `groups`.
#[track_caller]
fn check_groups(layer: &str, in_channels: usize, out_channels: usize, groups: usize) {
    if groups == 0 || !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
        panic!(
            "{layer}: in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups}) at {}",
            Location::caller()
        );
    }
}
