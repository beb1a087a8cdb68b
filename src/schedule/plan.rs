//! The plan of a graph's kernels, decided on the graph before any code is
//! generated: each kernel's group, the stored values it reads, the
//! adapter's binding budget applied (a kernel over it is divided here,
//! not found over it in generated code), and which outputs write into
//! another value's buffer (`donation`). Code generation then lowers each
//! kernel once, as planned.

use super::donation::{Donations, plan_donations};
use super::{KernelGroup, KernelKind, schedule};
use crate::graph::op::Op;
use crate::graph::{GKind, GraphKey};
use crate::kernel::{Target, binding_parts};
use crate::shape::numel;

/// One kernel as planned.
#[derive(Clone, Debug)]
pub(crate) struct KernelPlan {
    pub group: KernelGroup,
    /// The stored values it reads (graph inputs, or values written by an
    /// earlier kernel), ascending: every value its code may load, walked
    /// through the work it inlines (a superset where code generation
    /// folds a read away).
    pub reads: Vec<usize>,
    /// Outputs written into the buffer of a value this kernel is the last
    /// to read: `(value, output position)`, the position counting the
    /// root first where the kernel writes it.
    pub aliases: Vec<(usize, usize)>,
}

/// A graph's kernels in order, and what they write where.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub kernels: Vec<KernelPlan>,
    /// Per node: the kernel that writes it, if one does.
    pub writer: Vec<Option<usize>>,
    /// The outputs that write into other values' buffers (each also
    /// listed in its kernel's `aliases`).
    pub donations: Donations,
}

impl Plan {
    /// Whether kernel `k` reads node `n` from memory (a graph input, or a
    /// value an earlier kernel wrote) rather than computing it.
    pub fn stored_before(&self, key: &GraphKey, k: usize, n: usize) -> bool {
        matches!(key.nodes[n].kind, GKind::Input { .. }) || self.writer[n].is_some_and(|w| w < k)
    }

    /// Liveness of intermediates: per kernel, the values written and not
    /// graph outputs that it is the last to read (or that it writes and
    /// nothing reads), released for reuse once it is encoded. A value an
    /// output writes over is among its kernel's reads, so it lives until
    /// that kernel.
    pub fn releases(&self, key: &GraphKey) -> Vec<Vec<usize>> {
        let mut last_use: Vec<Option<usize>> = vec![None; key.nodes.len()];
        for (k, kernel) in self.kernels.iter().enumerate() {
            for n in kernel.group.writes().chain(kernel.reads.iter().copied()) {
                last_use[n] = Some(k);
            }
        }
        let mut is_output = vec![false; key.nodes.len()];
        for &o in &key.outputs {
            is_output[o] = true;
        }
        let mut releases = vec![Vec::new(); self.kernels.len()];
        for kernel in &self.kernels {
            for w in kernel.group.writes() {
                if let (false, Some(k)) = (is_output[w], last_use[w]) {
                    releases[k].push(w);
                }
            }
        }
        releases
    }

    /// Drops the aliases of kernel `k` (its code read an aliased value
    /// elsewhere than at the element it stores) and their donations.
    pub fn drop_aliases(&mut self, k: usize) {
        let outputs: Vec<usize> = self.kernels[k].group.writes().collect();
        let dropped: Vec<(usize, usize)> = std::mem::take(&mut self.kernels[k].aliases)
            .into_iter()
            .map(|(x, position)| (outputs[position], x))
            .collect();
        self.donations.inputs.retain(|d| !dropped.contains(d));
        self.donations
            .intermediates
            .retain(|d| !dropped.contains(d));
    }
}

/// The plan of `key`'s kernels on `target`: scheduled (`schedule`), each
/// kernel kept within the adapter's storage-binding limit, its reads
/// listed, donations decided. One pass over the kernels, each walking the
/// work it inlines (as its code generation does).
pub(crate) fn plan(key: &GraphKey, target: &Target) -> Plan {
    let max_bindings = target.max_storage_buffers;
    let mut groups = schedule(key, max_bindings.saturating_sub(2).max(1)).kernels;
    let mut writer: Vec<Option<usize>> = vec![None; key.nodes.len()];
    let mut kernels: Vec<KernelPlan> = Vec::with_capacity(groups.len());
    let is_input = |n: usize| matches!(key.nodes[n].kind, GKind::Input { .. });
    let mut k = 0;
    while k < groups.len() {
        let stored = |n: usize| is_input(n) || writer[n].is_some();
        let group = &groups[k];
        let reads = reads_of(key, group, &stored);
        if storage_bindings(key, group, &reads, target) > max_bindings {
            if let Some(split) = within_bindings(key, group, &stored) {
                match split {
                    Split::Halves(second) => {
                        let first = groups[k].outputs.len() - second.outputs.len();
                        groups[k].outputs.truncate(first);
                        groups.insert(k + 1, second);
                    }
                    Split::WriteFirst(first) => groups.insert(k, first),
                }
                continue;
            }
        }
        let kernel = KernelPlan {
            group: groups[k].clone(),
            reads,
            aliases: Vec::new(),
        };
        for w in kernel.group.writes() {
            writer[w] = Some(k);
        }
        kernels.push(kernel);
        k += 1;
    }
    let mut plan = Plan {
        kernels,
        writer,
        donations: Donations::default(),
    };
    plan.donations = plan_donations(key, &mut plan);
    plan
}

/// How a kernel over the binding limit is divided.
enum Split {
    /// Its outputs' second half goes to a kernel right after it (the
    /// group keeps the first half).
    Halves(KernelGroup),
    /// A value it inlines, written first by a kernel of its own.
    WriteFirst(KernelGroup),
}

/// How to divide `group`, over the binding limit: an elementwise kernel
/// of several outputs into two halves (each may still be divided when
/// planned in turn); else the value inlined into its output (or a root's
/// prologue) that reads about half of its stored values, written first.
/// `None` where neither applies (one output reading one huge value).
fn within_bindings(
    key: &GraphKey,
    group: &KernelGroup,
    stored: &dyn Fn(usize) -> bool,
) -> Option<Split> {
    if group.kind == KernelKind::Elementwise && group.outputs.len() > 1 {
        let half = group.outputs.len() / 2;
        return Some(Split::Halves(KernelGroup {
            kind: KernelKind::Elementwise,
            numel: group.numel,
            outputs: group.outputs[half..].to_vec(),
        }));
    }
    let output = match group.kind {
        KernelKind::Elementwise => group.outputs[0],
        KernelKind::Root { node, .. } => node,
    };
    let m = half_of_the_reads(key, output, stored)?;
    Some(Split::WriteFirst(KernelGroup {
        kind: KernelKind::Elementwise,
        numel: numel(&key.nodes[m].shape),
        outputs: vec![m],
    }))
}

/// The stored values kernel `group` reads: a walk from what it computes
/// (its root and outputs) down through the values it inlines, stopping
/// at stored ones. Each node is visited once.
pub(crate) fn reads_of(
    key: &GraphKey,
    group: &KernelGroup,
    stored: &dyn Fn(usize) -> bool,
) -> Vec<usize> {
    let nodes = &key.nodes;
    let mut stack: Vec<usize> = Vec::with_capacity(group.outputs.len() + 1);
    if let KernelKind::Root { node, .. } = group.kind {
        stack.push(node);
    }
    stack.extend_from_slice(&group.outputs);
    let computed_here = stack.clone();
    let mut seen = std::collections::HashSet::new();
    let mut reads = Vec::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        if stored(n) && !computed_here.contains(&n) {
            reads.push(n);
            continue;
        }
        if matches!(nodes[n].kind, GKind::Op { op: Op::Scalar, .. }) {
            continue;
        }
        stack.extend_from_slice(&nodes[n].inputs);
    }
    reads.sort_unstable();
    reads
}

/// The storage bindings kernel `group` takes at most: each value it reads
/// and writes in its parts (counted as vec4 reads, the larger), the
/// parameters (which may be a storage buffer) and the anomaly flags.
fn storage_bindings(
    key: &GraphKey,
    group: &KernelGroup,
    reads: &[usize],
    target: &Target,
) -> usize {
    let nodes = &key.nodes;
    let parts = |n: usize, elements: usize| {
        let size = nodes[n].dtype.size_in_bytes();
        binding_parts(elements, size, true, target.binding_part_bytes)
    };
    let read_parts: usize = reads.iter().map(|&n| parts(n, nodes[n].extent())).sum();
    let write_parts: usize = group
        .writes()
        .map(|n| parts(n, numel(&nodes[n].shape)))
        .sum();
    read_parts + write_parts + 1 + usize::from(key.checked)
}

/// The value inlined into `output`'s kernel (computed, not stored, not
/// a scalar) whose stored reads are nearest half of the kernel's, if one
/// reads at least two: writing it first divides the kernel's bindings.
/// Each node's reads are counted once, as a set capped at `CAP` (enough
/// to compare against any binding limit), so this is linear in the
/// kernel's nodes.
fn half_of_the_reads(
    key: &GraphKey,
    output: usize,
    stored: &dyn Fn(usize) -> bool,
) -> Option<usize> {
    const CAP: usize = 4096;
    let nodes = &key.nodes;
    let inlined = |n: usize| {
        !stored(n)
            && !matches!(
                nodes[n].kind,
                GKind::Input { .. } | GKind::Op { op: Op::Scalar, .. }
            )
    };
    // Post-order over the inlined nodes reachable from the output.
    let mut reads: std::collections::HashMap<usize, Vec<usize>> = std::collections::HashMap::new();
    let mut stack = vec![(output, false)];
    while let Some((n, expanded)) = stack.pop() {
        if reads.contains_key(&n) {
            continue;
        }
        if !expanded {
            stack.push((n, true));
            for &i in &nodes[n].inputs {
                if inlined(i) && !reads.contains_key(&i) {
                    stack.push((i, false));
                }
            }
            continue;
        }
        let mut set: Vec<usize> = Vec::new();
        for &i in &nodes[n].inputs {
            if stored(i) {
                set.push(i);
            } else if let Some(r) = reads.get(&i) {
                set.extend_from_slice(r);
            }
        }
        set.sort_unstable();
        set.dedup();
        set.truncate(CAP);
        reads.insert(n, set);
    }
    let total = reads.get(&output)?.len();
    reads
        .iter()
        .filter(|&(&n, r)| n != output && r.len() >= 2 && r.len() < total)
        .min_by_key(|&(&n, r)| (r.len().abs_diff(total / 2), n))
        .map(|(&n, _)| n)
}
