//! Donation: which outputs write into the buffer of an input the graph
//! alone still needs, decided on the graph and checked on the lowered
//! kernels that take them.

use crate::codegen::{CodegenContext, KernelSource, generate_root_kernel, lower_kernel};
use crate::graph::{GKind, Graph};
use crate::kernel::reads_output_off_its_stores;
use crate::schedule::{KernelGroup, KernelKind, reads_only_at_own_element};
use crate::shape::numel;

/// Chooses outputs that write into the buffer of a donated input (one the
/// graph alone still needs), so an in-place update such as `w -= lr * g`
/// allocates nothing. An input qualifies when at most one kernel reads it,
/// and that kernel reads it only at each invocation's own element (decided
/// on the graph: `schedule::reads_only_at_own_element`): then every element
/// is read before the same invocation overwrites it. Returns `(output
/// node, input node)` pairs and regenerates the kernels involved.
pub(super) fn plan_donations(
    graph: &Graph,
    cx: &CodegenContext,
    groups: &[KernelGroup],
    available: &[Vec<bool>],
    sources: &mut [KernelSource],
) -> Vec<(usize, usize)> {
    let nodes = &graph.key.nodes;
    let mut donations: Vec<(usize, usize)> = Vec::new();
    let mut aliases: Vec<Vec<(usize, usize)>> = vec![Vec::new(); groups.len()];
    for (x, node) in nodes.iter().enumerate() {
        let GKind::Input { slot, .. } = node.kind else {
            continue;
        };
        if !graph.key.donatable[slot] {
            continue;
        }
        let readers: Vec<usize> = (0..groups.len())
            .filter(|&k| sources[k].all_reads().any(|r| r == x))
            .collect();
        let elementwise = |k: &usize| groups[*k].kind == KernelKind::Elementwise;
        // Only a kernel that is the input's one reader may write into its
        // buffer. (Letting the last of several readers take it was tried:
        // on lavapipe, runs then differed from one another now and then,
        // as if an earlier reader's dispatch still read the buffer while
        // the later one wrote it.)
        let candidates: Vec<usize> = match readers.as_slice() {
            [] => (0..groups.len()).filter(elementwise).collect(),
            [k] => vec![*k],
            _ => continue,
        };
        'kernels: for k in candidates {
            for (j, &o) in groups[k].outputs.iter().enumerate() {
                let taken = donations.iter().any(|&(d, _)| d == o);
                let fits = numel(&nodes[o].shape) == numel(&node.shape)
                    && nodes[o].dtype.wgsl_storage_type() == node.dtype.wgsl_storage_type()
                    && nodes[o].dtype.size_in_bytes() == node.dtype.size_in_bytes();
                if taken || !fits {
                    continue;
                }
                let stored = |i: usize| available[k][i];
                if !reads_only_at_own_element(&graph.key, &groups[k].outputs, &stored, x) {
                    continue 'kernels;
                }
                let mut trial = aliases[k].clone();
                // The output's position among those the kernel writes (a
                // root kernel writes its root first, where it does).
                let position = match groups[k].kind {
                    KernelKind::Root {
                        write_root: true, ..
                    } => j + 1,
                    _ => j,
                };
                trial.push((x, position));
                let Some(source) = lower_donating(graph, cx, &groups[k], &stored, &trial) else {
                    continue 'kernels;
                };
                sources[k] = source;
                aliases[k] = trial;
                donations.push((o, x));
                break 'kernels;
            }
        }
    }
    if !donations.is_empty() {
        log::debug!(
            "graph {:016x}: outputs take over donated inputs {donations:?}",
            graph.hash
        );
    }
    donations
}

/// The kernel of `group` with outputs written into donated inputs'
/// buffers (`aliases`: input node, output position), or `None` where the
/// lowered kernel reads a donated input at another element than it stores
/// there (then nothing is donated to it).
fn lower_donating(
    graph: &Graph,
    cx: &CodegenContext,
    group: &KernelGroup,
    stored: &dyn Fn(usize) -> bool,
    aliases: &[(usize, usize)],
) -> Option<KernelSource> {
    let key = &graph.key;
    match group.kind {
        KernelKind::Elementwise => {
            let lowered = lower_kernel(key, &group.outputs, group.numel, stored, aliases, cx);
            // The lowered kernel reads an aliased input from the output's
            // binding only at the own element; the graph said it would.
            if lowered.reads_donated_elsewhere() {
                log::error!(
                    "graph {:016x}: inputs {aliases:?} were judged safe to donate but are read elsewhere; not donated",
                    graph.hash
                );
                debug_assert!(false, "donation analysis and code generation disagree");
                return None;
            }
            Some(lowered.render())
        }
        KernelKind::Root { node, write_root } => {
            let source =
                generate_root_kernel(key, node, write_root, &group.outputs, stored, aliases, cx);
            if reads_output_off_its_stores(&source.kernel.body) {
                log::debug!(
                    "graph {:016x}: root kernel {node} reads a donated input off its stores; not donated",
                    graph.hash
                );
                return None;
            }
            Some(source)
        }
    }
}
