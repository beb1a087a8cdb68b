//! Movement ops: views, never copies. On stored data a view is a new layout
//! over the same buffer; on a pending value it is a movement node that the
//! kernel turns into index arithmetic.

use std::panic::Location;
use std::sync::Arc;

use super::dims::resolve_axis;
use super::{IntoDims, Tensor};
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
            return Node::ready(s, shape, node.dtype, loc);
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

fn permute_node(node: &Arc<Node>, perm: Vec<usize>, loc: &'static Location<'static>) -> Arc<Node> {
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return node.clone();
    }
    let shape = perm.iter().map(|&p| node.shape[p]).collect();
    let p = perm.clone();
    movement_node(
        node,
        Op::Permute(perm),
        shape,
        move |l| Some(l.permute(&p)),
        loc,
    )
}

impl Tensor {
    /// The same elements with a new shape; one entry may be `-1` (inferred).
    /// A view when the layout allows it, else the copy is fused into
    /// whatever reads it.
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
        Tensor::from_node(reshape_node(&self.node(), &new_shape, loc), self.device())
    }

    /// Alias of [`Tensor::reshape`], as in PyTorch's `view`.
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
    /// (negative entries count from the end).
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
        Tensor::from_node(permute_node(&self.node(), perm, loc), self.device())
    }

    /// Swaps two dimensions.
    #[track_caller]
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Tensor {
        let rank = self.rank();
        if rank == 0 {
            return self.clone();
        }
        let (a, b) = (
            resolve_axis("transpose", dim0, rank),
            resolve_axis("transpose", dim1, rank),
        );
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(a, b);
        Tensor::from_node(
            permute_node(&self.node(), perm, Location::caller()),
            self.device(),
        )
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

    /// Broadcasts to `shape` (`-1` keeps a dimension). Size-1 dimensions
    /// repeat without copying; new leading dimensions may be added.
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
        Tensor::from_node(expand_node(&self.node(), &target, loc), self.device())
    }

    /// Alias of [`Tensor::expand`] with a plain shape.
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl IntoDims) -> Tensor {
        self.expand(shape)
    }

    /// Inserts a size-1 dimension at `dim` (`-1` appends).
    #[track_caller]
    pub fn unsqueeze(&self, dim: isize) -> Tensor {
        let d = resolve_axis("unsqueeze", dim, self.rank() + 1);
        let mut shape = self.shape().to_vec();
        shape.insert(d, 1);
        Tensor::from_node(
            reshape_node(&self.node(), &shape, Location::caller()),
            self.device(),
        )
    }

    /// Removes dimension `dim` if its size is 1 (else returns `self`, as PyTorch does).
    #[track_caller]
    pub fn squeeze(&self, dim: isize) -> Tensor {
        if self.rank() == 0 {
            return self.clone();
        }
        let d = resolve_axis("squeeze", dim, self.rank());
        if self.shape()[d] != 1 {
            return self.clone();
        }
        let mut shape = self.shape().to_vec();
        shape.remove(d);
        Tensor::from_node(
            reshape_node(&self.node(), &shape, Location::caller()),
            self.device(),
        )
    }

    /// Removes every size-1 dimension.
    #[track_caller]
    pub fn squeeze_all(&self) -> Tensor {
        let shape: Vec<usize> = self.shape().iter().copied().filter(|&d| d != 1).collect();
        Tensor::from_node(
            reshape_node(&self.node(), &shape, Location::caller()),
            self.device(),
        )
    }
}
