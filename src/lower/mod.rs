//! Scheduling: which nodes of a graph are written to memory, and how the
//! written nodes are grouped into kernels.
//!
//! The rule today covers elementwise and movement ops, which are all pure
//! functions of an element index: any of them can be recomputed inside any
//! kernel that needs it. So a node is written only when it must be (a graph
//! output), every written node of the same element count joins one kernel
//! (several outputs), and everything else is inlined as expressions and
//! index arithmetic. With fusion off every computing op is written by its
//! own kernel (movement ops stay index arithmetic: views never copy).

use crate::graph::op::Op;
use crate::graph::{GKind, GraphKey};
use crate::shape::numel;

/// One kernel: the graph nodes it writes, all with `numel` elements.
#[derive(Clone, Debug)]
pub(crate) struct KernelGroup {
    pub numel: usize,
    pub outputs: Vec<usize>,
}

/// The kernels of a graph in execution order, and which nodes are written.
#[derive(Clone, Debug)]
pub(crate) struct Schedule {
    pub kernels: Vec<KernelGroup>,
}

/// Groups the written nodes of `key` into kernels.
///
/// `max_outputs` bounds the outputs per kernel so that bindings stay under
/// the adapter's storage-buffer limit.
pub(crate) fn schedule(key: &GraphKey, max_outputs: usize) -> Schedule {
    let mut written = vec![false; key.nodes.len()];
    for &o in &key.outputs {
        written[o] = true;
    }
    if !key.fused {
        for (i, n) in key.nodes.iter().enumerate() {
            if let GKind::Op { op, .. } = &n.kind {
                if !op.is_movement() && *op != Op::Scalar {
                    written[i] = true;
                    log::debug!("realise node {i} ({}): fusion is off", op.name());
                }
            }
        }
    }

    let mut kernels: Vec<KernelGroup> = Vec::new();
    for (i, n) in key.nodes.iter().enumerate() {
        if !written[i] {
            continue;
        }
        let count = numel(&n.shape);
        if count == 0 {
            // Nothing to compute; the output buffer is allocated empty.
            continue;
        }
        let joinable = if key.fused {
            kernels
                .iter()
                .rposition(|k| k.numel == count && k.outputs.len() < max_outputs)
        } else {
            None
        };
        match joinable {
            Some(k) => kernels[k].outputs.push(i),
            None => kernels.push(KernelGroup {
                numel: count,
                outputs: vec![i],
            }),
        }
    }
    Schedule { kernels }
}
