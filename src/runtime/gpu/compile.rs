//! The compile driver: a graph's executable (kernels, pipelines, scratch
//! textures, liveness of intermediates, donations) from its schedule and
//! generated code, cached by graph structure; pipelines cached by WGSL.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::dynamic::{KernelTexts, Printing, bind_kernels};
use super::rebind::{BindTemplate, Compiled, bind_unlowered, check_bound, unchanged_numbers};
use super::sites::{Site, SiteNote, SiteRecord, note_miss, record_site, site_of};
use crate::codegen::{CodegenContext, KernelSource, SizeLiterals, generate};
use crate::error::{Error, Result};
use crate::graph::{Graph, GraphKey};
use crate::kernel::changing::ChangingSizes;
use crate::kernel::sizes::Leaf;
use crate::kernel::{Precedents, Target};
use crate::metrics::Metrics;
use crate::schedule::{Donations, KernelKind, Lowered, Plan, lower_for_gpu, plan};
use crate::shape::numel;
use crate::tune::classes::ClassTuner;
use crate::tune::pinned::KernelChoices;

use super::bind::CachedBindGroup;
use super::context::GpuContext;
use super::pipelines::{Pipeline, PipelineMaker, compile_threads};

/// One compiled kernel of an executable.
pub(super) struct CompiledKernel {
    pub(super) pipeline: Arc<Pipeline>,
    pub(super) source: KernelSource,
    pub(super) workgroups: (u32, u32),
    /// The kernels dispatched right before it (`source.packs`).
    pub(super) packs: Vec<(Arc<Pipeline>, (u32, u32))>,
    /// The last few bind groups of each dispatch (the packs', then its
    /// own), newest first, with the resources they bind: a training step
    /// gets the same few sets of buffers from the pool step after step
    /// (alternating where a step's output outlives the next step), and
    /// creating bind groups was most of the host's encoding time (W5:
    /// ~12 µs a kernel on lavapipe).
    pub(super) bind_groups: Vec<Mutex<Vec<CachedBindGroup>>>,
    /// Per dispatch (the packs', then its own): the values of a generic
    /// kernel's dynamic sizes, as the range of the executable's one
    /// sizes buffer that it binds last.
    pub(super) sizes: Vec<Option<SizesRange>>,
    /// `(output, intermediate)`: outputs it writes into the buffer of an
    /// intermediate it reads last (`Donations::intermediates`).
    pub(super) takes_over: Vec<(usize, usize)>,
}

/// Where a dispatch's dynamic sizes lie: a range of the uniform buffer
/// that holds every generic dispatch's sizes for one executable (one
/// buffer made per new size, not one per dispatch).
#[derive(Clone, Debug)]
pub(super) struct SizesRange {
    pub(super) buffer: wgpu::Buffer,
    pub(super) offset: u64,
    pub(super) size: std::num::NonZeroU64,
}

/// A compiled graph: its kernels in order, and which outputs are written
/// into the buffer of which (donated) input.
pub(crate) struct Executable {
    /// The graph lowered for the GPU (long reductions split), which the
    /// kernels, donations and releases index; `origin` maps each of its
    /// nodes to the traced graph's node (for source lines).
    pub(super) key: GraphKey,
    pub(super) origin: Vec<usize>,
    pub(super) kernels: Vec<CompiledKernel>,
    /// Outputs written into the buffer of a donated input or of an
    /// intermediate their kernel reads last.
    pub(super) donations: Donations,
    /// Per kernel: intermediates (written, not graph outputs) whose last
    /// reader it is, released for reuse once it is encoded.
    pub(super) releases: Vec<Vec<usize>>,
    /// Anomaly mode: the two flag words its kernels set (see
    /// `kernel::ir::Check::slot`), cleared at the start of each run.
    pub(super) checks: Option<wgpu::Buffer>,
    /// The work one run does, added to the metrics at each run.
    pub(super) work: Work,
}

/// The work of one run of an executable, as the metrics count it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Work {
    /// Bytes of the buffers its kernels (and their packing kernels) read,
    /// each binding counted whole: what a kernel reads at least once
    /// where it reads everything it binds.
    pub bytes_read: u64,
    /// Bytes of the buffers its kernels write.
    pub bytes_written: u64,
    /// Floating-point operations of its matmuls, 2·m·n·k each.
    pub matmul_flops: u64,
}

impl Work {
    /// The work of `kernels` over the nodes of `key`.
    fn of(key: &GraphKey, kernels: &[CompiledKernel]) -> Work {
        let bytes = |n: usize| {
            let node = &key.nodes[n];
            node.dtype.words(numel(&node.shape)) as u64 * 4
        };
        let mut work = Work::default();
        for k in kernels {
            for source in std::iter::once(&k.source).chain(&k.source.packs) {
                work.bytes_read += source.reads.iter().map(|&n| bytes(n)).sum::<u64>();
                work.bytes_written += source.writes.iter().map(|&n| bytes(n)).sum::<u64>();
            }
        }
        for node in &key.nodes {
            if let crate::graph::GKind::Op {
                op: crate::graph::op::Op::Matmul,
                ..
            } = &node.kind
            {
                let a = &key.nodes[node.inputs[0]].shape;
                let inner = a.last().copied().unwrap_or(1) as u64;
                work.matmul_flops += 2 * numel(&node.shape) as u64 * inner;
            }
        }
        work
    }
}

/// Compiled work of one `Device`: executables by graph structure, pipelines
/// by WGSL text (a kernel shared by two graphs compiles once).
pub(crate) struct GpuCaches {
    executables: LruCache<u64, Vec<(GraphKey, Arc<Executable>)>>,
    pipelines: LruCache<String, Arc<Pipeline>>,
    /// The graphs last compiled for each set of output source locations
    /// (one per structure without sizes), to tell a recompilation (same
    /// trace site, new structure) from a new graph, to say what changed,
    /// and to make kernels generic over sizes; and how often that site
    /// recompiled.
    pub(super) by_site: LruCache<Vec<String>, Site>,
    /// Recompiles allowed per site before a compile fails with
    /// `Error::RecompileBudget` (`Device::set_recompile_budget`).
    pub recompile_budget: Option<usize>,
    /// `LAZYWGPU_DUMP`: where newly compiled graphs are written.
    dump_dir: Option<std::path::PathBuf>,
    /// The matmul kernel of each class of sizes, tuned where first
    /// compiled (`None`: tuning off, or a kernel named).
    pub matmul_classes: Option<ClassTuner>,
    /// `DeviceConfig::check_binds`: a graph bound to its site's kernels
    /// without lowering is lowered too, and the two compared.
    pub check_binds: bool,
    /// Kernel choices handed to this device (data parallelism: rank 0's)
    /// and the target they make, used in the place of the device's own
    /// and of any class tuning.
    pub(super) pinned: Option<(KernelChoices, Target)>,
}

impl GpuCaches {
    pub fn new(dump_dir: Option<std::path::PathBuf>, recompile_budget: Option<usize>) -> GpuCaches {
        GpuCaches {
            executables: LruCache::new(NonZeroUsize::new(512).expect("nonzero")),
            pipelines: LruCache::new(NonZeroUsize::new(2048).expect("nonzero")),
            by_site: LruCache::new(NonZeroUsize::new(256).expect("nonzero")),
            recompile_budget,
            dump_dir,
            matmul_classes: None,
            pinned: None,
            check_binds: false,
        }
    }

    /// The kernel choices this device generates with: the pinned ones,
    /// else `target`'s and its class tuner's.
    pub fn kernel_choices(&self, target: &Target) -> KernelChoices {
        if let Some((choices, _)) = &self.pinned {
            return choices.clone();
        }
        let none = BTreeMap::new();
        let classes = (self.matmul_classes.as_ref()).map_or(&none, ClassTuner::chosen);
        KernelChoices::of(target, classes)
    }

    /// The target the pinned choices make, where there are.
    pub fn pinned_target(&self) -> Option<&Target> {
        self.pinned.as_ref().map(|(_, target)| target)
    }

    /// Generates with `choices` from now on (their target built once for
    /// `ctx` from the device's `target`), tuning no class; every graph
    /// compiled before is dropped where they change what this device
    /// generates (pipelines are kept: they are found by their code).
    pub fn pin(&mut self, ctx: &GpuContext, choices: KernelChoices, target: &Target) {
        if self.kernel_choices(target) != choices || self.matmul_classes.is_some() {
            self.executables.clear();
            self.by_site.clear();
        }
        let pinned = choices.target(ctx, target);
        self.pinned = Some((choices, pinned));
    }
}

/// Looks up or compiles the executable of `graph`: lowered for the GPU
/// (long reductions split), then bound to its trace site's kernels
/// without lowering them where the site allows (`rebind`), else
/// scheduled, generated against the target, donations and liveness
/// planned, pipelines compiled (or found). Also says whether it compiled
/// a pipeline.
pub(super) fn executable(
    (ctx, target): (&GpuContext, &Target),
    caches: &mut GpuCaches,
    metrics: &Arc<Metrics>,
    graph: &Graph,
) -> Result<(Arc<Executable>, bool)> {
    if let Some(exe) = cached(caches, graph) {
        metrics.add("graph_cache_hits", 1);
        return Ok((exe, false));
    }
    metrics.add("graph_cache_misses", 1);
    supported(target, graph)?;
    let compile_start = std::time::Instant::now();
    let traced = graph;
    let (site_key, structure) = site_of(traced);
    let Lowered { key, origin } = lower_for_gpu(&traced.key, target);
    let graph = &traced.lowered(key, &origin);
    let site_at = (&site_key[..], structure);
    let mut bound = bind_unlowered((ctx, target), caches, metrics, (graph, &origin), site_at);
    if let Some(exe) = bound.take_if(|_| !caches.check_binds) {
        metrics.record("compile", compile_start.elapsed());
        let exe = Arc::new(exe);
        remember(caches, traced, exe.clone());
        return Ok((exe, false));
    }
    let site = note_miss(caches, traced, (site_key, structure));
    let lowered = (traced, graph, origin);
    let ((exe, tuning), compiles) =
        lower_and_compile((ctx, target), caches, metrics, lowered, site, bound)?;
    metrics.record("compile", compile_start.elapsed() - tuning);
    let exe = Arc::new(exe);
    remember(caches, traced, exe.clone());
    Ok((exe, compiles))
}

/// The executable of `graph` (lowered from `traced`, its nodes from the
/// traced graph's through `origin`), lowered and compiled; its site's
/// record updated. With `bound` (`check_binds`: the executable the site
/// bound without lowering), panics where lowering gives other launches,
/// and returns it. Also returns the time spent tuning matmul classes (no
/// compile time: the `autotune` timer has it), and whether it compiled
/// a pipeline.
fn lower_and_compile(
    (ctx, target): (&GpuContext, &Target),
    caches: &mut GpuCaches,
    metrics: &Arc<Metrics>,
    (traced, graph, origin): (&Graph, &Graph, Vec<usize>),
    mut site: SiteNote,
    bound: Option<Executable>,
) -> Result<((Executable, std::time::Duration), bool)> {
    // Dumped kernels name the graph node and source line on each line.
    let origins = caches.dump_dir.as_ref().map(|_| node_labels(graph));
    // Another size of a site compiled before keeps its strategies (each
    // one checked valid for its kernel's sizes: a site whose graph
    // changed may see its nodes' old strategies, never wrong values).
    let pinned = caches.pinned_target().cloned();
    let tuned_classes = caches.matmul_classes.is_some() || pinned.is_some();
    let before = (caches.by_site.peek(&site.site)).and_then(|s| s.before(site.structure));
    let precedents = before.map(|b| b.precedents_for(site.structure, tuned_classes));
    let changing = changing_at((traced, graph, &origin), before, site.structure);
    let tuning_start = std::time::Instant::now();
    let by_class = pinned.or_else(|| {
        (caches.matmul_classes.as_mut())
            .map(|t| t.target_for(target, &graph.key, precedents.as_deref()))
    });
    let target = by_class.as_ref().unwrap_or(target);
    let tuning = tuning_start.elapsed();
    let cx = CodegenContext {
        target,
        origins: origins.as_deref(),
        precedents: precedents.as_deref(),
        changing_last_dims: &changing_last_dims(&graph.key, &changing),
        sizes: SizeLiterals::Symbolic(&changing),
    };
    let mut plan = plan(&graph.key, target);
    let planned = plan.clone();
    let mut sources = generate(&graph.key, &cx, &mut plan);
    let mut chosen = precedents_of(&plan, &sources);
    if let Some(p) = &precedents {
        chosen.inherit(p);
    }
    let precedents_kept = precedents.as_deref() == Some(&chosen);
    // Kernels the site bound before take their printed text; when every
    // one is found compiled, nothing compiles.
    let (texts, all_bound) = bind_known_kernels(metrics, (graph, before, &site), &cx, &mut sources);
    let compiles = needs_compiling(
        caches,
        (&mut site, graph, cx.origins),
        (&mut sources, &texts),
    )?;
    let shown_generic = all_bound && precedents_kept && origins.is_none();
    let previous = before.filter(|b| shown_generic && b.has_structure(site.structure));
    let unchanged = previous.and_then(|b| unchanged_numbers(&b.lowered, &graph.key));
    let kernels = compile_kernels((ctx, target), caches, metrics, graph, (sources, compiles))?;
    let compiled = Compiled {
        key: &graph.key,
        unchanged,
        target,
        planned,
        plan: &plan,
        changing: &changing,
        precedents: &chosen,
    };
    let template = BindTemplate::of(compiled, &kernels);
    // A graph bound unlowered (checked here) leaves the site as it was.
    if bound.is_none() {
        let symbols = (graph.key.clone(), origin.clone(), changing);
        let record = (site, texts, chosen, compiles);
        record_site(caches, (metrics, traced), record, symbols, template);
    }
    if let (Some(dir), Some(origins)) = (&caches.dump_dir, &origins) {
        let sources: Vec<&KernelSource> = kernels.iter().map(|k| &k.source).collect();
        crate::debug::dump(dir, (graph, &plan), &sources, origins);
    }
    let lowered = assemble(ctx, graph, origin, kernels, plan);
    if let Some(bound) = &bound {
        check_bound(bound, &lowered);
    }
    Ok(((bound.unwrap_or(lowered), tuning), compiles))
}

/// Prints the dispatches not printed yet (the kernels that stayed
/// concrete, in a dump), and says whether any needs a pipeline compiled: then the
/// site's recompile warning names the kernels and the guards their sizes
/// crossed, and a site past its recompile budget fails.
fn needs_compiling(
    caches: &GpuCaches,
    (site, graph, origins): (&mut SiteNote, &Graph, Option<&[String]>),
    (sources, texts): (&mut [KernelSource], &KernelTexts),
) -> Result<bool> {
    for source in sources.iter_mut() {
        source.print_wgsl(origins);
    }
    let compiled = |wgsl: &str| caches.pipelines.contains(wgsl);
    let compiles = sources
        .iter()
        .flat_map(KernelSource::dispatches)
        .any(|s| !compiled(&s.wgsl));
    if compiles {
        site.explain_kernels(graph, (sources, texts), &compiled);
        if let Some(e) = site.over_budget.take() {
            return Err(e);
        }
    }
    Ok(compiles)
}

/// Compiles (or finds compiled) the pipelines of each of `graph`'s
/// kernels, in order; `compiles`: whether any is new (`needs_compiling`),
/// so that a graph whose pipelines all exist (a new size bound to its
/// generic kernels) looks each text up once.
fn compile_kernels(
    (ctx, target): (&GpuContext, &Target),
    caches: &mut GpuCaches,
    metrics: &Arc<Metrics>,
    graph: &Graph,
    (sources, compiles): (Vec<KernelSource>, bool),
) -> Result<Vec<CompiledKernel>> {
    // Every dispatch of the graph was lowered to IR for these sizes, also
    // where each then found a generic kernel compiled (sizes are not yet
    // symbols the executable could bind without lowering).
    let lowered = sources.iter().flat_map(KernelSource::dispatches).count();
    metrics.add("kernels_lowered", lowered as u64);
    let mut made = HashMap::new();
    if compiles {
        let mut new: Vec<&str> = (sources.iter().flat_map(KernelSource::dispatches))
            .map(|s| &*s.wgsl)
            .filter(|wgsl| !caches.pipelines.contains(*wgsl))
            .collect();
        new.sort_unstable();
        new.dedup();
        made = maker(ctx).compile_new(&new, compile_threads());
    }
    let mut kernels = Vec::with_capacity(sources.len());
    for (k, source) in sources.into_iter().enumerate() {
        let at = (graph, k);
        kernels.push(compile_kernel(
            (ctx, target),
            (caches, &mut made),
            metrics,
            at,
            source,
        )?);
    }
    place_sizes(ctx, &mut kernels);
    Ok(kernels)
}

/// Writes every generic dispatch's dynamic sizes into one uniform buffer,
/// each at an offset the adapter allows a uniform binding to start at,
/// and gives each dispatch its range.
pub(super) fn place_sizes(ctx: &GpuContext, kernels: &mut [CompiledKernel]) {
    let align = u64::from(ctx.device.limits().min_uniform_buffer_offset_alignment).max(16);
    let mut words: Vec<u32> = Vec::new();
    let mut ranges: Vec<(usize, usize, u64, u64)> = Vec::new();
    for (k, kernel) in kernels.iter().enumerate() {
        for (d, dispatch) in kernel.source.dispatches().enumerate() {
            if dispatch.dynamic.is_empty() {
                continue;
            }
            let values = &dispatch.dynamic.values;
            let offset = (words.len() as u64 * 4).next_multiple_of(align);
            words.resize(offset as usize / 4, 0);
            words.extend_from_slice(values);
            // The kernel declares whole vec4s.
            words.resize(offset as usize / 4 + values.len().div_ceil(4).max(1) * 4, 0);
            ranges.push((k, d, offset, words.len() as u64 * 4 - offset));
        }
    }
    if ranges.is_empty() {
        return;
    }
    use wgpu::util::DeviceExt;
    let buffer = ctx
        .device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("lazywgpu dynamic sizes"),
            contents: bytemuck::cast_slice(&words),
            usage: wgpu::BufferUsages::UNIFORM,
        });
    for (k, d, offset, size) in ranges {
        kernels[k].sizes[d] = std::num::NonZeroU64::new(size).map(|size| SizesRange {
            buffer: buffer.clone(),
            offset,
            size,
        });
    }
}

/// The executable of `graph`'s compiled `kernels`, with the buffers each
/// kernel takes over and releases (from `plan`) and, in anomaly mode,
/// the checks buffer.
pub(super) fn assemble(
    ctx: &GpuContext,
    graph: &Graph,
    origin: Vec<usize>,
    mut kernels: Vec<CompiledKernel>,
    plan: Plan,
) -> Executable {
    let donations = plan.donations(&graph.key);
    for &(o, x) in &donations.intermediates {
        if let Some(k) = plan.writer[o] {
            kernels[k].takes_over.push((o, x));
        }
    }
    let checks = graph.key.checked.then(|| checks_buffer(ctx));
    Executable {
        key: graph.key.clone(),
        origin,
        work: Work::of(&graph.key, &kernels),
        kernels,
        releases: plan.releases(&graph.key),
        donations,
        checks,
    }
}

/// Keeps `exe` as the executable of `traced`'s key.
fn remember(caches: &mut GpuCaches, traced: &Graph, exe: Arc<Executable>) {
    match caches.executables.get_mut(&traced.hash) {
        Some(entries) => entries.push((traced.key.clone(), exe)),
        None => {
            caches
                .executables
                .put(traced.hash, vec![(traced.key.clone(), exe)]);
        }
    }
}

/// The executable compiled before for `graph`'s key, if any.
fn cached(caches: &mut GpuCaches, graph: &Graph) -> Option<Arc<Executable>> {
    let entries = caches.executables.get(&graph.hash)?;
    let (_, exe) = entries.iter().find(|(k, _)| *k == graph.key)?;
    Some(exe.clone())
}

/// An error naming the first value whose dtype the target cannot compute.
fn supported(target: &Target, graph: &Graph) -> Result<()> {
    for (i, node) in graph.key.nodes.iter().enumerate() {
        if let Some(feature) = target.missing_feature(node.dtype) {
            return Err(Error::Unsupported {
                what: format!(
                    "an {} value (recorded at {})",
                    node.dtype, graph.locations[i]
                ),
                feature,
            });
        }
    }
    Ok(())
}

/// Binds each of `sources`' dispatches to the kernel the site's last
/// graph (`before`) bound for it, where it lowered to that kernel
/// (`dynamic::bind_kernels`), counting them (`kernels_bound`). Returns
/// the kernels to record for the site, and whether every dispatch was
/// bound to the kernel of the site's last graph (`before`'s own).
fn bind_known_kernels(
    metrics: &Metrics,
    (lowered, before, site): (&Graph, Option<&SiteRecord>, &SiteNote),
    cx: &CodegenContext,
    sources: &mut [KernelSource],
) -> (KernelTexts, bool) {
    let bound = std::cell::Cell::new(0);
    let bound_to_last = std::cell::Cell::new(0);
    let names = |n: usize| {
        let located = lowered.locations.get(n)?;
        Some(format!("{} recorded at {located}", lowered.op_label(n)))
    };
    let printing = Printing {
        origins: cx.origins,
        bound: &bound,
        bound_to_last: &bound_to_last,
        explain: site.warns(),
        names: &names,
    };
    let mut texts = bind_kernels(before.map(|b| &b.kernels), sources, printing);
    metrics.add("kernels_bound", bound.get());
    let dispatches: u64 = sources.iter().map(|s| s.dispatches().count() as u64).sum();
    let all_bound = bound_to_last.get() == dispatches;
    // Kernels of another structure are paired by position only: the
    // recompile warning's change in the graph says why they compile.
    if before.is_some_and(|b| !b.has_structure(site.structure)) {
        for t in texts.iter_mut().flatten().flatten() {
            t.not_generic = None;
        }
    }
    (texts, all_bound)
}

/// Anomaly mode: the two flag words the kernels set, cleared at each run.
fn checks_buffer(ctx: &GpuContext) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("lazywgpu anomaly checks"),
        size: 8,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// The numbers of `lowered` (of `traced`'s nodes through `origin`) that
/// change at its site: the kernels read them from their sizes binding,
/// so that the next size binds the same ones. Sizes the user marked
/// dynamic count at the first compile of a structure only; later ones
/// find what changes against the site's record of it (`before`).
fn changing_at(
    (traced, lowered, origin): (&Graph, &Graph, &[usize]),
    before: Option<&SiteRecord>,
    structure: u64,
) -> ChangingSizes {
    let first_of_structure = before.is_none_or(|b| !b.has_structure(structure));
    let marked: &[usize] = match first_of_structure {
        true => &traced.dynamic_sizes,
        false => &[],
    };
    let changing = ChangingSizes::at(
        (&traced.key, &lowered.key, origin),
        before.map(SiteRecord::as_before),
        marked,
    );
    log::debug!(
        "graph {:016x}: {} of its numbers change at its site",
        traced.hash,
        changing.len()
    );
    changing
}

/// Per node of the lowered graph `key`: whether its last dimension is
/// among the numbers that change at the site (`changing`: it differs
/// from the same node of a graph the site compiled before, or is a
/// multiple of a marked size).
fn changing_last_dims(key: &GraphKey, changing: &ChangingSizes) -> Vec<bool> {
    (key.nodes.iter().enumerate())
        .map(|(node, n)| {
            (n.shape.len().checked_sub(1))
                .is_some_and(|dim| changing.contains(Leaf::Dim { node, dim }))
        })
        .collect()
}

/// The strategy of each kernel, keyed by its root or its first output.
fn precedents_of(plan: &Plan, sources: &[KernelSource]) -> Precedents {
    let mut chosen = Precedents::default();
    for (kernel, source) in plan.kernels.iter().zip(sources) {
        let group = &kernel.group;
        let node = match group.kind {
            KernelKind::Root { node, .. } => Some(node),
            KernelKind::Elementwise => Precedents::elementwise_node(&group.outputs),
        };
        if let Some(node) = node {
            chosen.record(node, source.strategy);
        }
    }
    chosen
}

/// Per node: `op file:line`, the label of its lines in dumped kernels.
fn node_labels(graph: &Graph) -> Vec<String> {
    graph
        .key
        .nodes
        .iter()
        .zip(&graph.locations)
        .enumerate()
        .map(|(i, (_, loc))| format!("{} {loc}", graph.op_label(i)))
        .collect()
}

/// Kernel `k` of `graph` compiled: its pipelines (and its packing
/// kernels') and grids. A kernel over the adapter's
/// binding limit is an `Error::Compile` with its source.
fn compile_kernel(
    (ctx, target): (&GpuContext, &Target),
    (caches, made): (&mut GpuCaches, &mut HashMap<String, Pipeline>),
    metrics: &Arc<Metrics>,
    (graph, k): (&Graph, usize),
    source: KernelSource,
) -> Result<CompiledKernel> {
    let max_bindings = target.max_storage_buffers;
    for s in source.dispatches() {
        let bindings = s.buffer_bindings();
        if bindings > max_bindings {
            return Err(Error::Compile {
                graph_hash: graph.hash,
                kernel: k,
                message: format!(
                    "kernel needs {bindings} storage buffers, the adapter allows {max_bindings} (at {})",
                    graph.locations[source.writes.first().copied().unwrap_or(0)]
                ),
                source_code: s.wgsl.to_string(),
            });
        }
    }
    let mut packs = Vec::with_capacity(source.packs.len());
    for p in &source.packs {
        packs.push(pipeline(
            ctx,
            caches,
            metrics,
            (&p.wgsl, made),
            graph.hash,
            k,
        )?);
    }
    let pipeline = pipeline(ctx, caches, metrics, (&source.wgsl, made), graph.hash, k)?;
    Ok(compiled_kernel(ctx, source, pipeline, &packs))
}

/// A kernel with its pipeline and its packing kernels' (in order), each
/// dispatch's grid from its workgroups.
pub(super) fn compiled_kernel(
    ctx: &GpuContext,
    source: KernelSource,
    pipeline: Arc<Pipeline>,
    packs: &[Arc<Pipeline>],
) -> CompiledKernel {
    let packs: Vec<_> = (packs.iter().zip(&source.packs))
        .map(|(p, s)| (p.clone(), grid(ctx, s.groups)))
        .collect();
    let bind_groups = (0..=packs.len()).map(|_| Mutex::new(Vec::new())).collect();
    // Placed once every kernel is compiled (`place_sizes`).
    let sizes = source.dispatches().map(|_| None).collect();
    CompiledKernel {
        sizes,
        pipeline,
        workgroups: grid(ctx, source.groups),
        source,
        packs,
        bind_groups,
        takes_over: Vec::new(),
    }
}

/// Workgroup grid for `groups` workgroups: past the per-dimension limit the
/// grid is split over y, and the kernel recombines the index.
fn grid(ctx: &GpuContext, groups: usize) -> (u32, u32) {
    let groups = groups as u64;
    let max = ctx.limits.max_compute_workgroups_per_dimension as u64;
    if groups <= max {
        (groups as u32, 1)
    } else {
        let y = groups.div_ceil(max);
        (groups.div_ceil(y) as u32, y as u32)
    }
}

fn pipeline(
    ctx: &GpuContext,
    caches: &mut GpuCaches,
    metrics: &Metrics,
    (wgsl, made): (&str, &mut HashMap<String, Pipeline>),
    graph_hash: u64,
    kernel: usize,
) -> Result<Arc<Pipeline>> {
    if let Some(p) = caches.pipelines.get(wgsl) {
        metrics.add("pipeline_cache_hits", 1);
        return Ok(p.clone());
    }
    let pipeline = match made.remove(wgsl) {
        Some(p) => p,
        None => maker(ctx).create(wgsl).map_err(|message| Error::Compile {
            graph_hash,
            kernel,
            message,
            source_code: wgsl.to_string(),
        })?,
    };
    metrics.add("kernels_compiled", 1);
    let pipeline = Arc::new(pipeline);
    caches.pipelines.put(wgsl.to_string(), pipeline.clone());
    Ok(pipeline)
}

/// How this device's pipelines are created.
fn maker(ctx: &GpuContext) -> PipelineMaker<'_> {
    PipelineMaker {
        device: &ctx.device,
        cache: ctx.pipeline_cache.as_ref().map(|c| &c.cache),
        checked: shader_checks_needed(ctx),
    }
}

/// Whether kernels are compiled with wgpu's runtime checks. Off on
/// Vulkan, where wgpu enables the driver's robust buffer access, so that
/// the driver keeps every storage access within its buffer. What naga's
/// checks would add there, none of which the generated code needs:
/// - a counter and a test in every loop: each loop runs a count fixed
///   before it starts (literal or dynamic-size bounds), but the
///   compare-exchange loop of a `bf16` store, which ends once its
///   exchange succeeds (an atomic is a side effect, so no compiler may
///   assume it away);
/// - clamps on workgroup and local arrays and on texture loads: indexed
///   by invocation ids and loop counters within their lengths (a tree
///   step reads `lid + half` only where `lid < half`), texture
///   coordinates taken with `min` into the texture;
/// - guards on integer division: every divisor is a nonzero literal or
///   the dynamic size that stands for one.
///
/// Together they cost 5-13 % of W1-W4 and of the GPT and CNN steps on
/// lavapipe (PERFORMANCE.md). On with `LAZYWGPU_SHADER_CHECKS=1`, and on
/// other backends, whose drivers may not bound buffer accesses.
fn shader_checks_needed(ctx: &GpuContext) -> bool {
    crate::config::ProcessConfig::get().shader_checks || ctx.info.backend != wgpu::Backend::Vulkan
}
