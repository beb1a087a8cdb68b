//! Donation, decided on the graph: which outputs write into the buffer of
//! an input the graph alone still needs (so an in-place update such as
//! `w -= lr * g` allocates nothing), and which into the buffer of an
//! intermediate their kernel is the last to read (a gradient computed
//! from a saved activation, of its size: the two are never live
//! together). An output may take a value's buffer only if its kernel
//! reads that value at each invocation's own element alone (then each
//! element is read before the same invocation overwrites it, and no
//! other invocation reads it). Which inputs may be donated at all
//! (nothing that outlives the run can read them) is decided when the
//! graph is collected (`graph::collect`).

use super::KernelKind;
use super::plan::Plan;
use crate::graph::op::Op;
use crate::graph::{GKind, GraphKey};
use crate::shape::numel;

/// Outputs that write into another node's buffer: `(output, node)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Donations {
    /// Into a donated input's buffer (bound when a run starts).
    pub inputs: Vec<(usize, usize)>,
    /// Into the buffer of an intermediate that the output's kernel reads
    /// last (taken over when that kernel is encoded).
    pub intermediates: Vec<(usize, usize)>,
}

/// Decides the donations of `plan`'s kernels, each set as an alias of
/// the kernel that takes the buffer: to inputs, then to intermediates.
pub(super) fn plan_donations(key: &GraphKey, plan: &mut Plan) {
    let mut last_reader: Vec<Option<usize>> = vec![None; key.nodes.len()];
    for (k, kernel) in plan.kernels.iter().enumerate() {
        for &r in &kernel.reads {
            last_reader[r] = Some(k);
        }
    }
    let mut taken = vec![false; key.nodes.len()];
    donate_inputs(key, plan, &last_reader, &mut taken);
    take_over_intermediates(key, plan, &last_reader, &mut taken);
}

/// The donations to inputs: per buffer (`GraphKey::buffer_group`: an
/// input and the views of it bound as inputs of their own), one output of
/// the buffer's last reader, where that kernel reads the buffer through
/// one input (kernels run in order, so every earlier reader has read it
/// by then); of any elementwise kernel where nothing reads it.
fn donate_inputs(
    key: &GraphKey,
    plan: &mut Plan,
    last_reader: &[Option<usize>],
    taken: &mut [bool],
) {
    let slots = key.donatable.len();
    let inputs: Vec<(usize, usize, usize)> = (key.nodes.iter().enumerate())
        .filter_map(|(x, node)| match node.kind {
            GKind::Input { slot, .. } => Some((x, slot, key.buffer_group[slot])),
            _ => None,
        })
        .collect();
    // Per buffer: its last reader, and how many of its inputs that
    // kernel reads.
    let mut last = vec![None; slots];
    for &(x, _, group) in &inputs {
        last[group] = last[group].max(last_reader[x]);
    }
    let mut read_by_last = vec![0usize; slots];
    for &(x, _, group) in &inputs {
        read_by_last[group] +=
            usize::from(last_reader[x].is_some() && last_reader[x] == last[group]);
    }
    let mut given = vec![false; slots];
    for &(x, slot, group) in &inputs {
        if !key.donatable[slot] || given[group] {
            continue;
        }
        let candidates: Vec<usize> = match last[group] {
            None => (0..plan.kernels.len())
                .filter(|&k| plan.kernels[k].group.kind == KernelKind::Elementwise)
                .collect(),
            Some(k) if last_reader[x] == Some(k) && read_by_last[group] == 1 => vec![k],
            Some(_) => continue,
        };
        given[group] = candidates
            .into_iter()
            .any(|k| take(key, plan, (x, k), taken));
    }
}

/// The intermediates taken over: one output of the kernel that reads an
/// intermediate last (after the kernel that writes it), where it fits.
fn take_over_intermediates(
    key: &GraphKey,
    plan: &mut Plan,
    last_reader: &[Option<usize>],
    taken: &mut [bool],
) {
    let is_output = key.output_mask();
    for x in 0..key.nodes.len() {
        if let (Some(j), Some(k)) = (plan.writer[x], last_reader[x])
            && j < k
            && !is_output[x]
        {
            take(key, plan, (x, k), taken);
        }
    }
}

/// Lets the first output of kernel `k` not yet `taken` that fits node
/// `x`'s buffer write into it (an alias of the kernel), where `k` reads
/// `x` only at each invocation's own element; says whether one did.
fn take(key: &GraphKey, plan: &mut Plan, (x, k): (usize, usize), taken: &mut [bool]) -> bool {
    let nodes = &key.nodes;
    let group = &plan.kernels[k].group;
    let stored = |n: usize| plan.stored_before(key, k, n);
    let fits = |o: usize| {
        numel(&nodes[o].shape) == numel(&nodes[x].shape)
            && nodes[o].dtype.wgsl_storage_type() == nodes[x].dtype.wgsl_storage_type()
            && nodes[o].dtype.size_in_bytes() == nodes[x].dtype.size_in_bytes()
    };
    let Some(o) = (group.outputs.iter().copied()).find(|&o| !taken[o] && fits(o)) else {
        return false;
    };
    if !reads_only_at_own_element(key, &group.outputs, &stored, x) {
        return false;
    }
    // The output's position among those the kernel writes.
    let Some(position) = group.writes().position(|w| w == o) else {
        return false;
    };
    plan.kernels[k].aliases.push((x, position));
    taken[o] = true;
    true
}

/// Whether the elementwise kernel writing `outputs` reads node `x` only
/// at each invocation's own element index. `stored(n)`: node `n` is read
/// from memory in this kernel (an input, or written by an earlier kernel)
/// rather than computed in it. One walk over the nodes the kernel
/// inlines, each visited at most once per index state (its cost is the
/// kernel's, not the graph's).
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
    // A map of the nodes visited, not a flag per graph node: the walk
    // stays within the kernel, and it runs once per candidate donation.
    let mut seen: rustc_hash::FxHashMap<usize, u8> = rustc_hash::FxHashMap::default();
    while let Some((n, own, output)) = stack.pop() {
        let bit = if own { 1 } else { 2 };
        let flags = seen.entry(n).or_default();
        if *flags & bit != 0 {
            continue;
        }
        *flags |= bit;
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
