//! Splitting long reductions in two, for the GPU: a reduction of many
//! elements into few results would run on few workgroups, so it becomes
//! a first stage of partial results spread over many invocations
//! (`Op::Reduce` with `parts`) and a second that reduces those. This is a
//! decision about the GPU's kernels, taken here on the graph lowered for
//! it: the traced graph, its cache key and the CPU reference keep plain
//! one-stage reductions.

use crate::graph::op::{Op, ReduceOp};
use crate::graph::{GKind, GNode, GraphKey};
use crate::shape::numel;

/// Reduced elements from which a reduction with few outputs is split.
const SPLIT_THRESHOLD: usize = 1 << 16;

/// Outputs up to which a long reduction is split (more outputs already
/// spread over enough workgroups).
const SPLIT_MAX_OUTPUTS: usize = 64;

/// A graph lowered for the GPU, and for each of its nodes the node of the
/// traced graph it computes (part of), for source lines in messages.
pub(crate) struct Lowered {
    pub key: GraphKey,
    pub origin: Vec<usize>,
}

/// The parts a reduction of `reduced` elements into `outer` results is
/// split into, or `None` to keep it in one stage. About 128 elements a
/// part: the first stage then runs one invocation per part (no workgroup
/// tree), neighbours reading neighbouring elements.
pub(crate) fn split_parts(op: ReduceOp, reduced: usize, outer: usize) -> Option<usize> {
    (reduced >= SPLIT_THRESHOLD && outer <= SPLIT_MAX_OUTPUTS && !op.is_arg())
        .then(|| (reduced / 128).clamp(2, 1 << 17))
}

/// `key` with every long reduction split in two stages (see the module
/// doc): the partial reduction (keepdim shape plus a trailing dim of
/// `parts`), the reduction of that dim, and a reshape back to the
/// original node's shape. One pass; nodes keep their order.
pub(crate) fn split_reductions(key: &GraphKey) -> Lowered {
    let mut nodes: Vec<GNode> = Vec::with_capacity(key.nodes.len());
    let mut origin: Vec<usize> = Vec::with_capacity(key.nodes.len());
    // Index in the lowered graph of each traced node's value.
    let mut new_index: Vec<usize> = Vec::with_capacity(key.nodes.len());
    for (i, node) in key.nodes.iter().enumerate() {
        let inputs: Vec<usize> = node.inputs.iter().map(|&j| new_index[j]).collect();
        let split = match &node.kind {
            GKind::Op {
                op: Op::Reduce { op, axes, parts: 1 },
                ..
            } => {
                let in_shape = &key.nodes[node.inputs[0]].shape;
                let reduced: usize = axes.iter().map(|&d| in_shape[d]).product();
                let outer = numel(&node.shape);
                split_parts(*op, reduced, outer).map(|parts| (*op, axes.clone(), parts))
            }
            _ => None,
        };
        let Some((op, axes, parts)) = split else {
            nodes.push(GNode {
                inputs,
                ..node.clone()
            });
            origin.push(i);
            new_index.push(nodes.len() - 1);
            continue;
        };
        let mut partial_shape = node.shape.clone();
        partial_shape.push(parts);
        let last = partial_shape.len() - 1;
        let mut total_shape = node.shape.clone();
        total_shape.push(1);
        let reduce = |op, axes, parts| GKind::Op {
            op: Op::Reduce { op, axes, parts },
            param_base: 0,
        };
        nodes.push(GNode {
            kind: reduce(op, axes, parts),
            shape: partial_shape,
            dtype: node.dtype,
            inputs,
        });
        nodes.push(GNode {
            kind: reduce(op, vec![last], 1),
            shape: total_shape,
            dtype: node.dtype,
            inputs: vec![nodes.len() - 1],
        });
        nodes.push(GNode {
            kind: GKind::Op {
                op: Op::Reshape,
                param_base: 0,
            },
            shape: node.shape.clone(),
            dtype: node.dtype,
            inputs: vec![nodes.len() - 1],
        });
        origin.extend([i, i, i]);
        new_index.push(nodes.len() - 1);
    }
    Lowered {
        key: GraphKey {
            nodes,
            outputs: key.outputs.iter().map(|&o| new_index[o]).collect(),
            fused: key.fused,
            checked: key.checked,
            donatable: key.donatable.clone(),
        },
        origin,
    }
}
