//! A new size of a trace site bound to the site's kernels without
//! lowering them: the key lookup that a size whose guards hold should be.
//!
//! Once a site's graph was lowered at a second size and every kernel came
//! out as the site's kernel (generic over the numbers that change there,
//! `kernel::generic`), its record keeps a `BindTemplate`: the kernels,
//! their pipelines, every guard their lowering recorded, and the numbers
//! that did not change. A later graph of the site binds the template
//! where
//! - it is the record's lowered graph but for its numbers
//!   (`GraphKey::same_but_numbers`), each number that did not change at
//!   the site unchanged again (the kernels hold the others' expressions);
//! - every guard holds at its numbers (lowering would choose as it did);
//! - the scheduler plans the same kernels (`Plan::same_kernels`) and the
//!   target is the one they were lowered for (a tuned matmul class);
//!
//! and each kernel's grid, sizes, scratch textures and copies are then
//! evaluated from their expressions (`codegen::source_at`). Anything else
//! lowers as before. `DeviceConfig::check_binds` lowers the bound graphs
//! too and panics where the two differ.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use crate::codegen::{KernelSource, launch_difference, source_at};
use crate::graph::{Graph, GraphKey};
use crate::kernel::Target;
use crate::kernel::changing::{ChangingSizes, leaves_of, number_of};
use crate::kernel::sizes::{Guard, Leaf};
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
    guards: Vec<Guard>,
    /// The numbers of the lowered graph that its kernels hold as
    /// literals (none changed at the site), with their values.
    fixed: Vec<(Leaf, usize)>,
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
    pub target: &'a Target,
    /// The plan before code generation, and after.
    pub planned: Plan,
    pub plan: &'a Plan,
    /// The numbers that change at the site.
    pub changing: &'a ChangingSizes,
    /// Whether each dispatch lowered to a kernel the site bound before
    /// (under the precedents the site keeps, outside a dump, whose graphs
    /// are each lowered to list their IR): its kernels are shown generic
    /// over the numbers that change at the site.
    pub shown_generic: bool,
}

impl BindTemplate {
    /// The template of a compiled graph, or `None` where a later size may
    /// not bind it unlowered: a dispatch lowered to a kernel the site had
    /// not bound before (its kernels are not yet shown generic over the
    /// site's changing numbers), the precedents changed, a literal that
    /// reads a changing number stayed inline, or a kernel's launch is not
    /// an expression of the numbers (it is evaluated at this graph's own
    /// numbers and compared with lowering's).
    pub(super) fn of(c: Compiled<'_>, compiled: &[CompiledKernel]) -> Option<BindTemplate> {
        if !c.shown_generic {
            return None;
        }
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
        let mut made = FxHashSet::default();
        let mut guards = Vec::new();
        let dispatches = kernels.iter().flat_map(|k| k.source.dispatches());
        for g in dispatches.flat_map(|s| s.guards.iter()) {
            if made.insert((g.size.clone(), g.test)) {
                guards.push(g.clone());
            }
        }
        let fixed = (0..c.key.nodes.len())
            .flat_map(|n| leaves_of(c.key, n))
            .filter(|&leaf| !c.changing.contains(leaf))
            .map(|leaf| (leaf, number_of(c.key, leaf)))
            .collect();
        Some(BindTemplate {
            target: c.target.clone(),
            aliases: c.plan.kernels.iter().map(|k| k.aliases.clone()).collect(),
            planned: c.planned,
            kernels,
            guards,
            fixed,
            changing: c.changing.clone(),
        })
    }

    /// The template's kernels at the lowered graph `key`, and the plan
    /// they run under (`plan`, the scheduler's for `key`, given the
    /// aliases the kernels kept); `None` where `key`'s numbers do not
    /// allow it (see the module's documentation). The caller has checked
    /// that `key` is the template's graph but for its numbers, and the
    /// target.
    pub(super) fn bind(&self, key: &GraphKey, mut plan: Plan) -> Option<(Vec<KernelSource>, Plan)> {
        let numbers = |leaf| number_of(key, leaf);
        if !self
            .fixed
            .iter()
            .all(|&(leaf, value)| numbers(leaf) == value)
        {
            return None;
        }
        let crossed = |g: &Guard| !g.holds_at(g.size.eval(&numbers));
        if let Some(g) = self.guards.iter().find(|g| crossed(g)) {
            log::debug!("a new size lowers again: guard {g} crossed");
            return None;
        }
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

/// `graph` (lowered, its nodes from the traced graph's through `origin`)
/// bound to its site's kernels without lowering, where the site's record
/// of its structure (`site`, `structure`) has a template that its
/// numbers allow (see the module's documentation), counted in the
/// metrics (`graphs_bound`, `kernels_bound`); `None` otherwise.
pub(super) fn bind_unlowered(
    (ctx, target): (&GpuContext, &Target),
    caches: &mut GpuCaches,
    metrics: &Metrics,
    (graph, origin): (&Graph, &[usize]),
    (site, structure): (&[String], u64),
) -> Option<Executable> {
    let record =
        (caches.by_site.peek(site)?.before(structure)).filter(|r| r.has_structure(structure))?;
    if record.templates.is_empty() || !record.lowered.same_but_numbers(&graph.key) {
        return None;
    }
    // The target lowering would use: pinned, or with its classes' kernels.
    let tuned;
    let target = match (&caches.pinned, caches.matmul_classes.as_mut()) {
        (Some((_, pinned)), _) => pinned,
        (None, Some(tuner)) => {
            tuned = tuner.target_for(target, &graph.key, Some(&record.precedents));
            &tuned
        }
        (None, None) => target,
    };
    let planned = plan(&graph.key, target);
    let (template, (sources, plan)) = (record.templates.iter())
        .filter(|t| t.target == *target)
        .find_map(|t| Some((t, t.bind(&graph.key, planned.clone())?)))?;
    let mut kernels: Vec<CompiledKernel> = (sources.into_iter().zip(&template.kernels))
        .map(|(source, t)| compiled_kernel(ctx, source, t.pipeline.clone(), &t.packs))
        .collect();
    place_sizes(ctx, &mut kernels);
    let dispatches = kernels.iter().map(|k| k.packs.len() as u64 + 1).sum();
    metrics.add("graphs_bound", 1);
    metrics.add("kernels_bound", dispatches);
    Some(assemble(ctx, graph, origin.to_vec(), kernels, plan))
}

/// `check_binds`: panics where a graph's kernels bound unlowered
/// (`bound`) differ from those lowering gave it (`lowered`) in anything
/// a launch uses.
pub(super) fn check_bound(bound: &[CompiledKernel], lowered: &[CompiledKernel]) {
    assert_eq!(
        bound.len(),
        lowered.len(),
        "a graph bound unlowered has {} kernels, lowered {}",
        bound.len(),
        lowered.len()
    );
    for (k, (b, l)) in bound.iter().zip(lowered).enumerate() {
        let (b, l) = (&b.source, &l.source);
        if let Some(why) = launch_difference(b, l) {
            panic!(
                "kernel {k} bound unlowered differs from its lowering in {why}\nbound:\n{}\nlowered:\n{}",
                b.kernel, l.kernel
            );
        }
    }
}
