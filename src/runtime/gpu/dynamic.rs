//! Dynamic sizes, per compile: a site's kernels come out of lowering
//! generic over the numbers that change at the site (`kernel::changing`,
//! `kernel::generic`), so a new size whose kernels are the ones the site
//! bound before binds their pipelines with its own values and compiles
//! nothing. This module binds each dispatch to the site's kernel it
//! equals (taking its printed WGSL instead of printing), records what
//! the site keeps for its next sizes, and says why a dispatch that needs
//! a pipeline is not one the site had: the guard its sizes crossed.

use std::sync::Arc;

use crate::codegen::{KernelSource, kernel_wgsl};
use crate::kernel::generic::{first_difference, structural_difference};
use crate::kernel::sizes::first_crossed;
use crate::kernel::{GuardList, Kernel};

/// One dispatch as a site recorded it: the kernel bound for it (generic
/// over the site's changing sizes where it reads any), its WGSL, and the
/// guards its lowering recorded.
#[derive(Clone)]
pub(crate) struct DispatchText {
    /// The kernel bound.
    pub kernel: Arc<Kernel>,
    /// Its WGSL, printed without origins; `None` in a dump, whose text
    /// names the graph's nodes (a later size prints its own).
    pub wgsl: Option<Arc<str>>,
    /// Why it is not the site's last kernel of this dispatch (the guard
    /// the sizes crossed: `kernel::sizes::first_crossed`, else
    /// `generic::structural_difference`, else the literal that differs),
    /// for the recompile warning.
    pub not_generic: Option<String>,
    /// The tests of sizes its lowering's choices made: a later size
    /// whose kernel differs names the first that came out otherwise.
    pub guards: GuardList,
}

/// Per kernel, per dispatch (its packing kernels, then itself): the
/// kernels a new size is compared with, the last first. An earlier kernel
/// stays behind the one that replaced it (a batch of one, whose size-one
/// dims are laid out otherwise): the next size may lower to it again.
pub(crate) type KernelTexts = Vec<Vec<Vec<DispatchText>>>;

/// How dispatches are printed and named.
#[derive(Clone, Copy)]
pub(super) struct Printing<'a> {
    /// Per graph node, its label in a dump (`None`: no dump).
    pub origins: Option<&'a [String]>,
    /// Counts the dispatches bound to a kernel the site bound before,
    /// nothing printed.
    pub bound: &'a std::cell::Cell<u64>,
    /// Counts those of them bound to the kernel of the site's last graph
    /// of the structure (the first it keeps for the dispatch).
    pub bound_to_last: &'a std::cell::Cell<u64>,
    /// Whether the compile warns (`SiteNote::warns`): only then is a
    /// dispatch that is not the site's last explained, which renders
    /// both kernels' IR.
    pub explain: bool,
    /// Names graph node `n` of the lowered graph for people (`sum
    /// recorded at src/main.rs:12`), in the guards a warning names.
    pub names: &'a dyn Fn(usize) -> Option<String>,
}

/// Binds each dispatch of `sources` to the kernel the site bound before
/// for it (`before`: the site's last graph's kernels), where it lowered
/// to that kernel, and prints the others. Returns the kernels to record
/// for the site.
pub(super) fn bind_kernels(
    before: Option<&KernelTexts>,
    sources: &mut [KernelSource],
    printing: Printing<'_>,
) -> KernelTexts {
    // Where the schedule changed, kernels are still paired by position
    // (a kernel binds only what it equals), but a kernel that differs is
    // explained by the schedule, not by its pair.
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
            texts.push(bind_dispatch(pack, last, printing));
        }
        // The kernel itself pairs with the site's last kernel even where
        // their packing kernels were not as many: an operand packed by a
        // copy at one size and by a kernel at another (its rows a
        // multiple of four at one length only) is read from the same
        // texture.
        let d = texts.len();
        let last = of_kernel.and_then(|p| p.last()).map_or(&[][..], |p| &p[..]);
        texts.push(bind_dispatch(source, last, printing));
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
        // A dispatch bound to a kernel the site had compiles nothing, so
        // the warning, which names only dispatches that compile, skips it.
        if let Some((why, upto)) = explained {
            for t in texts[..upto].iter_mut().filter_map(|t| t.first_mut()) {
                t.not_generic = Some(why.clone());
            }
        }
        record.push(texts);
    }
    record
}

/// Binds one dispatch to the kernel of the site's earlier ones
/// (`before`, the last first) that it equals, taking its WGSL; else
/// prints it (outside a dump) and says why it is not the site's last.
/// Returns the kernels to record for the dispatch.
fn bind_dispatch(
    s: &mut KernelSource,
    before: &[DispatchText],
    Printing {
        origins,
        bound,
        bound_to_last,
        explain,
        names,
    }: Printing<'_>,
) -> Vec<DispatchText> {
    let known = origins.is_none().then(|| {
        (before.iter().enumerate())
            .find_map(|(i, t)| Some((i, t, t.wgsl.as_ref()?)).filter(|_| *t.kernel == *s.kernel))
    });
    if let Some(Some((position, found, wgsl))) = known {
        bound.set(bound.get() + 1);
        if position == 0 {
            bound_to_last.set(bound_to_last.get() + 1);
        }
        s.wgsl = wgsl.clone();
        s.kernel = found.kernel.clone();
        let record = DispatchText {
            not_generic: None,
            guards: s.guards.clone(),
            ..found.clone()
        };
        return keep_earlier_texts(record, before);
    }
    let wgsl = origins.is_none().then(|| {
        let text: Arc<str> = kernel_wgsl(&s.kernel.simplified(), None).into();
        s.wgsl = text.clone();
        text
    });
    let why = explain.then(|| why_not_the_last((&s.kernel, &s.guards), before, names));
    let record = DispatchText {
        not_generic: why.flatten(),
        kernel: s.kernel.clone(),
        wgsl,
        guards: s.guards.clone(),
    };
    keep_earlier_texts(record, before)
}

/// Why `kernel` (lowered with `guards`) is not the site's last kernel of
/// its dispatch (`before`'s first): the first guard of that kernel whose
/// test came out otherwise at the new sizes
/// (`kernel::sizes::first_crossed`, its nodes named by `names`), else the
/// first line of IR that differs in structure
/// (`generic::structural_difference`), else the first that differs in a
/// literal (a size that changed for the first time, or one whose
/// provenance lowering does not record); `None` where it is that kernel
/// or the site has none.
fn why_not_the_last(
    (kernel, guards): (&Kernel, &GuardList),
    before: &[DispatchText],
    names: &dyn Fn(usize) -> Option<String>,
) -> Option<String> {
    let last = before.first().filter(|l| *l.kernel != *kernel)?;
    let crossed = first_crossed(&last.guards, guards);
    let why = crossed
        .map(|c| c.describe(names))
        .or_else(|| structural_difference(&last.kernel, kernel))
        .or_else(|| {
            first_difference(&last.kernel, kernel).map(|d| format!("sizes read otherwise: {d}"))
        })?;
    log::debug!("a dispatch is not the site's last kernel: {why}");
    Some(why)
}

/// How many kernels of a dispatch a site keeps to compare later sizes
/// with.
const REMEMBERED: usize = 4;

/// The kernels of a dispatch a site keeps: the one bound now (`first`),
/// then earlier ones (`before`) that differ from them, up to
/// `REMEMBERED`. A size that lowers as an earlier one did binds that
/// one's kernel again, whatever sizes came between: a packing kernel
/// whose operand is copied at some lengths (rows of a multiple of 64)
/// and packed by the kernel at others, a batch of one between larger
/// ones.
fn keep_earlier_texts(first: DispatchText, before: &[DispatchText]) -> Vec<DispatchText> {
    let mut record = vec![first];
    for t in before {
        if record.len() >= REMEMBERED {
            break;
        }
        let same = |r: &DispatchText| match (&r.wgsl, &t.wgsl) {
            (Some(a), Some(b)) => a == b,
            _ => Arc::ptr_eq(&r.kernel, &t.kernel) || *r.kernel == *t.kernel,
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
