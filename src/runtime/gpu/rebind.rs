//! A new size of a trace site bound to the site's kernels without
//! lowering them: the key lookup that a size whose guards hold should be.
//!
//! Once a site's graph was lowered at a new size and every kernel came
//! out as the kernel of the site's last graph (generic over the numbers
//! that change there, `kernel::generic`), its record keeps a
//! `BindTemplate`: the kernels, their pipelines, every guard their
//! lowering recorded, and the numbers that did not differ between the
//! two graphs. A later graph of the site binds the template where
//! - it is the template's lowered graph but for its numbers
//!   (`GraphKey::same_but_numbers`), and each number that did not differ
//!   between the two graphs that made the template is the same again:
//!   a number the kernels read without an expression (a literal whose
//!   provenance lowering does not record) is then shown to stay as it
//!   was, and only numbers the two graphs varied change;
//! - every guard holds at its numbers (lowering would choose as it did);
//! - the scheduler plans the same kernels (`Plan::same_kernels`) and the
//!   target is the one they were lowered for (a tuned matmul class);
//!
//! and each kernel's grid, sizes, scratch textures and copies are then
//! evaluated from their expressions (`codegen::source_at`). Anything else
//! lowers as before. A record keeps up to four templates made under the
//! same changing numbers and strategies (a batch a multiple of four, then
//! not), so a graph bound unlowered gets the kernels lowering would give
//! it. `DeviceConfig::check_binds` lowers the bound graphs too and panics
//! where the two differ, leaving the site's record as binding does.

use std::sync::Arc;

use crate::codegen::{KernelSource, launch_difference, source_at};
use crate::graph::{Graph, GraphKey};
use crate::kernel::changing::{ChangingSizes, leaves_of, number_of};
use crate::kernel::sizes::{Guard, GuardList, Guards, Leaf};
use crate::kernel::{Precedents, Target};
use crate::metrics::Metrics;
use crate::schedule::{Plan, plan};

use super::compile::{
    CompiledKernel, Executable, GpuCaches, assemble, compiled_kernel, place_sizes,
};
use super::context::GpuContext;
use super::pipelines::Pipeline;

/// What a site's record keeps to bind a later size without lowering.
pub(crate) struct BindTemplate {
    /// The target the kernels were lowered for (with the matmul kernel
    /// of each tuned class).
    target: Target,
    /// The graph's plan as the scheduler made it, before code generation
    /// dropped the aliases a kernel's code did not keep.
    planned: Plan,
    /// Per kernel, the aliases its code kept.
    aliases: Vec<Vec<(usize, usize)>>,
    /// Per kernel: its source, its pipeline and its packing kernels'.
    kernels: Vec<TemplateKernel>,
    /// Every guard of every dispatch, each test once.
    guards: GuardList,
    /// The lowered graph it was made at.
    lowered: GraphKey,
    /// The numbers of the lowered graph that did not differ from the
    /// site's graph before it, with their values: a later graph binds
    /// only where they are the same again. The two graphs lowered to one
    /// kernel, so each number the kernels read without its expression
    /// (a literal whose provenance lowering does not record) is shown
    /// not to change with the numbers that differed, and these hold it.
    fixed: Vec<(Leaf, usize)>,
    /// The strategies the site kept when it was made: a record keeps an
    /// earlier graph's template only while they are the same.
    pub precedents: Precedents,
    /// The numbers that changed at the site when it was made: a record
    /// keeps an earlier graph's template only while they are the same,
    /// so that a size bound unlowered gets exactly the kernels lowering
    /// would give it (which depend on what changed before: a row whose
    /// length changed is no longer read four values a load).
    pub changing: ChangingSizes,
}

/// One kernel of a template.
pub(crate) struct TemplateKernel {
    source: KernelSource,
    pipeline: Arc<Pipeline>,
    packs: Vec<Arc<Pipeline>>,
}

/// What a compile hands over to make its template of.
pub(super) struct Compiled<'a> {
    /// The lowered graph.
    pub key: &'a GraphKey,
    /// Where each of its dispatches lowered to the kernel of the site's
    /// last graph of its structure (its kernels are shown generic over
    /// the numbers that differ between the two; not in a dump, whose
    /// graphs are each lowered to list their IR): the numbers that did
    /// not differ (`unchanged_numbers`).
    pub unchanged: Option<Vec<(Leaf, usize)>>,
    pub target: &'a Target,
    /// The plan before code generation, and after.
    pub planned: Plan,
    pub plan: &'a Plan,
    /// The numbers that change at the site.
    pub changing: &'a ChangingSizes,
    /// The strategies the site keeps.
    pub precedents: &'a Precedents,
}

impl BindTemplate {
    /// The template of a compiled graph, or `None` where a later size may
    /// not bind it unlowered: a dispatch lowered to another kernel than
    /// the site's last graph's (`Compiled::unchanged` is `None`), a
    /// literal that reads a changing number stayed inline, or a kernel's
    /// launch is not an expression of the numbers (it is evaluated at
    /// this graph's own numbers and compared with lowering's).
    pub(super) fn of(c: Compiled<'_>, compiled: &[CompiledKernel]) -> Option<BindTemplate> {
        let fixed = c.unchanged?;
        let kernels: Vec<TemplateKernel> = (compiled.iter())
            .map(|k| TemplateKernel {
                source: k.source.clone(),
                pipeline: k.pipeline.clone(),
                packs: k.packs.iter().map(|(p, _)| p.clone()).collect(),
            })
            .collect();
        let numbers = |leaf| number_of(c.key, leaf);
        for (k, kernel) in kernels.iter().enumerate() {
            let stored = |n| c.plan.stored_before(c.key, k, n);
            let again = source_at(&kernel.source, c.key, &stored, &numbers);
            let why = match &again {
                None => Some("a launch size without an expression".to_string()),
                Some(again) => launch_difference(again, &kernel.source),
            };
            if let Some(why) = why {
                log::debug!("kernel {k} binds no other size unlowered: {why}");
                return None;
            }
        }
        // Every dispatch's guards, each test once.
        let mut all = Guards::default();
        let dispatches = kernels.iter().flat_map(|k| k.source.dispatches());
        for g in dispatches.flat_map(|s| s.guards.iter()) {
            all.push(g.clone());
        }
        Some(BindTemplate {
            target: c.target.clone(),
            aliases: c.plan.kernels.iter().map(|k| k.aliases.clone()).collect(),
            planned: c.planned,
            kernels,
            guards: all.recorded(),
            lowered: c.key.clone(),
            fixed,
            changing: c.changing.clone(),
            precedents: c.precedents.clone(),
        })
    }

    /// Whether the lowered graph `key` may bind the template: it is the
    /// template's graph but for its numbers, the numbers the template
    /// holds fixed are the same, and every guard holds (the scheduler's
    /// plan, dearer, is compared by `bind`).
    fn allows(&self, key: &GraphKey) -> bool {
        if !self.lowered.same_but_numbers(key) {
            return false;
        }
        let numbers = |leaf| number_of(key, leaf);
        if !(self.fixed.iter()).all(|&(leaf, value)| numbers(leaf) == value) {
            return false;
        }
        let crossed = |g: &&Guard| !g.holds_at(g.size.eval(&numbers));
        if let Some(g) = self.guards.iter().find(crossed) {
            log::debug!("a new size lowers again: guard {g} crossed");
            return false;
        }
        true
    }

    /// The template's kernels at the lowered graph `key`, and the plan
    /// they run under (`plan`, the scheduler's for `key`, given the
    /// aliases the kernels kept); `None` where the plan is another, or a
    /// launch size does not fit. The caller has checked the target and
    /// that the template `allows` `key`.
    pub(super) fn bind(&self, key: &GraphKey, mut plan: Plan) -> Option<(Vec<KernelSource>, Plan)> {
        let numbers = |leaf| number_of(key, leaf);
        if !plan.same_kernels(&self.planned) {
            return None;
        }
        for (kernel, aliases) in plan.kernels.iter_mut().zip(&self.aliases) {
            kernel.aliases.clone_from(aliases);
        }
        let mut sources = Vec::with_capacity(self.kernels.len());
        for (k, kernel) in self.kernels.iter().enumerate() {
            let stored = |n| plan.stored_before(key, k, n);
            sources.push(source_at(&kernel.source, key, &stored, &numbers)?);
        }
        Some((sources, plan))
    }
}

/// The numbers of the lowered graph `key` that are the same in
/// `previous` (the site's last lowered graph of its structure), with
/// their values; `None` where `previous` is not `key` but for its
/// numbers.
pub(super) fn unchanged_numbers(previous: &GraphKey, key: &GraphKey) -> Option<Vec<(Leaf, usize)>> {
    if !previous.same_but_numbers(key) {
        return None;
    }
    let numbers = (0..key.nodes.len()).flat_map(|n| leaves_of(key, n));
    let with_values = numbers.map(|leaf| (leaf, number_of(key, leaf)));
    Some(
        with_values
            .filter(|&(leaf, value)| number_of(previous, leaf) == value)
            .collect(),
    )
}

/// `graph` (lowered, its nodes from the traced graph's through `origin`)
/// bound to its site's kernels without lowering, where the site's record
/// of its structure (`site`, `structure`) has a template that its
/// numbers allow (see the module's documentation), counted in the
/// metrics (`graphs_specialized` and `graphs_bound`, `kernels_bound`);
/// `None` otherwise.
pub(super) fn bind_unlowered(
    (ctx, target): (&GpuContext, &Target),
    caches: &mut GpuCaches,
    metrics: &Metrics,
    (graph, origin): (&Graph, &[usize]),
    (site, structure): (&[String], u64),
) -> Option<Executable> {
    // `get`: a site whose sizes keep binding stays in the cache.
    let record =
        (caches.by_site.get(site)?.before(structure)).filter(|r| r.has_structure(structure))?;
    if record.templates.is_empty() {
        return None;
    }
    // The target lowering would use: pinned, or with its classes' kernels
    // (a class not met before is timed by lowering, whose tuning is not
    // compile time).
    let tuned;
    let target = match (&caches.pinned, caches.matmul_classes.as_mut()) {
        (Some((_, pinned)), _) => pinned,
        (None, Some(tuner)) if !tuner.knows_classes_of(&graph.key, Some(&record.precedents)) => {
            return None;
        }
        (None, Some(tuner)) => {
            tuned = tuner.target_for(target, &graph.key, Some(&record.precedents));
            &tuned
        }
        (None, None) => target,
    };
    let template =
        (record.templates.iter()).find(|t| t.target == *target && t.allows(&graph.key))?;
    let (sources, plan) = template.bind(&graph.key, plan(&graph.key, target))?;
    let mut kernels: Vec<CompiledKernel> = (sources.into_iter().zip(&template.kernels))
        .map(|(source, t)| compiled_kernel(ctx, source, t.pipeline.clone(), &t.packs))
        .collect();
    place_sizes(ctx, &mut kernels);
    let dispatches = kernels
        .iter()
        .map(|k| k.source.dispatches().count() as u64)
        .sum();
    // A graph that compiled nothing, as one lowered to compiled kernels.
    metrics.add("graphs_specialized", 1);
    metrics.add("graphs_bound", 1);
    metrics.add("kernels_bound", dispatches);
    Some(assemble(ctx, graph, origin.to_vec(), kernels, plan))
}

/// `check_binds`: panics where a graph bound unlowered (`bound`) launches
/// otherwise than lowering made it (`lowered`): its kernels (text, grid,
/// sizes, textures, copies, what each reads and writes and takes over),
/// its donations and releases.
pub(super) fn check_bound(bound: &Executable, lowered: &Executable) {
    let (b, l) = (&bound.kernels, &lowered.kernels);
    assert_eq!(
        b.len(),
        l.len(),
        "a graph bound unlowered has {} kernels, lowered {}",
        b.len(),
        l.len()
    );
    for (k, (b, l)) in b.iter().zip(l).enumerate() {
        let moves = |c: &CompiledKernel| {
            (
                c.source.reads.clone(),
                c.source.writes.clone(),
                c.takes_over.clone(),
            )
        };
        let (bs, ls) = (&b.source, &l.source);
        let why = launch_difference(bs, ls).or_else(|| {
            (moves(b) != moves(l)).then(|| {
                format!(
                    "reads, writes and takeovers {:?} against {:?}",
                    moves(b),
                    moves(l)
                )
            })
        });
        if let Some(why) = why {
            panic!(
                "kernel {k} bound unlowered differs from its lowering in {why}\nbound:\n{}\nlowered:\n{}",
                bs.kernel, ls.kernel
            );
        }
    }
    assert_eq!(
        bound.donations, lowered.donations,
        "a graph bound unlowered donates otherwise"
    );
    assert_eq!(
        bound.releases, lowered.releases,
        "a graph bound unlowered releases otherwise"
    );
}
