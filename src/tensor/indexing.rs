//! Data movement that needs indices (pad, cat, stack, flip, gather,
//! index_select, scatter_add, index_add, one_hot, masked_fill) and the ops
//! built from them (conv2d, max/avg pooling). Most are index arithmetic
//! that fuses into whatever reads them; `conv2d` is a matmul whose operand
//! is the padded input's sliding windows, read in place (im2col without
//! the copy).
//!
//! Out-of-range indices: when the index tensor is stored on the CPU device,
//! `gather` and `index_select` check it at trace time and panic at the
//! caller's line. On a GPU the indices are not known on the host, and
//! kernels clamp them into range (`gather`, `index_select`) or drop them
//! (`scatter_add`, `index_add`) instead of failing as PyTorch does.

use super::creation::scalar_node;
use super::dims::resolve_axis;
use super::elementwise::{cast_node, convert_scalar};
use super::{IntoDims, IntoOperand, Operand, Tensor};
use crate::autograd::conv::{self, Window};
use crate::autograd::{NoGradGuard, rules};
use crate::dtype::{DType, Element, promote};
use crate::graph::Node;
use crate::graph::op::Op;
use crate::shape::Layout;
use std::panic::Location;

/// The index length along the scattered axis from which `scatter_add`
/// goes through the flattened tensor (`Tensor::scatter_add_flat`): below
/// it, scanning a line of the index for each element costs less than
/// sorting the index.
const FLAT_SCATTER_MIN_LINE: usize = 64;

/// The shape of a 0-dim tensor, for `reshape`.
const SCALAR: [isize; 0] = [];

impl Tensor {
    /// A gather of `self`'s row-major elements through a strided window
    /// (not a view: the result is a new tensor, computed lazily).
    #[track_caller]
    pub(crate) fn strided_window(&self, shape: Vec<usize>, strides: Vec<usize>) -> Tensor {
        let layout = Layout { strides, offset: 0 };
        let node = super::as_strided_node(&self.node(), &shape, &layout, Location::caller());
        Tensor::from_node(node, self.device())
    }

    /// Pads the trailing `pads.len()` dims with `value`: `pads[i] =
    /// (before, after)` for dim `rank - pads.len() + i` (so `&[(1, 1)]`
    /// pads the last dim, `&[(1, 1), (2, 2)]` the last two).
    #[track_caller]
    pub fn pad<T: Element>(&self, pads: &[(usize, usize)], value: T) -> Tensor {
        let loc = Location::caller();
        let rank = self.rank();
        if pads.len() > rank {
            panic!(
                "pad: {} pairs for a tensor of shape {:?} at {loc}",
                pads.len(),
                self.shape()
            );
        }
        let mut all = vec![(0, 0); rank - pads.len()];
        all.extend_from_slice(pads);
        if all.iter().all(|&p| p == (0, 0)) {
            // Nothing to pad (always so for a 0-dim tensor).
            return self.deep_clone();
        }
        let shape: Vec<usize> = self
            .shape()
            .iter()
            .zip(&all)
            .map(|(&s, &(b, a))| s + b + a)
            .collect();
        let x = self.node();
        // The fill value is the pad node's own runtime parameter.
        let fill_bits = convert_scalar(value.to_bits(), T::DTYPE, x.dtype);
        let node = Node::pending(
            Op::Pad(all.clone()),
            vec![x.clone()],
            vec![fill_bits],
            shape,
            x.dtype,
            loc,
        );
        let out = Tensor::from_node(node, self.device());
        rules::pad(self, &all, &out);
        out
    }

    /// Reverses the listed dims (a new tensor, as in PyTorch).
    #[track_caller]
    pub fn flip(&self, dims: impl IntoDims) -> Tensor {
        let rank = self.rank();
        let mut axes: Vec<usize> = dims
            .into_dims()
            .iter()
            .map(|&d| resolve_axis("flip", d, rank))
            .collect();
        axes.sort_unstable();
        axes.dedup();
        let x = self.node();
        let node = Node::pending(
            Op::Flip(axes.clone()),
            vec![x.clone()],
            Vec::new(),
            x.shape.clone(),
            x.dtype,
            Location::caller(),
        );
        let out = Tensor::from_node(node, self.device());
        rules::flip(self, &axes, &out);
        out
    }

    /// Concatenates along `axis` (all other dims equal). One fused kernel
    /// when read: each element comes from the input whose range holds it.
    #[track_caller]
    pub fn cat(tensors: &[&Tensor], axis: isize) -> Tensor {
        let loc = Location::caller();
        let Some(first) = tensors.first() else {
            panic!("cat: needs at least one tensor at {loc}");
        };
        let rank = first.rank();
        let ax = resolve_axis("cat", axis, rank);
        let mut dtype = first.dtype();
        for t in tensors {
            let same =
                t.rank() == rank && (0..rank).all(|d| d == ax || t.shape()[d] == first.shape()[d]);
            if !same {
                panic!(
                    "cat: shapes {:?} do not match outside axis {ax} at {loc}",
                    tensors
                        .iter()
                        .map(|t| t.shape().to_vec())
                        .collect::<Vec<_>>()
                );
            }
            dtype = promote(dtype, t.dtype()).unwrap_or_else(|| {
                panic!(
                    "cat: no common dtype for {dtype} and {} at {loc}",
                    t.dtype()
                )
            });
        }
        let total: usize = tensors.iter().map(|t| t.shape()[ax]).sum();
        let mut pads = vec![(0, 0); rank - ax];
        let mut result: Option<Tensor> = None;
        let mut offset = 0;
        // Position along the axis, broadcast against the others.
        let mut coord_shape = vec![1; rank];
        coord_shape[ax] = total;
        let coord = Tensor::arange(0, total as i32, 1, first.device()).reshape(coord_shape);
        for t in tensors {
            let len = t.shape()[ax];
            pads[0] = (offset, total - offset - len);
            let padded = t.cast(dtype).pad(&pads, 0i32);
            result = Some(match result {
                None => padded,
                Some(acc) => coord.ge(offset as i32).where_cond(&padded, &acc),
            });
            offset += len;
        }
        result.expect("at least one tensor")
    }

    /// Stacks equal-shaped tensors along a new dim `axis`.
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], axis: isize) -> Tensor {
        let Some(first) = tensors.first() else {
            panic!("stack: needs at least one tensor at {}", Location::caller());
        };
        let ax = resolve_axis("stack", axis, first.rank() + 1) as isize;
        let expanded: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(ax)).collect();
        let refs: Vec<&Tensor> = expanded.iter().collect();
        Tensor::cat(&refs, ax)
    }

    #[track_caller]
    fn check_host_indices(&self, op: &str, index: &Tensor, size: usize) {
        // Indices stored on the CPU device are checked now; a GPU's are not
        // known on the host without a sync, and kernels clamp them.
        if index.device().is_gpu() || index.is_pending() {
            return;
        }
        if let Ok(values) = index.to_vec::<i32>() {
            if let Some(bad) = values.iter().find(|&&v| v < 0 || v as usize >= size) {
                panic!(
                    "{op}: index {bad} is out of range for a dim of size {size} (shape {:?}) at {}",
                    self.shape(),
                    Location::caller()
                );
            }
        }
    }

    /// `out[c] = self[c with coordinate axis replaced by index[c]]`; `index`
    /// is `i32` with the output's shape (PyTorch's `gather`).
    #[track_caller]
    pub fn gather(&self, axis: isize, index: &Tensor) -> Tensor {
        let loc = Location::caller();
        let ax = resolve_axis("gather", axis, self.rank());
        if self.rank() == 0 && index.rank() == 0 {
            // A 0-dim tensor gathers as the one element of a 1-D one.
            return self
                .reshape([1])
                .gather(0, &index.reshape([1]))
                .reshape(SCALAR);
        }
        if index.dtype() == DType::I64 {
            return self.gather(axis, &index.cast(DType::I32));
        }
        if index.dtype() != DType::I32 || index.rank() != self.rank() {
            panic!(
                "gather: index must be i32 or i64 of rank {}, got {:?} ({}) at {loc}",
                self.rank(),
                index.shape(),
                index.dtype()
            );
        }
        if (0..self.rank()).any(|d| d != ax && index.shape()[d] > self.shape()[d]) {
            panic!(
                "gather: index shape {:?} exceeds {:?} outside axis {ax} at {loc}",
                index.shape(),
                self.shape()
            );
        }
        self.check_host_indices("gather", index, self.shape()[ax]);
        let (x, i) = (self.node(), index.node());
        let node = Node::pending(
            Op::Gather(ax),
            vec![x.clone(), i.clone()],
            Vec::new(),
            i.shape.clone(),
            x.dtype,
            loc,
        );
        let out = Tensor::from_node(node, self.device());
        rules::gather(self, ax, index, &out);
        out
    }

    /// The entries `index` (1-D `i32`) of dim `axis`.
    #[track_caller]
    pub fn index_select(&self, axis: isize, index: &Tensor) -> Tensor {
        let _op = crate::graph::record_as("index_select");
        let loc = Location::caller();
        let ax = resolve_axis("index_select", axis, self.rank());
        // PyTorch takes a 0-dim index as a 1-D one of one element, and a
        // 0-dim tensor as a 1-D one whose result stays 0-dim.
        if index.rank() == 0 {
            return self.index_select(axis, &index.reshape([1]));
        }
        if self.rank() == 0 {
            let picked = self.reshape([1]).index_select(0, index);
            return if picked.numel() == 1 {
                picked.reshape(SCALAR)
            } else {
                picked
            };
        }
        if index.dtype() == DType::I64 {
            return self.index_select(axis, &index.cast(DType::I32));
        }
        if index.dtype() != DType::I32 || index.rank() != 1 {
            panic!(
                "index_select: index must be 1-D i32 or i64, got {:?} ({}) at {loc}",
                index.shape(),
                index.dtype()
            );
        }
        self.check_host_indices("index_select", index, self.shape()[ax]);
        let mut shape = self.shape().to_vec();
        shape[ax] = index.shape()[0];
        let mut bshape = vec![1; self.rank()];
        bshape[ax] = index.shape()[0];
        let idx = index
            .reshape(bshape)
            .expand(shape.iter().map(|&d| d as isize).collect::<Vec<_>>());
        // Its gradient is an `index_add` of the 1-D index (which the GPU
        // sums by rows through the index's sorted order), not the
        // gather's, which flattens a long index element by element.
        let out = {
            // A guard, not a closure, so that the gather is recorded at
            // the caller's line.
            let _no_grad = NoGradGuard::new();
            self.gather(ax as isize, &idx)
        };
        rules::index_select(self, ax, index, &out);
        out
    }

    /// `self` plus `src` added at positions given by `index` along `axis`
    /// (PyTorch's out-of-place `scatter_add`; `index` is `i32` shaped like `src`).
    #[track_caller]
    pub fn scatter_add(&self, axis: isize, index: &Tensor, src: &Tensor) -> Tensor {
        let loc = Location::caller();
        let ax = resolve_axis("scatter_add", axis, self.rank());
        if self.rank() == 0 && index.rank() == 0 && src.rank() == 0 {
            let one = |t: &Tensor| t.reshape([1]);
            return one(self)
                .scatter_add(0, &one(index), &one(src))
                .reshape(SCALAR);
        }
        if index.dtype() == DType::I64 {
            return self.scatter_add(axis, &index.cast(DType::I32), src);
        }
        // A long index line in a tensor of two dims or more goes through
        // the flattened tensor; anomaly mode keeps the traced op, whose
        // kernel checks each index.
        let long = self.rank() > 1 && index.shape()[ax] >= FLAT_SCATTER_MIN_LINE;
        if long && !self.device().checks() && self.numel() < i32::MAX as usize {
            self.check_scatter_operands(index, src, loc);
            return self.scatter_add_flat(ax, index, src);
        }
        self.scatter_add_traced(ax, index, src, loc)
    }

    /// Panics (at the caller's `loc`) unless `index` is `i32` shaped like
    /// `src`, of `self`'s rank.
    fn check_scatter_operands(&self, index: &Tensor, src: &Tensor, loc: &Location<'_>) {
        if index.dtype() != DType::I32 || index.shape() != src.shape() || src.rank() != self.rank()
        {
            panic!(
                "scatter_add: index ({:?}, {}) must be i32 or i64 shaped like src {:?} of rank {} at {loc}",
                index.shape(),
                index.dtype(),
                src.shape(),
                self.rank()
            );
        }
    }

    /// The traced `ScatterAdd` of `src` into `self` along `ax` at `index`
    /// (`i32`), with its gradient.
    fn scatter_add_traced(
        &self,
        ax: usize,
        index: &Tensor,
        src: &Tensor,
        loc: &'static Location<'static>,
    ) -> Tensor {
        self.check_scatter_operands(index, src, loc);
        let src_node = cast_node(&src.node(), self.dtype(), loc);
        let base = self.node();
        let node = Node::pending(
            Op::ScatterAdd(ax),
            vec![base.clone(), index.node(), src_node],
            Vec::new(),
            base.shape.clone(),
            base.dtype,
            loc,
        );
        let out = Tensor::from_node(node, self.device());
        rules::scatter_add(self, ax, index, src, &out);
        out
    }

    /// `scatter_add` along index lines of `FLAT_SCATTER_MIN_LINE` or more,
    /// as an `index_add` into the flattened tensor: each element of
    /// `index` names one flat element (its own coordinates, `axis`
    /// replaced by its value), and an index that varies along one axis
    /// alone is summed through its sorted order on the GPU
    /// (`schedule::split::sort_scatters`), each element of `src` added
    /// once. The traced scatter-add scans a line of the index for each
    /// element, quadratic in the line (the gradient of a gather of 8 x
    /// 70,001 took 60 s on lavapipe). An index outside the axis, or an
    /// element of `src` past the tensor along another dim, names one
    /// element past the end, dropped after, as the scan drops it.
    #[track_caller]
    fn scatter_add_flat(&self, ax: usize, index: &Tensor, src: &Tensor) -> Tensor {
        let dev = self.device();
        let shape = self.shape().to_vec();
        let strides = crate::shape::contiguous_strides(&shape);
        let total = self.numel();
        // `index` is `i32` (`check_scatter_operands`).
        let mut flat = index * strides[ax] as i32;
        let mut inside = index.ge(0).logical_and(&index.lt(shape[ax] as i32));
        for (d, &stride) in strides.iter().enumerate() {
            if d != ax {
                let mut along = vec![1isize; shape.len()];
                along[d] = index.shape()[d] as isize;
                let coordinate = Tensor::arange(0, index.shape()[d] as i32, 1, dev).reshape(along);
                flat = &flat + &(&coordinate * stride as i32);
                if index.shape()[d] > shape[d] {
                    // Past the tensor along another dim: dropped too.
                    inside = inside.logical_and(&coordinate.lt(shape[d] as i32));
                }
            }
        }
        let past_end = Tensor::scalar(total as i32, dev);
        let flat = inside.where_cond(&flat, &past_end);
        let padded = Tensor::cat(
            &[
                &self.flatten(),
                &Tensor::zeros_dtype([1], self.dtype(), dev),
            ],
            0,
        );
        padded
            .index_add(0, &flat.flatten(), &src.flatten())
            .narrow(0, 0, total)
            .reshape(shape.iter().map(|&d| d as isize).collect::<Vec<_>>())
    }

    /// `self` with `src`'s slices along `axis` added at entries `index`
    /// (1-D `i32`) of that axis (PyTorch's out-of-place `index_add`).
    #[track_caller]
    pub fn index_add(&self, axis: isize, index: &Tensor, src: &Tensor) -> Tensor {
        let ax = resolve_axis("index_add", axis, self.rank());
        if self.rank() == 0 {
            let one = |t: &Tensor| t.reshape([1]);
            let src = if src.rank() == 0 {
                one(src)
            } else {
                src.clone()
            };
            return one(self)
                .index_add(0, &index.reshape([1]), &src)
                .reshape(SCALAR);
        }
        let mut bshape = vec![1; self.rank()];
        bshape[ax] = index.shape()[0];
        let idx = index
            .reshape(bshape)
            .expand(src.shape().iter().map(|&d| d as isize).collect::<Vec<_>>());
        // An index along one axis alone: the GPU sums it by rows through
        // its sorted order (`schedule::split::sort_scatters`), so it is
        // never flattened (`scatter_add_flat`).
        let index = if index.dtype() == DType::I64 {
            idx.cast(DType::I32)
        } else {
            idx
        };
        self.scatter_add_traced(ax, &index, src, Location::caller())
    }

    /// One-hot encoding of an integer tensor: a new last dim of
    /// `num_classes`, `i64` ones where it equals the value (PyTorch's
    /// dtype; multiplying by a float tensor promotes to float).
    #[track_caller]
    pub fn one_hot(&self, num_classes: usize) -> Tensor {
        let _op = crate::graph::record_as("one_hot");
        let classes = Tensor::arange(0, num_classes as i32, 1, self.device());
        self.cast(DType::I32)
            .unsqueeze(-1)
            .eq(&classes)
            .cast(DType::I64)
    }

    /// `value` where `mask` is true, `self` elsewhere (`mask` broadcasts).
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: impl IntoOperand) -> Tensor {
        let v = match value.into_operand() {
            Operand::Tensor(t) => t,
            Operand::Scalar(d, bits) => {
                Tensor::from_node(scalar_node(bits, d, Location::caller()), self.device())
            }
        };
        mask.where_cond(v.cast(self.dtype()), self)
    }

    /// Sliding windows of a padded `[N, C, H, W]` tensor as a
    /// `[N, C, OH, OW, KH, KW]` gather (read in place by whoever uses it).
    #[track_caller]
    pub(crate) fn windows(&self, op: &str, geometry: Window, fill: f32) -> (Tensor, usize, usize) {
        let loc = Location::caller();
        let Window {
            kernel,
            stride,
            padding,
            dilation,
        } = geometry;
        if self.rank() != 4 || !self.dtype().is_float() {
            panic!(
                "{op}: expects a float [N, C, H, W] input, got {:?} ({}) at {loc}",
                self.shape(),
                self.dtype()
            );
        }
        let (n, c, h, w) = (
            self.shape()[0],
            self.shape()[1],
            self.shape()[2],
            self.shape()[3],
        );
        let (hp, wp) = (h + 2 * padding.0, w + 2 * padding.1);
        let span = |k: usize, d: usize| d * (k - 1) + 1;
        if stride.0 == 0
            || stride.1 == 0
            || hp < span(kernel.0, dilation.0)
            || wp < span(kernel.1, dilation.1)
        {
            panic!(
                "{op}: kernel {kernel:?} (dilation {dilation:?}, stride {stride:?}) does not fit input {:?} padded by {padding:?} at {loc}",
                self.shape()
            );
        }
        let oh = (hp - span(kernel.0, dilation.0)) / stride.0 + 1;
        let ow = (wp - span(kernel.1, dilation.1)) / stride.1 + 1;
        let xp = if padding == (0, 0) {
            self.clone()
        } else {
            self.pad(&[(padding.0, padding.0), (padding.1, padding.1)], fill)
        };
        let win = xp.strided_window(
            vec![n, c, oh, ow, kernel.0, kernel.1],
            vec![
                c * hp * wp,
                hp * wp,
                stride.0 * wp,
                stride.1,
                dilation.0 * wp,
                dilation.1,
            ],
        );
        (win, oh, ow)
    }

    /// 2-D convolution of `[N, C, H, W]` by `weight` `[OC, C, KH, KW]` with
    /// optional `bias` `[OC]` (groups = 1), as a matmul that reads the input's
    /// windows in place; bias joins the matmul kernel as its epilogue.
    #[track_caller]
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
    ) -> Tensor {
        self.conv2d_groups(weight, bias, stride, padding, dilation, 1)
    }

    /// 2-D convolution in `groups` groups (PyTorch's `F.conv2d(..., groups)`):
    /// the input's `C` channels and the weight's `OC` output channels split
    /// into `groups` equal parts, part `g` of the output convolving part
    /// `g` of the input. `weight` is `[OC, C / groups, KH, KW]`;
    /// `groups == C` is a depthwise convolution. One batched matmul over
    /// the groups, reading the input's windows in place.
    #[track_caller]
    pub fn conv2d_groups(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
        groups: usize,
    ) -> Tensor {
        let _op = crate::graph::record_as("conv2d");
        let loc = Location::caller();
        let fits = weight.rank() == 4
            && self.rank() == 4
            && groups > 0
            && self.shape()[1].is_multiple_of(groups)
            && weight.shape()[0].is_multiple_of(groups)
            && weight.shape()[1] * groups == self.shape()[1]
            && bias.is_none_or(|b| b.shape() == [weight.shape()[0]]);
        if !fits {
            panic!(
                "conv2d: input {:?} and weight {:?} (bias {:?}) do not match for groups = {groups} \
                 (expected weight [OC, C / groups, KH, KW], both channel counts divisible by groups, bias [OC]) at {loc}",
                self.shape(),
                weight.shape(),
                bias.map(Tensor::shape),
            );
        }
        let (oc, cg, kh, kw) = (
            weight.shape()[0],
            weight.shape()[1],
            weight.shape()[2],
            weight.shape()[3],
        );
        let geometry = Window {
            kernel: (kh, kw),
            stride,
            padding,
            dilation,
        };
        // The op records one grad function for itself (its windows are an
        // overlapping gather that has no gradient of its own).
        let guard = NoGradGuard::new();
        let (win, oh, ow) = self.windows("conv2d", geometry, 0.0);
        let n = self.shape()[0];
        let k = cg * kh * kw;
        // [N, C, OH, OW, KH, KW] -> [N, C, KH, KW, OH, OW] -> [N, (G,) C/G*KH*KW, OH*OW]
        let cols = win.permute([0, 1, 4, 5, 2, 3]);
        let out = if groups == 1 {
            weight
                .reshape([oc, k])
                .matmul(&cols.reshape([n, k, oh * ow]))
        } else {
            weight
                .reshape([groups, oc / groups, k])
                .matmul(&cols.reshape([n, groups, k, oh * ow]))
        }
        .reshape([n, oc, oh, ow]);
        let out = match bias {
            Some(b) => out + b.reshape([oc, 1, 1]),
            None => out,
        };
        drop(guard);
        conv::conv2d(self, weight, bias, geometry, groups, &out);
        out
    }

    /// Max pooling over `kernel` windows of `[N, C, H, W]` (padding counts as -inf).
    #[track_caller]
    pub fn max_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Tensor {
        let _op = crate::graph::record_as("max_pool2d");
        self.pool(true, kernel, stride, padding)
    }

    /// Average pooling over `kernel` windows (padding counts as zeros in the
    /// average, PyTorch's default `count_include_pad=True`).
    #[track_caller]
    pub fn avg_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Tensor {
        let _op = crate::graph::record_as("avg_pool2d");
        self.pool(false, kernel, stride, padding)
    }

    /// `max_pool2d` (padding counts as -inf) or `avg_pool2d` (padding
    /// counts as 0): a reduction over the `[.., KH, KW]` windows, recorded
    /// without autograd, with the pool's own grad function on top.
    #[track_caller]
    fn pool(
        &self,
        max: bool,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Tensor {
        let geometry = Window {
            kernel,
            stride,
            padding,
            dilation: (1, 1),
        };
        let op = if max { "max_pool2d" } else { "avg_pool2d" };
        let out = {
            let _guard = NoGradGuard::new();
            let fill = if max { f32::NEG_INFINITY } else { 0.0 };
            let (win, _, _) = self.windows(op, geometry, fill);
            if max {
                win.max([4, 5], false)
            } else {
                win.mean([4, 5], false)
            }
        };
        if max {
            conv::max_pool2d(self, geometry, &out);
        } else {
            conv::avg_pool2d(self, geometry, &out);
        }
        out
    }
}
