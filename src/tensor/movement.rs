//! Movement ops: views, never copies. On stored data a view is a new layout
//! over the same buffer; on a pending value it is a movement node that the
//! kernel turns into index arithmetic.

use std::panic::Location;
use std::sync::Arc;

use super::dims::resolve_axis;
use super::{IntoDims, Tensor};
use crate::autograd::rules;
use crate::graph::Node;
use crate::graph::op::Op;
use crate::runtime::storage::Storage;
use crate::shape::{Layout, numel};

/// A node for the same value with a new layout over stored data, or a
/// pending movement op when `view` cannot express it.
fn movement_node(
    node: &Arc<Node>,
    op: Op,
    shape: Vec<usize>,
    view: impl FnOnce(&Layout) -> Option<Layout>,
    loc: &'static Location<'static>,
) -> Arc<Node> {
    if let Some(storage) = node.storage() {
        if let Some(layout) = view(&storage.layout) {
            let s = Storage {
                buffer: storage.buffer,
                layout,
            };
            let view = Node::ready(s, shape, node.dtype, loc);
            view.inherit_marks(node);
            return view;
        }
    }
    Node::pending(op, vec![node.clone()], Vec::new(), shape, node.dtype, loc)
}

/// `node` with its elements in row-major order under `shape` (same count).
pub(crate) fn reshape_node(
    node: &Arc<Node>,
    shape: &[usize],
    loc: &'static Location<'static>,
) -> Arc<Node> {
    if node.shape == shape {
        return node.clone();
    }
    let from = node.shape.clone();
    movement_node(
        node,
        Op::Reshape,
        shape.to_vec(),
        |l| l.reshape(&from, shape),
        loc,
    )
}

/// `node` broadcast to `shape` (a valid broadcast target, checked by the caller).
pub(crate) fn expand_node(
    node: &Arc<Node>,
    shape: &[usize],
    loc: &'static Location<'static>,
) -> Arc<Node> {
    if node.shape == shape {
        return node.clone();
    }
    // A pending scalar holds one value for every index: broadcast, it is
    // the same scalar with the new shape (one node, not scalar, reshape and
    // expand: a scalar operand of every binary op comes through here, and
    // host time per op is per node).
    if numel(&node.shape) == 1 {
        if let Some(bits) = node.pending_scalar() {
            return Node::pending(
                Op::Scalar,
                Vec::new(),
                vec![bits],
                shape.to_vec(),
                node.dtype,
                loc,
            );
        }
    }
    let mut padded = vec![1; shape.len() - node.shape.len()];
    padded.extend_from_slice(&node.shape);
    let node = reshape_node(node, &padded, loc);
    if node.shape == shape {
        return node;
    }
    movement_node(
        &node,
        Op::Expand,
        shape.to_vec(),
        |l| Some(l.expand(&padded, shape)),
        loc,
    )
}

impl Tensor {
    /// The same elements with a new shape; one entry may be `-1` (inferred).
    /// As in PyTorch, the result is a view (aliasing `self`) when the
    /// layout allows it, and a new tensor otherwise.
    #[track_caller]
    pub fn reshape(&self, shape: impl IntoDims) -> Tensor {
        let loc = Location::caller();
        let dims = shape.into_dims();
        let n = self.numel();
        let known: usize = dims
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .product();
        let inferred = dims.iter().filter(|&&d| d == -1).count();
        let bad = || -> ! {
            panic!(
                "reshape: cannot view shape {:?} ({} elements, {}) as {:?} at {loc}",
                self.shape(),
                n,
                self.dtype(),
                dims
            )
        };
        if inferred > 1 || dims.iter().any(|&d| d < -1) {
            bad();
        }
        let new_shape: Vec<usize> = dims
            .iter()
            .map(|&d| {
                if d >= 0 {
                    d as usize
                } else if known == 0 || !n.is_multiple_of(known) {
                    bad()
                } else {
                    n / known
                }
            })
            .collect();
        if numel(&new_shape) != n {
            bad();
        }
        let out = match self.layout_in_base().reshape(self.shape(), &new_shape) {
            Some(layout) => self.make_view(new_shape, layout, loc),
            None => Tensor::from_node(reshape_node(&self.node(), &new_shape, loc), self.device()),
        };
        rules::reshape("reshape", self, &out);
        out
    }

    /// Like [`Tensor::reshape`], as in PyTorch's `view` (which would refuse
    /// where `reshape` copies; here it copies too).
    #[track_caller]
    pub fn view(&self, shape: impl IntoDims) -> Tensor {
        self.reshape(shape)
    }

    /// A 1-D view of all elements.
    #[track_caller]
    pub fn flatten(&self) -> Tensor {
        self.reshape([self.numel()])
    }

    /// Reorders dimensions: output dim `k` is input dim `dims[k]`
    /// (negative entries count from the end). A view.
    #[track_caller]
    pub fn permute(&self, dims: impl IntoDims) -> Tensor {
        let loc = Location::caller();
        let dims = dims.into_dims();
        let rank = self.rank();
        if dims.len() != rank {
            panic!(
                "permute: {dims:?} has {} entries for a tensor of shape {:?} at {loc}",
                dims.len(),
                self.shape()
            );
        }
        let perm: Vec<usize> = dims
            .iter()
            .map(|&d| resolve_axis("permute", d, rank))
            .collect();
        let mut seen = vec![false; rank];
        for &p in &perm {
            if std::mem::replace(&mut seen[p], true) {
                panic!(
                    "permute: {dims:?} repeats dimension {p} (shape {:?}) at {loc}",
                    self.shape()
                );
            }
        }
        self.permuted(perm, loc)
    }

    fn permuted(&self, perm: Vec<usize>, loc: &'static Location<'static>) -> Tensor {
        let shape = perm.iter().map(|&p| self.shape()[p]).collect();
        let layout = self.layout_in_base().permute(&perm);
        let out = self.make_view(shape, layout, loc);
        rules::permute(self, &perm, &out);
        out
    }

    /// Swaps two dimensions (a view).
    #[track_caller]
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Tensor {
        let rank = self.rank();
        if rank == 0 {
            // Dims 0 and -1 of a 0-dim tensor name its one element: the
            // identity permutation (recorded for autograd like any other).
            resolve_axis("transpose", dim0, rank);
            resolve_axis("transpose", dim1, rank);
            return self.permuted(Vec::new(), Location::caller());
        }
        let (a, b) = (
            resolve_axis("transpose", dim0, rank),
            resolve_axis("transpose", dim1, rank),
        );
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(a, b);
        self.permuted(perm, Location::caller())
    }

    /// The transpose of a matrix (rank ≤ 2), as PyTorch's `.t()`.
    #[track_caller]
    pub fn t(&self) -> Tensor {
        assert!(
            self.rank() <= 2,
            "t: expects a tensor of rank <= 2, got shape {:?} at {}",
            self.shape(),
            Location::caller()
        );
        self.transpose(0, -1)
    }

    /// Broadcasts to `shape` (`-1` keeps a dimension): size-1 dimensions
    /// repeat and new leading dimensions may be added. A read-only view:
    /// writing through it panics, as in PyTorch.
    #[track_caller]
    pub fn expand(&self, shape: impl IntoDims) -> Tensor {
        let loc = Location::caller();
        let dims = shape.into_dims();
        let rank = self.rank();
        if dims.len() < rank {
            panic!(
                "expand: target {dims:?} has fewer dimensions than shape {:?} at {loc}",
                self.shape()
            );
        }
        let lead = dims.len() - rank;
        let target: Vec<usize> = dims
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                let own = if i >= lead {
                    Some(self.shape()[i - lead])
                } else {
                    None
                };
                match (d, own) {
                    (-1, Some(s)) => s,
                    (d, Some(s)) if d >= 0 && (s == d as usize || s == 1) => d as usize,
                    (d, None) if d >= 0 => d as usize,
                    _ => panic!(
                        "expand: cannot expand shape {:?} to {dims:?} at {loc}",
                        self.shape()
                    ),
                }
            })
            .collect();
        let layout = self.layout_in_base();
        let mut padded_shape = vec![1; lead];
        padded_shape.extend_from_slice(self.shape());
        let mut padded = Layout {
            strides: vec![0; lead],
            offset: layout.offset,
        };
        padded.strides.extend_from_slice(&layout.strides);
        let out = self.make_view(target.clone(), padded.expand(&padded_shape, &target), loc);
        rules::expand(self, &out);
        out
    }

    /// Alias of [`Tensor::expand`] with a plain shape.
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl IntoDims) -> Tensor {
        self.expand(shape)
    }

    /// Inserts a size-1 dimension at `dim` (`-1` appends). A view.
    #[track_caller]
    pub fn unsqueeze(&self, dim: isize) -> Tensor {
        let d = resolve_axis("unsqueeze", dim, self.rank() + 1);
        let mut shape = self.shape().to_vec();
        shape.insert(d, 1);
        let mut layout = self.layout_in_base();
        layout.strides.insert(d, 0);
        let out = self.make_view(shape, layout, Location::caller());
        rules::reshape("unsqueeze", self, &out);
        out
    }

    /// Removes dimension `dim` if its size is 1 (else a view of all of
    /// `self`, as PyTorch does).
    #[track_caller]
    pub fn squeeze(&self, dim: isize) -> Tensor {
        let mut shape = self.shape().to_vec();
        let mut layout = self.layout_in_base();
        if self.rank() > 0 {
            let d = resolve_axis("squeeze", dim, self.rank());
            if shape[d] == 1 {
                shape.remove(d);
                layout.strides.remove(d);
            }
        }
        let out = self.make_view(shape, layout, Location::caller());
        rules::reshape("squeeze", self, &out);
        out
    }

    /// Removes every size-1 dimension. A view.
    #[track_caller]
    pub fn squeeze_all(&self) -> Tensor {
        let layout = self.layout_in_base();
        let (shape, strides) = self
            .shape()
            .iter()
            .zip(&layout.strides)
            .filter(|(d, _)| **d != 1)
            .map(|(&d, &s)| (d, s))
            .unzip();
        let layout = Layout {
            strides,
            offset: layout.offset,
        };
        let out = self.make_view(shape, layout, Location::caller());
        rules::reshape("squeeze", self, &out);
        out
    }

    /// Elements `start, start + step, ..` below `end` of dimension `dim`
    /// (`end` is clamped to the size, as Python slicing does). A view.
    #[track_caller]
    pub fn slice(&self, dim: isize, start: usize, end: usize, step: usize) -> Tensor {
        let loc = Location::caller();
        let d = resolve_axis("slice", dim, self.rank());
        let size = self.shape()[d];
        if step == 0 {
            panic!(
                "slice: step must be positive (shape {:?}, dim {d}) at {loc}",
                self.shape()
            );
        }
        let end = end.min(size);
        let start = start.min(end);
        let len = (end - start).div_ceil(step);
        let mut layout = self.layout_in_base();
        layout.offset += start * layout.strides[d];
        layout.strides[d] *= step;
        let mut shape = self.shape().to_vec();
        shape[d] = len;
        let out = self.make_view(shape, layout, loc);
        rules::subset_view("slice", self, &out, move |z| {
            z.slice(d as isize, start, end, step)
        });
        out
    }

    /// `length` elements of dimension `dim` from `start` (a view; panics
    /// past the end, as PyTorch does).
    #[track_caller]
    pub fn narrow(&self, dim: isize, start: usize, length: usize) -> Tensor {
        let d = resolve_axis("narrow", dim, self.rank());
        if start + length > self.shape()[d] {
            panic!(
                "narrow: {start}..{} is out of range for dim {d} of shape {:?} at {}",
                start + length,
                self.shape(),
                Location::caller()
            );
        }
        self.slice(dim, start, start + length, 1)
    }

    /// Element `index` of dimension `dim`, dropping the dimension (a view).
    #[track_caller]
    pub fn select(&self, dim: isize, index: usize) -> Tensor {
        let d = resolve_axis("select", dim, self.rank());
        if index >= self.shape()[d] {
            panic!(
                "select: index {index} is out of range for dim {d} of shape {:?} at {}",
                self.shape(),
                Location::caller()
            );
        }
        let mut layout = self.layout_in_base();
        layout.offset += index * layout.strides[d];
        layout.strides.remove(d);
        let mut shape = self.shape().to_vec();
        shape.remove(d);
        let out = self.make_view(shape, layout, Location::caller());
        rules::subset_view("select", self, &out, move |z| z.select(d as isize, index));
        out
    }

    /// The diagonal of dims `dim1` and `dim2` (`offset` > 0 above the main
    /// diagonal, < 0 below), appended as the last dimension, as PyTorch's
    /// `diagonal`. A view.
    #[track_caller]
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Tensor {
        let loc = Location::caller();
        let rank = self.rank();
        let (a, b) = (
            resolve_axis("diagonal", dim1, rank),
            resolve_axis("diagonal", dim2, rank),
        );
        if a == b {
            panic!(
                "diagonal: dims {dim1} and {dim2} are the same (shape {:?}) at {loc}",
                self.shape()
            );
        }
        let mut layout = self.layout_in_base();
        let (sa, sb) = (self.shape()[a], self.shape()[b]);
        let (row0, col0) = if offset >= 0 {
            (0, offset as usize)
        } else {
            (offset.unsigned_abs(), 0)
        };
        let len = sa.saturating_sub(row0).min(sb.saturating_sub(col0));
        if len > 0 {
            layout.offset += row0 * layout.strides[a] + col0 * layout.strides[b];
        }
        let diag_stride = layout.strides[a] + layout.strides[b];
        let mut shape = Vec::new();
        let mut strides = Vec::new();
        for k in 0..rank {
            if k != a && k != b {
                shape.push(self.shape()[k]);
                strides.push(layout.strides[k]);
            }
        }
        shape.push(len);
        strides.push(diag_stride);
        let out = self.make_view(
            shape,
            Layout {
                strides,
                offset: layout.offset,
            },
            loc,
        );
        rules::subset_view("diagonal", self, &out, move |z| {
            z.diagonal(offset, a as isize, b as isize)
        });
        out
    }
}
