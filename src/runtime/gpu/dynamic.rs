//! Dynamic sizes, per compile: each kernel of a site compiled again with
//! other sizes is made generic over the literals in which its IR differs
//! from the site's last one (`kernel::generic`), and over those in which
//! it differs from the same kernel at a third size, the probe
//! (`graph::probe`), where the two sizes alone leave one generic kernel
//! still to compile. At the first compile of a structure with sizes the
//! user marked dynamic, each kernel is made generic against the probes
//! of the marked sizes instead (`marked_texts`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::compile::generate;
use super::donate::plan_donations;
use crate::codegen::{CodegenContext, KernelSource, kernel_wgsl, validate_wgsl};
use crate::graph::{Graph, GraphKey, MarkedProbe, marked_probe_key, probe_key};
use crate::kernel::Kernel;
use crate::kernel::generic::{Generic, differing_literals, generalize};
use crate::schedule::{Lowered, lower_for_gpu};

/// One dispatch's kernel lowered for a graph's own sizes, and which of
/// its literals are dynamic (none: it stayed concrete).
pub(crate) type DispatchText = (Arc<Kernel>, Vec<usize>);

/// Per kernel, per dispatch (its packing kernels, then itself): the
/// kernels a new size is compared with, the last first. A generic kernel
/// stays behind a concrete one that replaced it (a batch of one, whose
/// size-one dims are laid out otherwise): the next size may be generic
/// again.
pub(crate) type KernelTexts = Vec<Vec<Vec<DispatchText>>>;

/// How a generic kernel's WGSL is printed (with `origins`, as the
/// concrete kernel's was) and looked up (`compiled`: whether a pipeline
/// already has that text).
#[derive(Clone, Copy)]
pub(super) struct Printing<'a> {
    pub compiled: &'a dyn Fn(&str) -> bool,
    pub origins: Option<&'a [String]>,
}

/// Makes each kernel of a recompiled site generic over the literals in
/// which it differs from the site's last graph (`before`: its kernels),
/// where the two differ in nothing else. A generic kernel whose WGSL
/// (printed with `origins`, as the concrete one was) is not yet
/// `compiled` is made generic over what differs from the probe's kernel
/// as well (`probe(kernel, dispatch)`). Returns the kernels to record for
/// the site.
pub(super) fn generalize_kernels(
    before: Option<&KernelTexts>,
    sources: &mut [KernelSource],
    printing: Printing<'_>,
    probe: &mut dyn FnMut(usize, usize) -> Option<Arc<Kernel>>,
) -> KernelTexts {
    let mut record = Vec::with_capacity(sources.len());
    for (k, source) in sources.iter_mut().enumerate() {
        // The site's last texts of this kernel's dispatches, if it had as
        // many.
        let previous = before
            .and_then(|texts| texts.get(k))
            .filter(|p| p.len() == source.packs.len() + 1);
        let mut texts = Vec::with_capacity(source.packs.len() + 1);
        for (d, pack) in source.packs.iter_mut().enumerate() {
            let last = previous.map_or(&[][..], |p| &p[d]);
            texts.push(generalize_dispatch(pack, last, printing, &mut || {
                probe(k, d)
            }));
        }
        let d = texts.len();
        let last = previous.map_or(&[][..], |p| &p[d]);
        texts.push(generalize_dispatch(source, last, printing, &mut || {
            probe(k, d)
        }));
        record.push(texts);
    }
    record
}

/// Makes one dispatch generic against its kernels for earlier sizes
/// (`before`, the last first: a kernel and its dynamic literals), and
/// against the probe's where that generic kernel is not `compiled` yet.
/// Returns the kernels to record: its concrete kernel and dynamic
/// literals (none when it stays concrete), then a generic one it could
/// not match.
fn generalize_dispatch(
    s: &mut KernelSource,
    before: &[DispatchText],
    Printing { compiled, origins }: Printing<'_>,
    probe: &mut dyn FnMut() -> Option<Arc<Kernel>>,
) -> Vec<DispatchText> {
    let concrete = s.kernel.clone();
    // A literal that WGSL needs constant (a subgroup broadcast's lane)
    // makes the generic kernel invalid: keep the concrete one. A kernel
    // compiled before was valid then.
    let printed = |g: &Generic| kernel_wgsl(&g.kernel, origins);
    let valid = |g: &Generic| {
        let text = printed(g);
        compiled(&text) || validate_wgsl(&text).is_ok()
    };
    let two_sizes = before
        .iter()
        .find_map(|(kernel, known)| generalize(kernel, &concrete, known).filter(valid));
    let generic = match two_sizes {
        Some(g) if !compiled(&printed(&g)) => {
            let three_sizes = probe()
                .and_then(|p| generalize(&p, &concrete, &g.dynamic))
                .filter(valid);
            Some(three_sizes.unwrap_or(g))
        }
        other => other,
    };
    match generic {
        Some(g) => {
            s.wgsl = printed(&g);
            if !s.ir.is_empty() {
                s.ir = g.kernel.to_string();
            }
            s.kernel = Arc::new(g.kernel);
            s.dyn_sizes = Some(g.values);
            vec![(concrete, g.dynamic)]
        }
        None => {
            let mut texts = vec![(concrete, Vec::new())];
            if !before.is_empty() {
                log::debug!("a dispatch is not generic over the new sizes");
            }
            texts.extend(before.iter().find(|(_, d)| !d.is_empty()).cloned());
            texts
        }
    }
}

/// The kernels of the probe `key` of `traced` (see `graph::probe`), per
/// kernel, per dispatch; `None` when its code generation fails (sizes a
/// user's graph relates otherwise than affinely: a probe is a guess, and
/// a failed guess only leaves kernels concrete, or generic over fewer
/// literals).
fn probe_kernels(
    traced: &Graph,
    key: GraphKey,
    cx: &CodegenContext,
) -> Option<Vec<Vec<Arc<Kernel>>>> {
    let identity: Vec<usize> = (0..key.nodes.len()).collect();
    let probe = traced.lowered(key, &identity);
    let generated = catch_unwind(AssertUnwindSafe(|| {
        let Lowered { key, origin } = lower_for_gpu(&probe.key, cx.target);
        let graph = probe.lowered(key, &origin);
        let (groups, available, mut sources) = generate(&graph, cx);
        plan_donations(&graph, cx, &groups, &available, &mut sources);
        sources
            .iter()
            .map(|s| s.dispatches().map(|d| d.kernel.clone()).collect())
            .collect()
    }));
    if generated.is_err() {
        log::debug!("graph {:016x}: no probe of its sizes", traced.hash);
    }
    generated.ok()
}

/// The kernels of a probe of `traced` one size after `before`, its sizes
/// moved on along the line of their change (`graph::probe_key`).
pub(super) fn probe_texts(
    traced: &Graph,
    before: &GraphKey,
    cx: &CodegenContext,
) -> Option<Vec<Vec<Arc<Kernel>>>> {
    probe_kernels(traced, probe_key(before, &traced.key)?, cx)
}

/// For the first compile of a graph with sizes the user marked dynamic:
/// the kernels of its probes (`MarkedProbe::ALL`) as a site's earlier
/// kernels, each dispatch's probe kernels with the literals known dynamic
/// where probes of one structure differ, so the graph's own kernels are
/// made generic against them. `None` without marks or probes.
pub(super) fn marked_texts(traced: &Graph, cx: &CodegenContext) -> Option<KernelTexts> {
    if traced.dynamic_sizes.is_empty() {
        return None;
    }
    // Small sizes move alike in several probes (16 is both eight more
    // and half as much again): each distinct probe is lowered once.
    let mut keys: Vec<GraphKey> = Vec::with_capacity(MarkedProbe::ALL.len());
    for p in MarkedProbe::ALL {
        if let Some(key) = marked_probe_key(&traced.key, &traced.dynamic_sizes, p)
            && !keys.contains(&key)
        {
            keys.push(key);
        }
    }
    let probes: Vec<Vec<Vec<Arc<Kernel>>>> = keys
        .into_iter()
        .filter_map(|key| probe_kernels(traced, key, cx))
        .collect();
    let first = probes.first()?;
    let texts = (0..first.len())
        .map(|k| {
            (0..first[k].len())
                .map(|d| {
                    let of_dispatch: Vec<&Arc<Kernel>> =
                        probes.iter().filter_map(|p| p.get(k)?.get(d)).collect();
                    known_across(&of_dispatch)
                })
                .collect()
        })
        .collect();
    Some(texts)
}

/// Each kernel with the literals in which it differs from the others of
/// its structure.
fn known_across(kernels: &[&Arc<Kernel>]) -> Vec<DispatchText> {
    kernels
        .iter()
        .map(|&a| {
            let mut known: Vec<usize> = kernels
                .iter()
                .filter_map(|b| differing_literals(a, b))
                .flatten()
                .collect();
            known.sort_unstable();
            known.dedup();
            (a.clone(), known)
        })
        .collect()
}
