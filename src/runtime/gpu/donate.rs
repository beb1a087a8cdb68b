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
/// allocates nothing; and outputs that write into the buffer of an
/// intermediate their kernel is the last to read (a gradient computed
/// from a saved activation, of its size), so the two are never live
/// together. The kernel that takes a buffer is the last to read it
/// (through the input, or through a view of it bound as an input of its
/// own), reads it through that node alone, and only at each
/// invocation's own element (decided on the graph:
/// `schedule::reads_only_at_own_element`): then every element is read
/// before the same invocation overwrites it. Returns the donations to
/// inputs and the reuses of intermediates, as `(output node, node whose
/// buffer it takes)` pairs, and regenerates the kernels involved.
pub(super) fn plan_donations(
    graph: &Graph,
    cx: &CodegenContext,
    groups: &[KernelGroup],
    available: &[Vec<bool>],
    sources: &mut [KernelSource],
) -> Donations {
    let nodes = &graph.key.nodes;
    let mut plan = Planner {
        graph,
        cx,
        groups,
        available,
        taken: vec![false; nodes.len()],
        aliases: vec![Vec::new(); groups.len()],
    };
    let mut donations = Donations::default();
    let mut group_given = vec![false; graph.key.donatable.len()];
    let elementwise = |k: &usize| groups[*k].kind == KernelKind::Elementwise;
    for (x, node) in nodes.iter().enumerate() {
        let GKind::Input { slot, .. } = node.kind else {
            continue;
        };
        if !graph.key.donatable[slot] {
            continue;
        }
        // The nodes on x's buffer: x and views of it bound as inputs of
        // their own (`GraphKey::buffer_group`). One buffer goes to one
        // output (and the kernel that took it reads it through that
        // output's binding, so it no longer counts among the readers).
        let group = graph.key.buffer_group[slot];
        if group_given[group] {
            continue;
        }
        let on_buffer = |r: usize| match nodes[r].kind {
            GKind::Input { slot: s, .. } => graph.key.buffer_group[s] == group,
            _ => false,
        };
        let readers: Vec<usize> = (0..groups.len())
            .filter(|&k| sources[k].all_reads().any(on_buffer))
            .collect();
        // The input's last reader may write into its buffer: kernels run
        // in order, so every earlier reader has read it by then.
        let candidates: Vec<usize> = match readers.last() {
            None => (0..groups.len()).filter(elementwise).collect(),
            Some(&k) => vec![k],
        };
        for k in candidates {
            // The donating kernel reads the buffer through x alone.
            if sources[k].all_reads().any(|r| r != x && on_buffer(r)) {
                continue;
            }
            if let Some(o) = plan.take(x, k, sources) {
                donations.inputs.push((o, x));
                group_given[group] = true;
                break;
            }
        }
    }
    // Intermediates: each kernel's last reads.
    let mut last_reader: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut writer: Vec<Option<usize>> = vec![None; nodes.len()];
    for (k, source) in sources.iter().enumerate() {
        for r in source.all_reads() {
            last_reader[r] = Some(k);
        }
        for &w in &source.writes {
            writer[w] = Some(k);
        }
    }
    let outputs = &graph.key.outputs;
    for x in 0..nodes.len() {
        let (Some(j), Some(k)) = (writer[x], last_reader[x]) else {
            continue;
        };
        if j < k && !outputs.contains(&x) {
            if let Some(o) = plan.take(x, k, sources) {
                donations.intermediates.push((o, x));
            }
        }
    }
    if !donations.inputs.is_empty() || !donations.intermediates.is_empty() {
        log::debug!(
            "graph {:016x}: outputs take over donated inputs {:?} and intermediates {:?}",
            graph.hash,
            donations.inputs,
            donations.intermediates
        );
    }
    donations
}

/// Outputs that write into another node's buffer: `(output, node)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Donations {
    /// Into a donated input's buffer (bound when a run starts).
    pub inputs: Vec<(usize, usize)>,
    /// Into the buffer of an intermediate that the output's kernel reads
    /// last (taken over when that kernel is encoded).
    pub intermediates: Vec<(usize, usize)>,
}

/// What deciding a donation needs, and what was decided so far.
struct Planner<'a> {
    graph: &'a Graph,
    cx: &'a CodegenContext<'a>,
    groups: &'a [KernelGroup],
    available: &'a [Vec<bool>],
    /// Outputs already writing into another node's buffer.
    taken: Vec<bool>,
    /// Per kernel: the nodes whose buffers its outputs write into, with
    /// the output's position.
    aliases: Vec<Vec<(usize, usize)>>,
}

impl Planner<'_> {
    /// Lets an output of kernel `k` that fits node `x`'s buffer write into
    /// it, where `k` reads `x` only at each invocation's own element;
    /// regenerates the kernel and returns the output.
    fn take(&mut self, x: usize, k: usize, sources: &mut [KernelSource]) -> Option<usize> {
        let nodes = &self.graph.key.nodes;
        let group = &self.groups[k];
        let stored = |i: usize| self.available[k][i];
        for (j, &o) in group.outputs.iter().enumerate() {
            let fits = numel(&nodes[o].shape) == numel(&nodes[x].shape)
                && nodes[o].dtype.wgsl_storage_type() == nodes[x].dtype.wgsl_storage_type()
                && nodes[o].dtype.size_in_bytes() == nodes[x].dtype.size_in_bytes();
            if self.taken[o] || !fits {
                continue;
            }
            if !reads_only_at_own_element(&self.graph.key, &group.outputs, &stored, x) {
                return None;
            }
            let mut trial = self.aliases[k].clone();
            // The output's position among those the kernel writes (a
            // root kernel writes its root first, where it does).
            let position = match group.kind {
                KernelKind::Root {
                    write_root: true, ..
                } => j + 1,
                _ => j,
            };
            trial.push((x, position));
            let source = lower_donating(self.graph, self.cx, group, &stored, &trial)?;
            sources[k] = source;
            self.aliases[k] = trial;
            self.taken[o] = true;
            return Some(o);
        }
        None
    }
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
