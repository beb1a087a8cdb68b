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

use crate::codegen::generate;
use crate::codegen::{CodegenContext, KernelSource, kernel_wgsl, validate_wgsl};
use crate::graph::{Graph, GraphKey, MarkedProbe, marked_probe_key, probe_key};
use crate::kernel::generic::{
    Generic, differing_literals, generalize, structural_difference, values_for,
};
use crate::kernel::sizes::{Guard, first_crossed};
use crate::kernel::{GuardList, Kernel};
use crate::schedule::{Lowered, lower_for_gpu, plan};

/// One dispatch as a site recorded it: its kernel lowered at one of the
/// site's sizes, which of its literals are dynamic (none: it stayed
/// concrete), and the kernel bound for it.
#[derive(Clone)]
pub(crate) struct DispatchText {
    /// The kernel lowered for the sizes of the graph that recorded it
    /// (an earlier size's, where a later one bound its generic kernel).
    pub concrete: Arc<Kernel>,
    /// Which of its literals are dynamic, by their order in the kernel.
    pub dynamic: Vec<usize>,
    /// The kernel the site bound for it and its WGSL (printed without
    /// origins): the generic kernel made from it, or itself where it
    /// stayed concrete. A later size that lowers to that kernel but for
    /// the dynamic literals binds it after two walks and one comparison
    /// (`values_for`), with no kernel copied and nothing printed.
    pub generic: Option<(Arc<Kernel>, Arc<str>)>,
    /// Why it stayed concrete against the site's last kernel of this
    /// dispatch (the guard the sizes crossed: `kernel::sizes::first_crossed`,
    /// else `generic::structural_difference`'s first line that differs),
    /// for the recompile warning.
    pub not_generic: Option<String>,
    /// The tests of sizes its latest lowering's choices made: a later
    /// size whose kernel differs names the first that came out otherwise.
    pub guards: GuardList,
}

impl DispatchText {
    /// A kernel that stayed concrete, or that a probe lowered.
    fn concrete(kernel: Arc<Kernel>, dynamic: Vec<usize>, guards: GuardList) -> DispatchText {
        DispatchText {
            concrete: kernel,
            dynamic,
            generic: None,
            not_generic: None,
            guards,
        }
    }
}

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
    /// Counts the dispatches bound to a kernel the site bound before,
    /// nothing compared but that kernel, nothing printed.
    pub bound: &'a std::cell::Cell<u64>,
    /// Names graph node `n` of the lowered graph for people (`sum
    /// recorded at src/main.rs:12`), in the guards a warning names.
    pub names: &'a dyn Fn(usize) -> Option<String>,
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
    // Where the schedule changed, kernels are still paired by position
    // (a kernel binds only what it equals), but a kernel that stays
    // concrete is explained by the schedule, not by its pair.
    let schedule_changed = before.filter(|b| b.len() != sources.len()).map(|b| {
        format!(
            "the graph lowers to {} kernels, {} at the site's last sizes",
            sources.len(),
            b.len()
        )
    });
    let mut record = Vec::with_capacity(sources.len());
    for (k, source) in sources.iter_mut().enumerate() {
        // The site's last texts of this kernel's dispatches, if it had as
        // many.
        let of_kernel = before.and_then(|texts| texts.get(k));
        let previous = of_kernel.filter(|p| p.len() == source.packs.len() + 1);
        let mut texts = Vec::with_capacity(source.packs.len() + 1);
        for (d, pack) in source.packs.iter_mut().enumerate() {
            let last = previous.map_or(&[][..], |p| &p[d]);
            texts.push(generalize_dispatch(pack, last, printing, &mut || {
                probe(k, d)
            }));
        }
        // The kernel itself pairs with the site's last kernel even where
        // their packing kernels were not as many: an operand packed by a
        // copy at one size and by a kernel at another (its rows a
        // multiple of four at one length only) is read from the same
        // texture.
        let d = texts.len();
        let last = of_kernel.and_then(|p| p.last()).map_or(&[][..], |p| &p[..]);
        texts.push(generalize_dispatch(source, last, printing, &mut || {
            probe(k, d)
        }));
        // Dispatches not compared one by one are explained by what kept
        // them apart: the schedule, else this kernel's packing kernels.
        let unpaired = (of_kernel.filter(|_| previous.is_none())).map(|last| {
            format!(
                "{} dispatches with its packing kernels, {} at the site's last sizes",
                source.packs.len() + 1,
                last.len()
            )
        });
        let explained = match (&schedule_changed, &unpaired) {
            (Some(why), _) => Some((why, texts.len())),
            (None, Some(why)) => Some((why, d)),
            (None, None) => None,
        };
        if let Some((why, upto)) = explained {
            for t in texts[..upto].iter_mut().filter_map(|t| t.first_mut()) {
                if t.dynamic.is_empty() {
                    t.not_generic = Some(why.clone());
                }
            }
        }
        record.push(texts);
    }
    record
}

/// Makes one dispatch generic against its kernels for earlier sizes
/// (`before`, the last first: a kernel and its dynamic literals), and
/// against the probe's where that generic kernel is not `compiled` yet,
/// or where it is generic against none of them. Returns the kernels to record: its concrete kernel and dynamic
/// literals (none when it stays concrete), then a generic one it could
/// not match.
fn generalize_dispatch(
    s: &mut KernelSource,
    before: &[DispatchText],
    Printing {
        compiled,
        origins,
        bound,
        names,
    }: Printing<'_>,
    probe: &mut dyn FnMut() -> Option<Arc<Kernel>>,
) -> Vec<DispatchText> {
    if origins.is_none()
        && let Some(record) = bind_known_generic(s, before)
    {
        bound.set(bound.get() + 1);
        return keep_earlier_texts(record, before);
    }
    let concrete = s.kernel.clone();
    // A literal that WGSL needs constant (a subgroup broadcast's lane)
    // makes the generic kernel invalid: keep the concrete one. A kernel
    // compiled before was valid then. Each generic kernel is printed
    // once, and carries its text.
    let printed = |g: Generic| {
        let text = kernel_wgsl(&g.kernel, origins);
        (g, text)
    };
    let valid = |(_, text): &(Generic, String)| compiled(text) || validate_wgsl(text).is_ok();
    let two_sizes = before.iter().find_map(|t| {
        generalize(&t.concrete, &concrete, &t.dynamic)
            .map(printed)
            .filter(valid)
    });
    let two_sizes_failed = two_sizes.is_none();
    let generic = match two_sizes {
        Some((g, text)) if !compiled(&text) => {
            let three_sizes = probe()
                .and_then(|p| generalize(&p, &concrete, &g.dynamic))
                .map(printed)
                .filter(valid);
            Some(three_sizes.unwrap_or((g, text)))
        }
        // No earlier kernel it differs from in literals only (a guard
        // crossed: its structure changed with the sizes): generic against
        // the probe alone, so that the next size on this side of the
        // guard binds it instead of compiling again; the guard is still
        // named (`not_generic`).
        None => probe()
            .and_then(|p| generalize(&p, &concrete, &[]))
            .map(printed)
            .filter(valid),
        other => other,
    };
    let record = match generic {
        Some((g, text)) => {
            s.wgsl = text.into();
            if !s.ir.is_empty() {
                s.ir = g.kernel.to_string();
            }
            s.kernel = Arc::new(g.kernel);
            s.dyn_sizes = Some(g.values);
            // Printed with origins (a dump), the text is not the one a
            // later size would look up.
            let generic = origins
                .is_none()
                .then(|| (s.kernel.clone(), s.wgsl.clone()));
            let crossed =
                two_sizes_failed.then(|| guard_crossed((&concrete, &s.guards), before, names));
            DispatchText {
                not_generic: crossed.flatten(),
                concrete,
                dynamic: g.dynamic,
                generic,
                guards: s.guards.clone(),
            }
        }
        None => stays_concrete(s, concrete, before, (origins, names)),
    };
    keep_earlier_texts(record, before)
}

/// Why `concrete` (lowered with `guards`) is not generic against the
/// site's last kernel of its dispatch (`before`'s first): the first guard
/// of that kernel whose test came out otherwise at the new sizes
/// (`kernel::sizes::first_crossed`, its nodes named by `names`), else the
/// first line of IR that differs (`generic::structural_difference`);
/// `None` where it is that kernel.
fn guard_crossed(
    (concrete, guards): (&Kernel, &[Guard]),
    before: &[DispatchText],
    names: &dyn Fn(usize) -> Option<String>,
) -> Option<String> {
    let last = before.first().filter(|l| *l.concrete != *concrete)?;
    let crossed = first_crossed(&last.guards, guards);
    let why = crossed.map(|c| c.describe(names)).or_else(|| {
        structural_difference(&last.concrete, concrete)
    }).unwrap_or_else(|| {
        "it differs from the site's last kernel in literals only, which made no valid generic kernel".to_string()
    });
    log::debug!("a dispatch is not generic over the new sizes: {why}");
    Some(why)
}

/// How many kernels of a dispatch a site keeps to compare later sizes
/// with.
const REMEMBERED: usize = 4;

/// The kernels of a dispatch a site keeps: the one bound now (`first`),
/// then earlier ones (`before`) that differ from
/// them, up to `REMEMBERED`. A size that lowers as an earlier one did
/// binds that one's kernel again, whatever sizes came between: a packing
/// kernel whose operand is copied at some lengths (rows of a multiple of
/// 64) and packed by the kernel at others, a product whose outputs were
/// stored four at a time before its rows changed length.
fn keep_earlier_texts(first: DispatchText, before: &[DispatchText]) -> Vec<DispatchText> {
    let mut record = vec![first];
    // Generic kernels first: a generic kernel stays behind a concrete one
    // that replaced it (a batch of one, whose size-one dims are laid out
    // otherwise), as the next size may be generic again.
    let (generic, concrete): (Vec<&DispatchText>, Vec<&DispatchText>) =
        before.iter().partition(|t| !t.dynamic.is_empty());
    for t in generic.into_iter().chain(concrete) {
        if record.len() >= REMEMBERED {
            break;
        }
        let same = |r: &DispatchText| match (&r.generic, &t.generic) {
            (Some((_, a)), Some((_, b))) => a == b,
            _ => *r.concrete == *t.concrete,
        };
        if !record.iter().any(same) {
            record.push(DispatchText {
                not_generic: None,
                ..t.clone()
            });
        }
    }
    record
}

/// The record of a dispatch that stays concrete (`concrete`, `s`'s own
/// kernel): its own bound kernel, so that the next size that lowers to
/// the same value takes its text (printed now, where not in a dump),
/// with why it is not generic against the site's last kernel.
fn stays_concrete(
    s: &mut KernelSource,
    concrete: Arc<Kernel>,
    before: &[DispatchText],
    (origins, names): (Option<&[String]>, &dyn Fn(usize) -> Option<String>),
) -> DispatchText {
    let mut text = DispatchText::concrete(concrete, Vec::new(), s.guards.clone());
    if origins.is_none() {
        s.print_wgsl(None);
        text.generic = Some((s.kernel.clone(), s.wgsl.clone()));
    }
    text.not_generic = guard_crossed((&text.concrete, &s.guards), before, names);
    text
}

/// Binds `s` to the generic kernel of one of the site's earlier
/// dispatches (`before`) where `s` lowered to it but for its dynamic
/// literals: its kernel, WGSL and those literals' values. Returns the
/// entry bound, as the site records it; `None` where none matches.
fn bind_known_generic(s: &mut KernelSource, before: &[DispatchText]) -> Option<DispatchText> {
    let kernel = Arc::make_mut(&mut s.kernel);
    let (found, (generic, wgsl), values) = before.iter().find_map(|t| {
        let bound = t.generic.as_ref()?;
        if t.dynamic.is_empty() {
            // A concrete kernel: the same value, or not at all.
            return (*bound.0 == *kernel).then_some((t, bound, None));
        }
        Some((t, bound, Some(values_for(&bound.0, &t.dynamic, kernel)?)))
    })?;
    s.wgsl = wgsl.clone();
    s.kernel = generic.clone();
    s.dyn_sizes = values;
    Some(DispatchText {
        not_generic: None,
        guards: s.guards.clone(),
        ..found.clone()
    })
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
        let mut plan = plan(&graph.key, cx.target);
        generate(&graph.key, cx, &mut plan)
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
            // A probe's guards are not compared: a warning compares
            // the site's last sizes with the new ones.
            DispatchText::concrete(a.clone(), known, GuardList::from([]))
        })
        .collect()
}
