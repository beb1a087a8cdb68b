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
    // Who writes and who last reads each node, from the kernels as first
    // lowered: a kernel re-lowered to write into x's buffer changes how
    // it reads x alone, and x is then taken.
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
    let mut plan = Planner {
        graph,
        cx,
        groups,
        available,
        taken: vec![false; nodes.len()],
        aliases: vec![Vec::new(); groups.len()],
    };
    let donations = Donations {
        inputs: donate_inputs(&mut plan, &last_reader, sources),
        intermediates: take_over_intermediates(&mut plan, (&writer, &last_reader), sources),
    };
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

/// The donations to inputs: per buffer (`GraphKey::buffer_group`: an
/// input and the views of it bound as inputs of their own), one output of
/// the buffer's last reader, where that kernel reads the buffer through
/// one input (kernels run in order, so every earlier reader has read it
/// by then); of any elementwise kernel where nothing reads it.
fn donate_inputs(
    plan: &mut Planner,
    last_reader: &[Option<usize>],
    sources: &mut [KernelSource],
) -> Vec<(usize, usize)> {
    let key = &plan.graph.key;
    let slots = key.donatable.len();
    let inputs: Vec<(usize, usize)> = (key.nodes.iter().enumerate())
        .filter_map(|(x, node)| match node.kind {
            GKind::Input { slot, .. } => Some((x, key.buffer_group[slot])),
            _ => None,
        })
        .collect();
    // Per buffer: its last reader, and how many of its inputs that
    // kernel reads.
    let mut last = vec![None; slots];
    for &(x, group) in &inputs {
        last[group] = last[group].max(last_reader[x]);
    }
    let mut read_by_last = vec![0usize; slots];
    for &(x, group) in &inputs {
        read_by_last[group] +=
            usize::from(last_reader[x].is_some() && last_reader[x] == last[group]);
    }
    let mut given = vec![false; slots];
    let mut donations = Vec::new();
    for &(x, group) in &inputs {
        let GKind::Input { slot, .. } = key.nodes[x].kind else {
            continue;
        };
        if !key.donatable[slot] || given[group] {
            continue;
        }
        let candidates: Vec<usize> = match last[group] {
            None => (0..plan.groups.len())
                .filter(|&k| plan.groups[k].kind == KernelKind::Elementwise)
                .collect(),
            Some(k) if last_reader[x] == Some(k) && read_by_last[group] == 1 => vec![k],
            Some(_) => continue,
        };
        for k in candidates {
            if let Some(o) = plan.take(x, k, sources) {
                donations.push((o, x));
                given[group] = true;
                break;
            }
        }
    }
    donations
}

/// The intermediates taken over: one output of the kernel that reads an
/// intermediate last (after the kernel that writes it), where it fits.
fn take_over_intermediates(
    plan: &mut Planner,
    (writer, last_reader): (&[Option<usize>], &[Option<usize>]),
    sources: &mut [KernelSource],
) -> Vec<(usize, usize)> {
    let mut is_output = vec![false; writer.len()];
    for &o in &plan.graph.key.outputs {
        is_output[o] = true;
    }
    let mut taken = Vec::new();
    for x in 0..writer.len() {
        if let (Some(j), Some(k)) = (writer[x], last_reader[x])
            && j < k
            && !is_output[x]
            && let Some(o) = plan.take(x, k, sources)
        {
            taken.push((o, x));
        }
    }
    taken
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
