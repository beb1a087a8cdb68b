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
}

impl Plan {
    /// Whether `other` plans the same kernels: each of one kind, writing
    /// and reading the same values, with the same aliases (their sizes,
    /// `KernelGroup::numel`, aside). A new size of a trace site binds the
    /// site's kernels unlowered only where its plan is theirs.
    pub fn same_kernels(&self, other: &Plan) -> bool {
        let same = |a: &KernelPlan, b: &KernelPlan| {
            a.group.kind == b.group.kind
                && a.group.outputs == b.group.outputs
                && a.reads == b.reads
                && a.aliases == b.aliases
        };
        self.writer == other.writer
            && self.kernels.len() == other.kernels.len()
            && (self.kernels.iter().zip(&other.kernels)).all(|(a, b)| same(a, b))
    }

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
        let is_output = key.output_mask();
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

    /// The storage bindings the plan allows kernel `k` at most (see
    /// `storage_bindings`): what its code may bind.
    #[cfg(test)]
    pub fn bindings_bound(&self, key: &GraphKey, k: usize, target: &Target) -> usize {
        let group = &self.kernels[k].group;
        let stored = |n: usize| self.stored_before(key, k, n);
        let (prologue, epilogue) = reads_by_part(key, group, &stored);
        storage_bindings(key, group, (&prologue, &epilogue), target)
    }

    /// The outputs of kernel `k` that write into another value's buffer,
    /// as `(output, value)`: its aliases.
    pub fn takes(&self, k: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let kernel = &self.kernels[k];
        (kernel.aliases.iter())
            .filter_map(|&(x, position)| Some((kernel.group.writes().nth(position)?, x)))
    }

    /// Every kernel's aliases, as donations to inputs and takeovers of
    /// intermediates.
    pub fn donations(&self, key: &GraphKey) -> Donations {
        let mut donations = Donations::default();
        for k in 0..self.kernels.len() {
            for (o, x) in self.takes(k) {
                match key.nodes[x].kind {
                    GKind::Input { .. } => donations.inputs.push((o, x)),
                    GKind::Op { .. } => donations.intermediates.push((o, x)),
                }
            }
        }
        donations
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
        let (prologue, epilogue) = reads_by_part(key, group, &stored);
        if storage_bindings(key, group, (&prologue, &epilogue), target) > max_bindings {
            let parts = (prologue.as_slice(), epilogue.as_slice());
            if let Some(split) = within_bindings(key, group, parts, &stored, target) {
                match split {
                    Split::Halves(second) => {
                        let first = groups[k].outputs.len() - second.outputs.len();
                        groups[k].outputs.truncate(first);
                        groups.insert(k + 1, second);
                    }
                    Split::WriteFirst(first) => groups.insert(k, first),
                    Split::Epilogue(epilogue) => {
                        if let KernelKind::Root { node, .. } = groups[k].kind {
                            groups[k].kind = KernelKind::Root {
                                node,
                                write_root: true,
                            };
                        }
                        groups[k].outputs.clear();
                        groups.insert(k + 1, epilogue);
                    }
                }
                continue;
            }
        }
        let kernel = KernelPlan {
            group: groups[k].clone(),
            reads: union(prologue, epilogue),
            aliases: Vec::new(),
        };
        for w in kernel.group.writes() {
            writer[w] = Some(k);
        }
        kernels.push(kernel);
        k += 1;
    }
    let mut plan = Plan { kernels, writer };
    plan_donations(key, &mut plan);
    plan
}

/// How a kernel over the binding limit is divided.
enum Split {
    /// Its outputs' second half goes to a kernel right after it (the
    /// group keeps the first half).
    Halves(KernelGroup),
    /// A value it inlines, written first by a kernel of its own.
    WriteFirst(KernelGroup),
    /// A root's epilogue, given a kernel of its own right after the
    /// root's (which then writes the root, for the epilogue to read).
    Epilogue(KernelGroup),
}

/// How to divide `group`, over the binding limit: an elementwise kernel
/// of several outputs into two halves (each may still be divided when
/// planned in turn); a root whose prologue fits but not with its
/// epilogue, into the root and an elementwise kernel of its epilogue
/// (planned in turn); else the value inlined into its output (or a
/// root's prologue, its operand itself included) that reads about half
/// of its stored values, written first. `None` where none applies: one
/// node reading past the limit directly (the kernel stays over it, and
/// compiling it is an error naming it).
fn within_bindings(
    key: &GraphKey,
    group: &KernelGroup,
    (prologue, epilogue): (&[usize], &[usize]),
    stored: &dyn Fn(usize) -> bool,
    target: &Target,
) -> Option<Split> {
    if group.kind == KernelKind::Elementwise && group.outputs.len() > 1 {
        let half = group.outputs.len() / 2;
        return Some(Split::Halves(KernelGroup {
            kind: KernelKind::Elementwise,
            numel: group.numel,
            outputs: group.outputs[half..].to_vec(),
        }));
    }
    let (output, root) = match group.kind {
        KernelKind::Elementwise => (group.outputs[0], false),
        KernelKind::Root { node, .. } => (node, true),
    };
    if root && !group.outputs.is_empty() {
        let alone = KernelGroup {
            kind: KernelKind::Root {
                node: output,
                write_root: true,
            },
            numel: group.numel,
            outputs: Vec::new(),
        };
        if storage_bindings(key, &alone, (prologue, &[]), target) <= target.max_storage_buffers
            || epilogue.len() > prologue.len()
        {
            return Some(Split::Epilogue(KernelGroup {
                kind: KernelKind::Elementwise,
                numel: group.numel,
                outputs: group.outputs.clone(),
            }));
        }
    }
    let m = half_of_the_reads(key, output, root, stored)?;
    Some(Split::WriteFirst(KernelGroup {
        kind: KernelKind::Elementwise,
        numel: numel(&key.nodes[m].shape),
        outputs: vec![m],
    }))
}

/// The values read by either part of a kernel, ascending.
fn union(mut prologue: Vec<usize>, epilogue: Vec<usize>) -> Vec<usize> {
    prologue.extend(epilogue);
    prologue.sort_unstable();
    prologue.dedup();
    prologue
}

/// The stored values a kernel's root reads (its prologue: none for an
/// elementwise kernel) and those its outputs read, each a walk from what
/// it computes down through the values it inlines, stopping at stored
/// ones (a graph input among its outputs, a view made contiguous, is
/// read). Apart because a root may read its prologue as `vec4`s and its
/// epilogue by elements, binding a value read by both twice.
fn reads_by_part(
    key: &GraphKey,
    group: &KernelGroup,
    stored: &dyn Fn(usize) -> bool,
) -> (Vec<usize>, Vec<usize>) {
    match group.kind {
        KernelKind::Root { node, .. } => (
            walk_reads(key, &[node], None, stored),
            walk_reads(key, &group.outputs, Some(node), stored),
        ),
        KernelKind::Elementwise => (Vec::new(), walk_reads(key, &group.outputs, None, stored)),
    }
}

/// The stored values reached from `starts` through values not stored,
/// not passing `computed` (a root its epilogue reads from a register).
/// Each node is visited once.
fn walk_reads(
    key: &GraphKey,
    starts: &[usize],
    computed: Option<usize>,
    stored: &dyn Fn(usize) -> bool,
) -> Vec<usize> {
    let nodes = &key.nodes;
    let mut stack: Vec<usize> = starts.to_vec();
    let mut seen = std::collections::HashSet::new();
    let mut reads = Vec::new();
    while let Some(n) = stack.pop() {
        if Some(n) == computed || !seen.insert(n) {
            continue;
        }
        if stored(n) {
            reads.push(n);
        } else if !matches!(nodes[n].kind, GKind::Op { op: Op::Scalar, .. }) {
            stack.extend_from_slice(&nodes[n].inputs);
        }
    }
    reads
}

/// The storage bindings kernel `group` takes at most: each value its
/// root and its outputs read (a value both read counted twice) and each
/// it writes, in their parts (counted as `vec4`s, the larger), the
/// parameters, the dynamic sizes (both uniform, but the runtime counts
/// them) and the anomaly flags. Packing kernels read part of the same
/// values, so the kernel's own count bounds theirs.
fn storage_bindings(
    key: &GraphKey,
    group: &KernelGroup,
    (prologue, epilogue): (&[usize], &[usize]),
    target: &Target,
) -> usize {
    let nodes = &key.nodes;
    let parts = |n: usize, elements: usize| {
        let size = nodes[n].dtype.size_in_bytes();
        binding_parts(elements, size, true, target.binding_part_bytes)
    };
    let read_parts: usize = (prologue.iter().chain(epilogue))
        .map(|&n| parts(n, nodes[n].extent()))
        .sum();
    let write_parts: usize = group
        .writes()
        .map(|n| parts(n, numel(&nodes[n].shape)))
        .sum();
    read_parts + write_parts + 2 + usize::from(key.checked)
}

/// The value inlined into `output`'s kernel (computed, not stored, not
/// a scalar) whose stored reads are nearest half of the kernel's, if one
/// reads at least two and fewer than all (or all, where `output` is a
/// root: its operand written first leaves the root one read): writing it
/// first divides the kernel's bindings.
/// Each node's reads are counted once, as a set capped at `CAP` (enough
/// to compare against any binding limit), so this is linear in the
/// kernel's nodes.
fn half_of_the_reads(
    key: &GraphKey,
    output: usize,
    root: bool,
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
        .filter(|&(&n, r)| n != output && r.len() >= 2 && (r.len() < total || root))
        .min_by_key(|&(&n, r)| (r.len().abs_diff(total / 2), n))
        .map(|(&n, _)| n)
}
