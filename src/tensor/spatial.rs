//! Spatial ops built from the convolution and from index arithmetic:
//! `conv1d`, `conv_transpose2d`, `interpolate` (nearest and bilinear) and
//! `adaptive_avg_pool2d`, each with PyTorch's semantics. None adds a
//! kernel kind: each is a composition of ops that already fuse (views,
//! pads, gathers, matmuls), so their gradients come from autograd.

use std::panic::Location;

use super::Tensor;
use crate::autograd::conv::{pad_or_crop_hw, transposed_conv_by_phases};
use crate::runtime::device::Device;

/// How [`Tensor::interpolate`] fills the new positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpolateMode {
    /// The source element at `floor(dst * scale)` (PyTorch's `'nearest'`).
    Nearest,
    /// Linear in each of H and W between the two nearest source elements
    /// (PyTorch's `'bilinear'`).
    Bilinear,
}

/// Source positions and weights for resizing one dim of `input` elements
/// to `output`: `(low index, high index, weight of high)` per output
/// position. `scale` is PyTorch's: `1 / scale_factor` when a factor was
/// given, `input / output` otherwise (computed in f32, as PyTorch's CPU
/// kernels do, so the indices agree at the boundaries).
fn resize_taps(
    input: usize,
    output: usize,
    scale: Option<f32>,
    mode: InterpolateMode,
    align_corners: bool,
) -> (Vec<i32>, Vec<i32>, Vec<f32>) {
    let last = input.saturating_sub(1) as i32;
    let mut taps = (Vec::new(), Vec::new(), Vec::new());
    let area_scale = if align_corners && mode == InterpolateMode::Bilinear {
        if output > 1 {
            last as f32 / (output - 1) as f32
        } else {
            0.0
        }
    } else {
        scale.unwrap_or(input as f32 / output as f32)
    };
    for dst in 0..output {
        let (lo, hi, w) = match mode {
            InterpolateMode::Nearest => {
                let i = ((dst as f32 * area_scale).floor() as i32).min(last);
                (i, i, 0.0)
            }
            InterpolateMode::Bilinear => {
                let src = if align_corners {
                    area_scale * dst as f32
                } else {
                    (area_scale * (dst as f32 + 0.5) - 0.5).max(0.0)
                };
                let lo = (src.floor() as i32).min(last);
                let hi = (lo + 1).min(last);
                (lo, hi, src - lo as f32)
            }
        };
        taps.0.push(lo);
        taps.1.push(hi);
        taps.2.push(w);
    }
    taps
}

/// A 1-D tensor of `values` on `dev` (host data for index and weight
/// tables; building one cannot fail for data of the right length).
fn table<T: crate::dtype::Element>(values: Vec<T>, dev: &Device) -> Tensor {
    let n = values.len();
    Tensor::from_vec(values, [n], dev).expect("a table's data has its own length")
}

impl Tensor {
    /// 1-D convolution of `[N, C, L]` by `weight` `[OC, C / groups, K]`
    /// with optional `bias` `[OC]` (PyTorch's `F.conv1d`): the 2-D
    /// convolution over a height of 1.
    #[track_caller]
    pub fn conv1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Tensor {
        if self.rank() != 3 || weight.rank() != 3 {
            panic!(
                "conv1d: expects input [N, C, L] and weight [OC, C / groups, K], got {:?} and {:?} at {}",
                self.shape(),
                weight.shape(),
                Location::caller()
            );
        }
        self.unsqueeze(2)
            .conv2d_groups(
                &weight.unsqueeze(2),
                bias,
                (1, stride),
                (0, padding),
                (1, dilation),
                groups,
            )
            .squeeze(2)
    }

    /// Transposed 2-D convolution (PyTorch's `F.conv_transpose2d`): the
    /// gradient of `conv2d` with respect to its input, used as a layer.
    /// `self` is `[N, C_in, H, W]`, `weight` `[C_in, C_out / groups, KH,
    /// KW]`, `bias` `[C_out]`; the output is `[N, C_out, (H - 1) * stride
    /// - 2 * padding + dilation * (KH - 1) + output_padding + 1, ...]`.
    ///
    /// Computed as a convolution: the input spread by the stride (zeros
    /// between elements), padded by `dilation * (k - 1) - padding` (and
    /// `output_padding` more at the end), convolved with the flipped kernel
    /// whose channel dims are swapped within each group.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        output_padding: (usize, usize),
        groups: usize,
        dilation: (usize, usize),
    ) -> Tensor {
        let _op = crate::graph::record_as("conv_transpose2d");
        let loc = Location::caller();
        let fits = self.rank() == 4
            && weight.rank() == 4
            && self.shape()[2..].iter().all(|&d| d > 0)
            && weight.shape()[2..].iter().all(|&d| d > 0)
            && dilation.0 > 0
            && dilation.1 > 0
            && groups > 0
            && weight.shape()[0] == self.shape()[1]
            && self.shape()[1].is_multiple_of(groups)
            && stride.0 > 0
            && stride.1 > 0
            && output_padding.0 < stride.0.max(dilation.0)
            && output_padding.1 < stride.1.max(dilation.1);
        if !fits {
            panic!(
                "conv_transpose2d: input {:?} and weight {:?} do not match (expected a non-empty input [N, C_in, H, W], \
                 weight [C_in, C_out / groups, KH, KW] with C_in divisible by groups = {groups}, positive stride {stride:?} \
                 and dilation {dilation:?}, output_padding {output_padding:?} smaller than stride or dilation) at {loc}",
                self.shape(),
                weight.shape()
            );
        }
        let (c_in, h, w) = (self.shape()[1], self.shape()[2], self.shape()[3]);
        let (c_out_g, kh, kw) = (weight.shape()[1], weight.shape()[2], weight.shape()[3]);
        // Group g's [C_in/G, C_out/G, KH, KW] becomes the convolution
        // weight [C_out/G, C_in/G, KH, KW].
        let kernel = weight
            .reshape([groups, c_in / groups, c_out_g, kh, kw])
            .transpose(1, 2)
            .reshape([groups * c_out_g, c_in / groups, kh, kw]);
        // PyTorch's output size; `None` when the padding takes it all (the
        // convolution below reports that).
        let out_size = |i: usize, s: usize, p: usize, k: usize, op: usize| {
            ((i - 1) * s + k + op).checked_sub(2 * p).filter(|&o| o > 0)
        };
        let out = (
            out_size(h, stride.0, padding.0, kh, output_padding.0),
            out_size(w, stride.1, padding.1, kw, output_padding.1),
        );
        if let ((Some(oh), Some(ow)), true) = (out, stride != (1, 1) && dilation == (1, 1)) {
            let phased =
                transposed_conv_by_phases(self, &kernel, bias, (oh, ow), stride, padding, groups);
            if let Some(y) = phased {
                return y;
            }
        }
        let spread = spread_by_stride(self, stride);
        let lead = |d: usize, k: usize, p: usize| (d * (k - 1)) as isize - p as isize;
        let (lead_h, lead_w) = (
            lead(dilation.0, kh, padding.0),
            lead(dilation.1, kw, padding.1),
        );
        let padded = pad_or_crop_hw(
            &spread,
            (lead_h, lead_h + output_padding.0 as isize),
            (lead_w, lead_w + output_padding.1 as isize),
        );
        // ... flipped in space.
        let kernel = kernel.flip([2, 3]);
        padded.conv2d_groups(&kernel, bias, (1, 1), (0, 0), dilation, groups)
    }

    /// Resizes the last two dims of `[N, C, H, W]` (PyTorch's
    /// `F.interpolate` for 4-D input) to `size`, or by `scale_factor`
    /// (output `floor(H * factor)`, and the factor itself, not the sizes'
    /// ratio, maps positions, as PyTorch does by default). Exactly one of
    /// the two must be given. `align_corners` applies to bilinear only.
    ///
    /// Each dim is a gather of the source rows (two for bilinear, blended
    /// by per-position weights), so the gradient scatters back through
    /// the same gathers.
    #[track_caller]
    pub fn interpolate(
        &self,
        size: Option<(usize, usize)>,
        scale_factor: Option<(f64, f64)>,
        mode: InterpolateMode,
        align_corners: bool,
    ) -> Tensor {
        let _op = crate::graph::record_as("interpolate");
        let loc = Location::caller();
        let positive = scale_factor.is_none_or(|(a, b)| a > 0.0 && b > 0.0);
        if self.rank() != 4
            || !self.dtype().is_float()
            || size.is_some() == scale_factor.is_some()
            || !positive
        {
            panic!(
                "interpolate: expects float [N, C, H, W] input and exactly one of size or a positive scale_factor, \
                 got {:?} ({}), size {size:?}, scale_factor {scale_factor:?} at {loc}",
                self.shape(),
                self.dtype()
            );
        }
        let (h, w) = (self.shape()[2], self.shape()[3]);
        let (out, scale) = match (size, scale_factor) {
            (Some(s), _) => (s, (None, None)),
            (None, Some((a, b))) => (
                (
                    (h as f64 * a).floor() as usize,
                    (w as f64 * b).floor() as usize,
                ),
                (Some((1.0 / a) as f32), Some((1.0 / b) as f32)),
            ),
            (None, None) => unreachable!("checked above"),
        };
        if out.0 == 0 || out.1 == 0 {
            panic!(
                "interpolate: output size {out:?} (from size {size:?}, scale_factor {scale_factor:?}, input {:?}) must be positive at {loc}",
                self.shape()
            );
        }
        // Blended in f32 and rounded once, as PyTorch does for half types.
        let x = self.cast(crate::DType::F32);
        let rows = x.resize_dim(2, out.0, scale.0, mode, align_corners);
        rows.resize_dim(3, out.1, scale.1, mode, align_corners)
            .cast(self.dtype())
    }

    /// Resizes dim `axis` to `output` positions (see [`Tensor::interpolate`]).
    fn resize_dim(
        &self,
        axis: usize,
        output: usize,
        scale: Option<f32>,
        mode: InterpolateMode,
        align_corners: bool,
    ) -> Tensor {
        let input = self.shape()[axis];
        if input == output && scale.is_none_or(|s| s == 1.0) {
            return self.clone();
        }
        let dev = self.device();
        let (lo, hi, weight) = resize_taps(input, output, scale, mode, align_corners);
        let low = self.index_select(axis as isize, &table(lo, dev));
        if mode == InterpolateMode::Nearest {
            return low;
        }
        let mut shape = vec![1isize; self.rank() - axis];
        shape[0] = output as isize;
        let weight = table(weight, dev).reshape(shape);
        let high = self.index_select(axis as isize, &table(hi, dev));
        &low + (high - &low) * weight
    }

    /// Average pooling of `[N, C, H, W]` to `output` `(OH, OW)` bins
    /// (PyTorch's `adaptive_avg_pool2d`): bin `i` of a dim of `n` covers
    /// `floor(i n / out) .. ceil((i + 1) n / out)`. A 1x1 output is the
    /// mean over H and W; sizes that divide evenly are an `avg_pool2d`;
    /// others are two small matmuls with the bins' averaging matrices.
    #[track_caller]
    pub fn adaptive_avg_pool2d(&self, output: (usize, usize)) -> Tensor {
        let _op = crate::graph::record_as("adaptive_avg_pool2d");
        if self.rank() != 4 || !self.dtype().is_float() || output.0 == 0 || output.1 == 0 {
            panic!(
                "adaptive_avg_pool2d: expects float [N, C, H, W] input and a positive output size, got {:?} ({}) and {output:?} at {}",
                self.shape(),
                self.dtype(),
                Location::caller()
            );
        }
        let (h, w) = (self.shape()[2], self.shape()[3]);
        if output == (1, 1) {
            return self.mean([2, 3], true);
        }
        if h.is_multiple_of(output.0) && w.is_multiple_of(output.1) && h > 0 && w > 0 {
            let k = (h / output.0, w / output.1);
            return self.avg_pool2d(k, k, (0, 0));
        }
        let dev = self.device();
        let rows = bins(h, output.0, dev);
        let cols = bins(w, output.1, dev);
        // In f32 whatever the input's float dtype (the bins are f32).
        rows.matmul(&self.cast(crate::DType::F32))
            .matmul(&cols.t())
            .cast(self.dtype())
    }
}

/// The `[out, n]` matrix that averages each adaptive bin of a dim of `n`.
fn bins(n: usize, out: usize, dev: &Device) -> Tensor {
    let mut m = vec![0.0f32; out * n];
    for i in 0..out {
        let (start, end) = (i * n / out, ((i + 1) * n).div_ceil(out));
        for j in start..end {
            m[i * n + j] = 1.0 / (end - start) as f32;
        }
    }
    Tensor::from_vec(m, [out, n], dev).expect("a bin matrix has its own size")
}

/// `x` `[N, C, H, W]` with `stride - 1` zeros between its elements in H
/// and W: `[N, C, H, 1, W, 1]` padded to `[N, C, H, s0, W, s1]`, read as
/// `[N, C, H*s0, W*s1]` and cut after the last element.
fn spread_by_stride(x: &Tensor, stride: (usize, usize)) -> Tensor {
    if stride == (1, 1) {
        return x.clone();
    }
    let s = x.shape();
    let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
    x.reshape([n, c, h, 1, w, 1])
        .pad(&[(0, stride.0 - 1), (0, 0), (0, stride.1 - 1)], 0.0f32)
        .reshape([n, c, h * stride.0, w * stride.1])
        .narrow(2, 0, (h - 1) * stride.0 + 1)
        .narrow(3, 0, (w - 1) * stride.1 + 1)
}
