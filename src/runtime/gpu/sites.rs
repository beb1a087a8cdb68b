//! Trace sites: the graphs compiled for each set of output source lines,
//! to tell a recompilation (same site, new structure) from a new graph,
//! to say what changed, to count recompiles against the budget, and to
//! give a new size of a graph its last compile's kernels and strategies.

use std::borrow::Cow;
use std::sync::Arc;

use crate::error::Error;
use crate::graph::{Graph, GraphKey, Recompile};
use crate::kernel::Precedents;
use crate::kernel::changing::{Before, ChangingSizes};
use crate::metrics::Metrics;

use super::compile::GpuCaches;
use super::dynamic::KernelTexts;
use super::rebind::BindTemplate;
use crate::codegen::KernelSource;

/// A trace site (the source lines of a graph's outputs): the graphs
/// compiled for it, newest first, one per structure without sizes
/// (`GraphKey::size_free_hash`). Graphs whose outputs are recorded on one
/// line (in a helper function) but differ in structure each keep their
/// own record, so each is compared with its own last sizes.
pub(crate) struct Site {
    /// Recompiles of the site so far.
    count: usize,
    /// Graphs compiled for the site so far, warm-up included.
    compiles: usize,
    records: Vec<SiteRecord>,
}

/// Structures a site remembers.
const RECORDS_PER_SITE: usize = 8;

impl Site {
    /// The record a graph of `structure` is compared with: the one of its
    /// structure, else the newest (a step whose structure changed).
    pub(super) fn before(&self, structure: u64) -> Option<&SiteRecord> {
        self.records
            .iter()
            .find(|r| r.structure == structure)
            .or(self.records.first())
    }
}

/// A graph compiled for a trace site.
pub(crate) struct SiteRecord {
    /// The graph as traced.
    pub key: GraphKey,
    /// The graph as lowered for the GPU, whose numbers the kernels'
    /// sizes read.
    pub lowered: GraphKey,
    /// Per node of `lowered`, the node of `key` it comes from.
    pub origin: Vec<usize>,
    /// The numbers of `lowered` that changed at the site up to it (its
    /// kernels read them from their sizes binding).
    pub changing: ChangingSizes,
    /// Its `GraphKey::size_free_hash`.
    structure: u64,
    /// Per kernel, per dispatch (its packing kernels, then itself): the
    /// kernels a later size is compared with (see `dynamic::DispatchText`:
    /// a kernel lowered at one of the site's sizes, which of its literals
    /// are dynamic, the kernel bound and its WGSL).
    pub kernels: KernelTexts,
    /// The strategies its kernels chose.
    pub precedents: Precedents,
    /// What a later size binds without lowering, once the site's kernels
    /// are shown generic (`rebind`): this graph's, then those of earlier
    /// graphs of its structure whose guards came out otherwise (a batch
    /// a multiple of four, then not) made when the same numbers had
    /// changed, up to `TEMPLATES_PER_RECORD`.
    pub templates: Vec<Arc<BindTemplate>>,
}

/// Templates a site's record keeps.
const TEMPLATES_PER_RECORD: usize = 4;

impl SiteRecord {
    /// The record as `ChangingSizes::at` compares a new graph with it.
    pub(super) fn as_before(&self) -> Before<'_> {
        Before {
            traced: &self.key,
            lowered: &self.lowered,
            origin: &self.origin,
            changing: &self.changing,
        }
    }

    /// Its strategies as precedents for a graph of `structure`: all of
    /// them, except that a record of another structure lends no matmul
    /// kernel where `tuned_classes` (per-class tuning picks kernels: the
    /// matmul at the same node of another graph may be another product,
    /// whose kernel would take the place of this one's tuned class).
    pub(super) fn precedents_for(
        &self,
        structure: u64,
        tuned_classes: bool,
    ) -> Cow<'_, Precedents> {
        if !tuned_classes || self.has_structure(structure) {
            return Cow::Borrowed(&self.precedents);
        }
        Cow::Owned(
            (self.precedents).without(|s| matches!(s, crate::kernel::Strategy::Matmul { .. })),
        )
    }

    /// Whether the record is of the structure `structure` (a
    /// `GraphKey::size_free_hash`), not another structure's at this site.
    pub(super) fn has_structure(&self, structure: u64) -> bool {
        self.structure == structure
    }
}

/// What a cache miss is to its trace site, recorded once the graph
/// compiled.
pub(super) struct SiteNote {
    pub site: Vec<String>,
    /// The graph's `GraphKey::size_free_hash`.
    pub structure: u64,
    /// Recompiles of the site before this graph.
    previous: usize,
    /// The warning to give, for a recompile after warm-up.
    warning: Option<String>,
    /// The error to give instead, past the recompile budget, if the graph
    /// needs a kernel compiled.
    pub over_budget: Option<Error>,
}

impl SiteNote {
    /// Whether the compile is a recompile to warn about (past warm-up):
    /// only then is it worth saying why each kernel compiles again.
    pub(super) fn warns(&self) -> bool {
        self.warning.is_some()
    }

    /// Adds to the recompile warning why kernels compile again: the
    /// kernels among `sources` that need a pipeline (not `compiled`),
    /// each with the guard its sizes crossed (`texts`: the site's record
    /// of this graph, see `DispatchText::not_generic`). The first three
    /// are named, by the node each writes first and its source line, in
    /// the warning and, past the site's budget, in its error.
    pub(super) fn explain_kernels(
        &mut self,
        graph: &Graph,
        (sources, texts): (&[KernelSource], &KernelTexts),
        compiled: &dyn Fn(&str) -> bool,
    ) {
        let Some(warning) = &mut self.warning else {
            return;
        };
        let mut reasons = Vec::new();
        for (k, (source, texts)) in sources.iter().zip(texts).enumerate() {
            for (dispatch, text) in source.dispatches().zip(texts) {
                let Some(why) = text.first().and_then(|t| t.not_generic.as_ref()) else {
                    continue;
                };
                if compiled(&dispatch.wgsl) || reasons.iter().any(|(w, _)| *w == why) {
                    continue;
                }
                let node = source.writes.first().copied();
                let label = node.map_or_else(String::new, |n| {
                    format!(
                        " ({} recorded at {})",
                        graph.op_label(n),
                        graph.locations[n]
                    )
                });
                reasons.push((why, format!("kernel {k}{label}: {why}")));
            }
        }
        if reasons.is_empty() {
            return;
        }
        let more = reasons.len().saturating_sub(3);
        reasons.truncate(3);
        let reasons: Vec<&str> = reasons.iter().map(|(_, r)| r.as_str()).collect();
        let mut why = format!("; not generic over the new sizes: {}", reasons.join("; "));
        if more > 0 {
            why.push_str(&format!(" (and {more} more)"));
        }
        warning.push_str(&why);
        // Past the budget, the error names them too.
        if let Some(Error::RecompileBudget { change, .. }) = &mut self.over_budget {
            change.push_str(&why);
        }
    }
}

/// The trace site of `graph` (its outputs' source lines) and its
/// structure without sizes (`GraphKey::size_free_hash`): which of the
/// site's records it is compared with.
pub(super) fn site_of(graph: &Graph) -> (Vec<String>, u64) {
    let site = (graph.key.outputs.iter())
        .map(|&o| graph.locations[o].to_string())
        .collect();
    (site, graph.key.size_free_hash())
}

/// Tells a recompilation (the same output source lines as a graph
/// compiled before, another structure) from a new graph. A recompilation
/// past the device's recompile budget for its site is an
/// `Error::RecompileBudget`; otherwise it is warned about once the graph
/// compiled (`record_site`), with what changed and the source line of the
/// node that did.
pub(super) fn note_miss(
    caches: &mut GpuCaches,
    graph: &Graph,
    (site, structure): (Vec<String>, u64),
) -> SiteNote {
    let Some((before, count, compiles)) = caches
        .by_site
        .get(&site)
        .and_then(|s| Some((&s.before(structure)?.key, s.count, s.compiles)))
    else {
        log::debug!(
            "graph {:016x}: cache miss, new graph of {} nodes with outputs at {site:?}",
            graph.hash,
            graph.key.nodes.len()
        );
        return SiteNote {
            site,
            structure,
            previous: 0,
            warning: None,
            over_budget: None,
        };
    };
    let previous = count;
    let explained = graph.key.explain_recompile(before, compiles == 1);
    if explained.warm_up {
        log::debug!(
            "graph {:016x}: compile of the graph of outputs at {site:?}, not counted: {}",
            graph.hash,
            explained.change
        );
        return SiteNote {
            site,
            structure,
            previous,
            warning: None,
            over_budget: None,
        };
    }
    let count = previous + 1;
    let Recompile { node, change, .. } = explained;
    let location = node.map_or_else(
        || "(no single node)".to_string(),
        |n| graph.locations[n].to_string(),
    );
    let mut lines: Vec<&str> = Vec::new();
    for line in &site {
        if !lines.contains(&line.as_str()) {
            lines.push(line);
        }
    }
    let lines = lines.join(", ");
    let warning = format!(
        "recompiling the graph of outputs recorded at {lines} (recompile {count} of this site): {change}, recorded at {location}"
    );
    let over_budget = caches
        .recompile_budget
        .filter(|&b| count > b)
        .map(|budget| Error::RecompileBudget {
            site: lines,
            count,
            budget,
            change,
            location,
        });
    SiteNote {
        site,
        structure,
        previous,
        warning: Some(warning),
        over_budget,
    }
}

/// Records a compiled graph as its site's last, counting it
/// (`graphs_compiled`, or `graphs_specialized` where it compiled nothing)
/// and warning about a recompile (`compiled`: it needed a kernel
/// compiled; a graph whose kernels were all found, generic over its
/// sizes, is no recompile).
pub(super) fn record_site(
    caches: &mut GpuCaches,
    (metrics, graph): (&Metrics, &Graph),
    (note, kernels, precedents, compiled): (SiteNote, KernelTexts, Precedents, bool),
    (lowered, origin, changing): (GraphKey, Vec<usize>, ChangingSizes),
    template: Option<BindTemplate>,
) {
    let counter = ["graphs_specialized", "graphs_compiled"][usize::from(compiled)];
    metrics.add(counter, 1);
    let mut count = note.previous;
    if let (Some(warning), true) = (note.warning, compiled) {
        metrics.add("recompiles", 1);
        metrics.warn(warning);
        count += 1;
    }
    let mut record = SiteRecord {
        key: graph.key.clone(),
        lowered,
        origin,
        changing,
        structure: note.structure,
        kernels,
        precedents,
        templates: template.map(Arc::new).into_iter().collect(),
    };
    match caches.by_site.get_mut(&note.site) {
        Some(site) => {
            // Earlier templates made under what changes now, with the
            // strategies the site keeps now.
            let earlier = (site.records.iter())
                .find(|r| r.structure == note.structure)
                .map_or(&[][..], |r| &r.templates[..]);
            let room = TEMPLATES_PER_RECORD - record.templates.len();
            let still = (earlier.iter())
                .filter(|t| t.changing == record.changing && t.precedents == record.precedents);
            (record.templates).extend(still.take(room).cloned());
            site.count = count;
            site.compiles += 1;
            site.records.retain(|r| r.structure != note.structure);
            site.records.insert(0, record);
            site.records.truncate(RECORDS_PER_SITE);
        }
        None => {
            let site = Site {
                count,
                compiles: 1,
                records: vec![record],
            };
            caches.by_site.put(note.site, site);
        }
    }
}
