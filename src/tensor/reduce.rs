//! Reductions, softmax and matmul.
//!
//! Axis lists may be negative (counted from the end); an empty list means
//! every axis, as in PyTorch's `sum(dim=[])`. Sums and products of integer
//! or bool tensors are `i32` (PyTorch: int64); `argmax`/`argmin` give `i32`
//! indices.

use std::panic::Location;
use std::sync::Arc;

use super::dims::resolve_axis;
use super::elementwise::cast_node;
use super::movement::{expand_node, reshape_node};
use super::{IntoDims, Tensor};
use crate::autograd::rules;
use crate::dtype::DType;
use crate::graph::Node;
use crate::graph::op::{Op, ReduceOp};
use crate::shape::{broadcast_shapes, numel};

#[track_caller]
fn resolve_axes(op: &str, axes: Vec<isize>, rank: usize) -> Vec<usize> {
    if axes.is_empty() {
        return (0..rank).collect();
    }
    let mut out: Vec<usize> = axes.iter().map(|&a| resolve_axis(op, a, rank)).collect();
    if rank == 0 {
        // Dim 0 (or -1) of a 0-dim tensor is its one element: reducing
        // over it is reducing over no dims, as PyTorch does.
        return Vec::new();
    }
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        panic!(
            "{op}: axes {axes:?} repeat a dimension (rank {rank}) at {}",
            Location::caller()
        );
    }
    out
}

fn keepdim_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(d, &s)| if axes.contains(&d) { 1 } else { s })
        .collect()
}

fn squeezed_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter(|(d, _)| !axes.contains(d))
        .map(|(_, &s)| s)
        .collect()
}

/// The reduction node of `x` (keepdim shape). Long reductions are split
/// in two stages by the GPU's lowering (`schedule::split_reductions`), not
/// here: the traced graph and the CPU reference keep one stage.
fn reduce_node(
    x: &Arc<Node>,
    op: ReduceOp,
    axes: &[usize],
    dtype: DType,
    loc: &'static Location<'static>,
) -> Arc<Node> {
    Node::pending(
        Op::Reduce {
            op,
            axes: axes.to_vec(),
            parts: 1,
        },
        vec![x.clone()],
        Vec::new(),
        keepdim_shape(&x.shape, axes),
        dtype,
        loc,
    )
}

impl Tensor {
    #[track_caller]
    fn reduction(&self, op: ReduceOp, axes: Vec<isize>, keepdim: bool) -> Tensor {
        let loc = Location::caller();
        let axes = resolve_axes(op.name(), axes, self.rank());
        let mut x = self.node();
        let reduced: usize = axes.iter().map(|&d| x.shape[d]).product();
        if reduced == 0 && numel(&x.shape) > 0 && !matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
            panic!(
                "{}: cannot reduce over zero elements (shape {:?}, axes {axes:?}) at {loc}",
                op.name(),
                self.shape()
            );
        }
        // Integer and bool sums and products accumulate in i32; bools
        // compare as integers.
        if x.dtype == DType::Bool {
            x = cast_node(&x, DType::I32, loc);
        }
        // Bytes sum and multiply into i64, as PyTorch's do (a u8 result
        // would wrap at 256).
        if x.dtype == DType::U8 && matches!(op, ReduceOp::Sum | ReduceOp::Prod) {
            x = cast_node(&x, DType::I64, loc);
        }
        let dtype = if op.is_arg() { DType::I32 } else { x.dtype };
        let node = if numel(&x.shape) == 0 {
            // No elements: the identity everywhere (0 for sums, 1 for
            // products; the others were refused above unless the result is
            // empty too), without a kernel.
            let identity = op.identity() as f32;
            let id = super::creation::scalar_node(identity.to_bits(), DType::F32, loc);
            expand_node(
                &cast_node(&id, dtype, loc),
                &keepdim_shape(&x.shape, &axes),
                loc,
            )
        } else {
            reduce_node(&x, op, &axes, dtype, loc)
        };
        let node = if keepdim {
            node
        } else {
            reshape_node(&node, &squeezed_shape(self.shape(), &axes), loc)
        };
        let out = Tensor::from_node(node, self.device());
        rules::reduce(op, self, &axes, &out);
        out
    }

    /// Sum over `axes` (all if empty), keeping them as size-1 dims if `keepdim`.
    #[track_caller]
    pub fn sum(&self, axes: impl IntoDims, keepdim: bool) -> Tensor {
        self.reduction(ReduceOp::Sum, axes.into_dims(), keepdim)
    }

    /// Sum of all elements, as a rank-0 tensor.
    #[track_caller]
    pub fn sum_all(&self) -> Tensor {
        self.reduction(ReduceOp::Sum, Vec::new(), false)
    }

    /// Product over `axes`.
    #[track_caller]
    pub fn prod(&self, axes: impl IntoDims, keepdim: bool) -> Tensor {
        self.reduction(ReduceOp::Prod, axes.into_dims(), keepdim)
    }

    /// Maximum over `axes`.
    #[track_caller]
    pub fn max(&self, axes: impl IntoDims, keepdim: bool) -> Tensor {
        self.reduction(ReduceOp::Max, axes.into_dims(), keepdim)
    }

    /// Maximum of all elements.
    #[track_caller]
    pub fn max_all(&self) -> Tensor {
        self.reduction(ReduceOp::Max, Vec::new(), false)
    }

    /// Minimum over `axes`.
    #[track_caller]
    pub fn min(&self, axes: impl IntoDims, keepdim: bool) -> Tensor {
        self.reduction(ReduceOp::Min, axes.into_dims(), keepdim)
    }

    /// Minimum of all elements.
    #[track_caller]
    pub fn min_all(&self) -> Tensor {
        self.reduction(ReduceOp::Min, Vec::new(), false)
    }

    /// Index of the first maximum along `axis` (`i32`).
    #[track_caller]
    pub fn argmax(&self, axis: isize, keepdim: bool) -> Tensor {
        self.reduction(ReduceOp::ArgMax, vec![axis], keepdim)
    }

    /// Index of the first minimum along `axis` (`i32`).
    #[track_caller]
    pub fn argmin(&self, axis: isize, keepdim: bool) -> Tensor {
        self.reduction(ReduceOp::ArgMin, vec![axis], keepdim)
    }

    /// Mean over `axes` (integers are promoted to `f32`).
    #[track_caller]
    pub fn mean(&self, axes: impl IntoDims, keepdim: bool) -> Tensor {
        let axes = resolve_axes("mean", axes.into_dims(), self.rank());
        let count: usize = axes.iter().map(|&d| self.shape()[d]).product();
        let dims: Vec<isize> = axes.iter().map(|&d| d as isize).collect();
        // A division by the count (a runtime parameter): over no elements
        // that is 0 / 0, NaN, with a NaN gradient, as in PyTorch.
        let mean = self.cast(DType::F32).sum(dims, keepdim) / count as f32;
        self.back_to_half(mean)
    }

    /// `value` (computed in f32 from `self`) in `self`'s dtype when that
    /// is a 16-bit float: rounded once, as PyTorch's reductions of half
    /// types accumulate in float.
    fn back_to_half(&self, value: Tensor) -> Tensor {
        let dtype = crate::amp::float32_list(self.dtype());
        if dtype.is_half() {
            value.cast(dtype)
        } else {
            value
        }
    }

    /// Mean of all elements.
    #[track_caller]
    pub fn mean_all(&self) -> Tensor {
        self.mean(Vec::<isize>::new(), false)
    }

    /// Variance over `axes` with Bessel's `correction` (1 is PyTorch's default).
    #[track_caller]
    pub fn var(&self, axes: impl IntoDims, correction: usize, keepdim: bool) -> Tensor {
        let axes = resolve_axes("var", axes.into_dims(), self.rank());
        let count: usize = axes.iter().map(|&d| self.shape()[d]).product();
        let dims: Vec<isize> = axes.iter().map(|&d| d as isize).collect();
        let x = self.cast(DType::F32);
        let centered = &x - x.mean(dims.clone(), true);
        let denom = count.saturating_sub(correction) as f32;
        // As in `mean`: where `denom` is 0 this is x / 0 as PyTorch gives
        // it (NaN for 0 / 0, else inf).
        let var = (&centered * &centered).sum(dims, keepdim) / denom;
        self.back_to_half(var)
    }

    /// Standard deviation over `axes` with Bessel's `correction`.
    #[track_caller]
    pub fn std(&self, axes: impl IntoDims, correction: usize, keepdim: bool) -> Tensor {
        let var = self.var(axes, correction, keepdim);
        let out = crate::autograd::no_grad(|| var.sqrt());
        rules::std_from_var(&var, &out);
        out
    }

    /// `log(sum(exp(x)))` over `axes`, computed stably (shifted by the max).
    #[track_caller]
    pub fn logsumexp(&self, axes: impl IntoDims, keepdim: bool) -> Tensor {
        let axes = resolve_axes("logsumexp", axes.into_dims(), self.rank());
        let dims: Vec<isize> = axes.iter().map(|&d| d as isize).collect();
        let x = self.cast(DType::F32);
        let count: usize = axes.iter().map(|&d| self.shape()[d]).product();
        if count == 0 {
            // log(0): the sum of no exponentials.
            let shape = if keepdim {
                keepdim_shape(self.shape(), &axes)
            } else {
                squeezed_shape(self.shape(), &axes)
            };
            return x.sum(dims, keepdim).reshape(shape) + f32::NEG_INFINITY;
        }
        let m = x.max(dims.clone(), true);
        // An all -inf row would give nan from -inf - -inf: shift by 0 there.
        let shift = m.abs().lt(f32::INFINITY).where_cond(&m, 0.0f32);
        let lse = (&x - &shift).exp().sum(dims.clone(), true).log() + &shift;
        let lse = if keepdim {
            lse
        } else {
            lse.reshape(squeezed_shape(self.shape(), &axes))
        };
        self.back_to_half(lse)
    }

    #[track_caller]
    fn softmax_op(&self, axis: isize, log: bool) -> Tensor {
        let loc = Location::caller();
        let name = if log { "log_softmax" } else { "softmax" };
        let axis = resolve_axis(name, axis, self.rank().max(1));
        // Computed in f32; a float input gives a result of its dtype (in
        // an autocast scope, f32).
        let dtype = crate::amp::float32_list(self.dtype());
        let x = cast_node(&self.node(), dtype, loc);
        if x.shape.is_empty() {
            let one = reshape_node(&x, &[1], loc);
            let node = Node::pending(
                Op::Softmax { axis: 0, log },
                vec![one],
                Vec::new(),
                vec![1],
                dtype,
                loc,
            );
            let out = Tensor::from_node(reshape_node(&node, &[], loc), self.device());
            rules::softmax(self, 0, log, &out);
            return out;
        }
        let node = Node::pending(
            Op::Softmax { axis, log },
            vec![x.clone()],
            Vec::new(),
            x.shape.clone(),
            dtype,
            loc,
        );
        let out = Tensor::from_node(node, self.device());
        rules::softmax(self, axis as isize, log, &out);
        out
    }

    /// Softmax along `axis`: one kernel (a workgroup per row).
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Tensor {
        self.softmax_op(axis, false)
    }

    /// Log-softmax along `axis`, computed stably in one kernel.
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Tensor {
        self.softmax_op(axis, true)
    }

    /// Matrix product with PyTorch's semantics: 1-D operands are vectors
    /// (a dot product for two), 2-D are matrices, and leading batch dims
    /// broadcast. Operands that are views (a transpose) are read through
    /// their strides inside the kernel, never copied. Both operands of one
    /// float dtype; `f16` and `bf16` accumulate in `f32` and round the
    /// result once.
    ///
    /// Inside an [`autocast`](crate::amp::autocast) scope, float operands
    /// are cast to the scope's dtype first.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        match crate::amp::matmul_dtype(self.dtype(), other.dtype()) {
            // The casts record the caller's line (`track_caller` carries it).
            Some(dt) => self.cast(dt).matmul_in_own_dtype(&other.cast(dt)),
            None => self.matmul_in_own_dtype(other),
        }
    }

    #[track_caller]
    fn matmul_in_own_dtype(&self, other: &Tensor) -> Tensor {
        let loc = Location::caller();
        let (a, b) = (self.node(), other.node());
        if !a.dtype.is_float() || b.dtype != a.dtype || a.shape.is_empty() || b.shape.is_empty() {
            panic!(
                "matmul: needs float operands of one dtype and rank >= 1, got {:?} ({}) and {:?} ({}) at {loc}",
                a.shape, a.dtype, b.shape, b.dtype
            );
        }
        if self.device() != other.device() {
            panic!("matmul: operands are on different devices at {loc}");
        }
        let (a_vec, b_vec) = (a.shape.len() == 1, b.shape.len() == 1);
        let a2 = if a_vec {
            reshape_node(&a, &[1, a.shape[0]], loc)
        } else {
            a.clone()
        };
        let b2 = if b_vec {
            reshape_node(&b, &[b.shape[0], 1], loc)
        } else {
            b.clone()
        };
        let (ra, rb) = (a2.shape.len(), b2.shape.len());
        let (m, k) = (a2.shape[ra - 2], a2.shape[ra - 1]);
        let (k2, n) = (b2.shape[rb - 2], b2.shape[rb - 1]);
        let batch = broadcast_shapes(&a2.shape[..ra - 2], &b2.shape[..rb - 2]);
        let Some(batch) = batch.filter(|_| k == k2) else {
            panic!(
                "matmul: shapes {:?} and {:?} do not multiply at {loc}",
                a.shape, b.shape
            );
        };
        if ra > 2 && rb == 2 {
            return self.matmul_batch_as_rows(other);
        }
        let a_full: Vec<usize> = batch.iter().copied().chain([m, k]).collect();
        let b_full: Vec<usize> = batch.iter().copied().chain([k, n]).collect();
        let out_full: Vec<usize> = batch.iter().copied().chain([m, n]).collect();
        let a3 = expand_node(&a2, &a_full, loc);
        let b3 = expand_node(&b2, &b_full, loc);
        // The result drops the dims of vector operands.
        let mut shape: Vec<usize> = batch.clone();
        if !a_vec {
            shape.push(m);
        }
        if !b_vec {
            shape.push(n);
        }
        let node = if k == 0 {
            // Sums of no terms: zeros, no kernel.
            let zero = super::creation::scalar_node(0.0f32.to_bits(), a.dtype, loc);
            expand_node(&zero, &out_full, loc)
        } else {
            Node::pending(
                Op::Matmul,
                vec![a3, b3],
                Vec::new(),
                out_full.clone(),
                a.dtype,
                loc,
            )
        };
        let out = Tensor::from_node(reshape_node(&node, &shape, loc), self.device());
        rules::matmul(self, other, &out);
        out
    }

    /// A batched `self` (`[batch.., m, k]`) times a matrix (`[k, n]`) or
    /// a vector (`[k]`) as one product of `batch * m` rows, as PyTorch
    /// folds it: the matrix is one operand read by every row (a batched
    /// product would see it broadcast, once per batch entry), and its
    /// gradient is one product over all the rows rather than a product
    /// per batch entry and a sum.
    #[track_caller]
    fn matmul_batch_as_rows(&self, matrix: &Tensor) -> Tensor {
        let _op = crate::graph::record_as("matmul");
        let shape = self.shape();
        let (lead, k) = shape.split_at(shape.len() - 1);
        let rows: usize = lead.iter().product();
        let mut out_shape = lead.to_vec();
        out_shape.extend(matrix.shape().get(1));
        (self.reshape([rows, k[0]]))
            .matmul_in_own_dtype(matrix)
            .reshape(out_shape)
    }
}
