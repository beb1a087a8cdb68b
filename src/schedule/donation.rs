//! Donation legality, decided on the graph: an output of an elementwise
//! kernel may be written into the buffer of an input the kernel reads
//! only if every read of that input happens at the reading invocation's
//! own element (then each element is read before the same invocation
//! overwrites it, and no other invocation reads it). Which inputs may be
//! donated at all (nothing that outlives the run can read them) is
//! decided when the graph is collected (`graph::collect`).

use crate::graph::op::Op;
use crate::graph::{GKind, GraphKey};
use crate::shape::numel;

/// Whether the elementwise kernel writing `outputs` reads node `x` only
/// at each invocation's own element index. `stored(n)`: node `n` is read
/// from memory in this kernel (an input, or written by an earlier kernel)
/// rather than computed in it. One walk over the nodes the kernel
/// inlines, each visited at most once per index state.
pub(crate) fn reads_only_at_own_element(
    key: &GraphKey,
    outputs: &[usize],
    stored: &dyn Fn(usize) -> bool,
    x: usize,
) -> bool {
    let nodes = &key.nodes;
    let own_layout = match &nodes[x].kind {
        GKind::Input { layout, .. } => layout.offset == 0 && layout.is_row_major(&nodes[x].shape),
        GKind::Op { .. } => true,
    };
    // (node, read at the own index, is a kernel output computed here).
    let mut stack: Vec<(usize, bool, bool)> = outputs.iter().map(|&o| (o, true, true)).collect();
    // Bit 0: visited at the own index; bit 1: visited at another index.
    let mut seen = vec![0u8; nodes.len()];
    while let Some((n, own, output)) = stack.pop() {
        let bit = if own { 1 } else { 2 };
        if seen[n] & bit != 0 {
            continue;
        }
        seen[n] |= bit;
        if n == x {
            if !own || !own_layout {
                return false;
            }
            continue;
        }
        if !output && stored(n) {
            continue; // loaded from its own buffer: nothing below is read here
        }
        let GKind::Op { op, .. } = &nodes[n].kind else {
            continue;
        };
        // An expand that adds no elements reads its input at the same index.
        let preserving = super::index_preserving(op)
            || (*op == Op::Expand
                && numel(&nodes[nodes[n].inputs[0]].shape) == numel(&nodes[n].shape));
        for &c in &nodes[n].inputs {
            stack.push((c, own && preserving, false));
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;
    use crate::{Device, DeviceConfig, Tensor};

    /// The key computing `out` and the graph index of its one input.
    fn key_and_input(out: &Tensor) -> (GraphKey, usize) {
        let graph = Graph::collect(&[out.node()], true);
        assert_eq!(graph.inputs.len(), 1, "one stored input");
        let x = graph
            .key
            .nodes
            .iter()
            .position(|n| matches!(n.kind, GKind::Input { .. }))
            .expect("an input node");
        (graph.key, x)
    }

    /// Whether `out`'s kernel may overwrite its one input (`w`).
    fn legal(out: &Tensor, _w: &Tensor) -> bool {
        let (key, x) = key_and_input(out);
        let stored = |n: usize| matches!(key.nodes[n].kind, GKind::Input { .. });
        reads_only_at_own_element(&key, &key.outputs, &stored, x)
    }

    #[test]
    fn elementwise_reads_at_the_own_element_may_be_overwritten() {
        let dev = Device::cpu_with(DeviceConfig::default());
        let w = Tensor::from_vec(vec![1.0f32; 16], [4, 4], &dev).unwrap();
        assert!(legal(&((&w * 0.5).tanh() + &w), &w));
        assert!(legal(&(&w.reshape([16]) - 1.0), &w));
    }

    #[test]
    fn reads_at_other_elements_may_not() {
        let dev = Device::cpu_with(DeviceConfig::default());
        let w = Tensor::from_vec(vec![1.0f32; 16], [4, 4], &dev).unwrap();
        // A transposed view (stored data read through other strides), a
        // flipped read, and a flipped read beside an own read.
        assert!(!legal(&(w.t() * 2.0), &w));
        assert!(!legal(&w.flip([0]), &w));
        assert!(!legal(&(&w + w.flip([1])), &w));
    }
}
