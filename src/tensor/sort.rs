//! Sorting along an axis: `argsort`, `sort`, `topk` (and `randperm` on
//! them), one sort kernel (`Op::Sort`) whose indices the values are
//! gathered by, so the values' gradient is the gather's.

use std::panic::Location;

use super::Tensor;
use super::dims::resolve_axis;
use super::elementwise::cast_node;
use crate::dtype::DType;
use crate::graph::Node;
use crate::graph::op::Op;
use crate::runtime::device::Device;

/// Elements of a line that `topk` sorts whole; from longer lines it
/// picks up to this many by a radix select (`Tensor::topk_by_select`),
/// ten passes over the line where a sort takes `log2(n)^2 / 2`.
const TOPK_SORT_MAX: usize = 1024;

impl Tensor {
    /// The indices (`i64`, as PyTorch's) that sort `self` along `axis`,
    /// ascending or `descending`: a stable sort (equal values keep their
    /// order), NaN the greatest value (last ascending, first descending),
    /// as PyTorch's `argsort(stable=True)`.
    #[track_caller]
    pub fn argsort(&self, axis: isize, descending: bool) -> Tensor {
        let _op = crate::graph::record_as("argsort");
        self.sort_indices("argsort", axis, descending)
    }

    /// The values sorted along `axis` and the indices they came from
    /// (PyTorch's `sort(dim, descending, stable=True)`); the values'
    /// gradient flows back to the positions they came from.
    #[track_caller]
    pub fn sort(&self, axis: isize, descending: bool) -> (Tensor, Tensor) {
        let _op = crate::graph::record_as("sort");
        let idx = self.sort_indices("sort", axis, descending);
        (self.gather_sorted(axis, &idx), idx)
    }

    /// The `k` largest (`largest`) or smallest elements along `axis` and
    /// their indices (`i64`), in sorted order (PyTorch's `topk(k, dim,
    /// largest, sorted=True)`; NaN counts as the largest value; equal
    /// values in their original order).
    #[track_caller]
    pub fn topk(&self, k: usize, axis: isize, largest: bool) -> (Tensor, Tensor) {
        let _op = crate::graph::record_as("topk");
        let ax = resolve_axis("topk", axis, self.rank().max(1));
        let len = if self.rank() == 0 {
            1
        } else {
            self.shape()[ax]
        };
        if k > len {
            panic!(
                "topk: k ({k}) is more than the {len} elements of dim {ax} of shape {:?} ({}) at {}",
                self.shape(),
                self.dtype(),
                Location::caller()
            );
        }
        let selected = self.rank() > 0 && self.dtype().is_float() && k > 0;
        if selected && len > TOPK_SORT_MAX && k <= TOPK_SORT_MAX {
            let idx = self.topk_by_select(k, ax, largest);
            return (self.gather_sorted(axis, &idx), idx);
        }
        let idx = self.sort_indices("topk", axis, largest);
        let idx = if self.rank() == 0 {
            idx
        } else {
            idx.narrow(ax as isize, 0, k)
        };
        (self.gather_sorted(axis, &idx), idx)
    }

    /// The indices of the `k` largest (smallest) along `ax` of a long
    /// line: a radix select picks them (`Op::TopkSelect`, in index order)
    /// and a sort of the `k` orders them. The order is the full sort's:
    /// the select picks what a stable sort puts first, and the stable
    /// sort of the picks, in index order, keeps equal values so.
    #[track_caller]
    fn topk_by_select(&self, k: usize, ax: usize, largest: bool) -> Tensor {
        let loc = Location::caller();
        let x = self.transpose(ax as isize, -1);
        // 16-bit floats are compared in f32 (a cast the select reads
        // through).
        let x = match x.dtype() {
            DType::F32 => x,
            _ => x.cast(DType::F32),
        };
        let mut shape = x.shape().to_vec();
        let last = shape.len() - 1;
        shape[last] = k;
        let picked = Node::pending(
            Op::TopkSelect { k, largest },
            vec![x.node()],
            Vec::new(),
            shape,
            DType::I64,
            loc,
        );
        let picked = Tensor::from_node(picked, self.device());
        let order = x.gather(-1, &picked).sort_indices("topk", -1, largest);
        picked.gather(-1, &order).transpose(ax as isize, -1)
    }

    /// A random permutation of `0..n` (`i64`) from the device's seeded
    /// generator (PyTorch's `randperm`): the order that sorts `n` uniform
    /// draws.
    #[track_caller]
    pub fn randperm(n: usize, dev: &Device) -> Tensor {
        let _op = crate::graph::record_as("randperm");
        Tensor::rand([n], dev).argsort(0, false)
    }

    /// `self`'s elements at the sorted `idx` along `axis` (a gather;
    /// 0-dim tensors are their own sort).
    #[track_caller]
    fn gather_sorted(&self, axis: isize, idx: &Tensor) -> Tensor {
        if self.rank() == 0 {
            return self.clone();
        }
        self.gather(axis, idx)
    }

    #[track_caller]
    fn sort_indices(&self, name: &str, axis: isize, descending: bool) -> Tensor {
        let loc = Location::caller();
        if self.rank() == 0 {
            resolve_axis(name, axis, 1);
            return Tensor::zeros_dtype(Vec::<usize>::new(), DType::I64, self.device());
        }
        let axis = resolve_axis(name, axis, self.rank());
        if self.numel() == 0 {
            return Tensor::zeros_dtype(self.shape().to_vec(), DType::I64, self.device());
        }
        // Bools compare as integers; 16-bit floats compare in f32.
        let x = match self.dtype() {
            DType::Bool => cast_node(&self.node(), DType::I32, loc),
            _ => self.node(),
        };
        let shape = x.shape.clone();
        let node = Node::pending(
            Op::Sort {
                axis,
                descending,
                run: 0,
            },
            vec![x],
            Vec::new(),
            shape,
            DType::I64,
            loc,
        );
        Tensor::from_node(node, self.device())
    }
}
