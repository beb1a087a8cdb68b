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

/// Elements of a line that `topk` sorts in one piece; longer lines go by
/// chunks of this many (`Tensor::topk_by_chunks`).
const TOPK_CHUNK: usize = 1024;

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
        let chunked = self.rank() > 0 && self.dtype().is_float();
        if chunked && len > 2 * TOPK_CHUNK && k <= TOPK_CHUNK / 4 {
            let idx = self.topk_by_chunks(k, ax, largest);
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
    /// line: each chunk of `TOPK_CHUNK` sorted on its own (a workgroup
    /// each, all chunks at once), its first `k` kept, and those sorted
    /// again. The order is the full sort's: candidates stay in index
    /// order between chunks and the sort is stable. The padding past the
    /// line's end sorts after every real element (see `fill`).
    #[track_caller]
    fn topk_by_chunks(&self, k: usize, ax: usize, largest: bool) -> Tensor {
        let x = self.transpose(ax as isize, -1);
        let len = x.shape()[x.rank() - 1];
        let chunks = len.div_ceil(TOPK_CHUNK);
        // Padding sorts after every real element it ties with (it has the
        // larger index): -inf last for the largest; NaN, the greatest
        // value, last for the smallest (+inf would go before real NaNs).
        let fill = if largest { f32::NEG_INFINITY } else { f32::NAN };
        let mut pads = vec![(0, 0); x.rank()];
        pads[x.rank() - 1] = (0, chunks * TOPK_CHUNK - len);
        let padded = x.pad(&pads, fill);
        let mut shape: Vec<isize> = padded.shape().iter().map(|&d| d as isize).collect();
        let r = shape.len();
        shape[r - 1] = chunks as isize;
        shape.push(TOPK_CHUNK as isize);
        let blocks = padded.reshape(shape.clone());
        let local = blocks.sort_indices("topk", -1, largest).narrow(-1, 0, k);
        // Global positions of the candidates, chunk by chunk.
        let base = Tensor::arange(
            0,
            (chunks * TOPK_CHUNK) as i32,
            TOPK_CHUNK as i32,
            self.device(),
        )
        .cast(DType::I64)
        .unsqueeze(1);
        let mut flat: Vec<isize> = shape[..r - 1].to_vec();
        flat.push((chunks * k) as isize);
        let global = (local + base).reshape(flat);
        let values = padded.gather(-1, &global);
        let order = values.sort_indices("topk", -1, largest).narrow(-1, 0, k);
        global.gather(-1, &order).transpose(ax as isize, -1)
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
