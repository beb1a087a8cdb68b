//! The wgpu backend: one adapter and device per process, compiled
//! executables and pipelines in LRU caches, one command buffer per graph.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, OnceLock};

use lru::LruCache;

use crate::codegen::{KernelSource, generate_kernel, generate_root_kernel, validate_wgsl};
use crate::error::{Error, Result};
use crate::graph::{GKind, Graph, GraphKey};
use crate::kernel::Target;
use crate::metrics::Metrics;
use crate::runtime::pool::{BufferPool, size_class};
use crate::runtime::profile::{self, KernelProfile};
use crate::runtime::storage::{DataBuffer, GpuBuffer, Storage};
use crate::runtime::submit::Submitter;
use crate::schedule::{KernelKind, schedule};
use crate::shape::{Layout, numel};

/// The process-wide wgpu adapter, device and queue.
pub(crate) struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// The features requested (and granted) for the device.
    pub features: wgpu::Features,
    /// The submission thread, on adapters whose submit runs the work
    /// before returning (CPU adapters; `LAZYWGPU_SUBMIT_THREAD=0|1`
    /// overrides). `None`: submit on the caller's thread.
    submitter: Option<Submitter>,
    /// Kernel timings (`LAZYWGPU_PROFILE=1` on an adapter with timestamp
    /// queries).
    pub profile: Option<KernelProfile>,
    /// The last error wgpu reported outside an error scope.
    uncaptured: Arc<Mutex<Option<String>>>,
}

/// One device per process: wgpu devices are dear to create (lavapipe spins
/// up threads for each), and `Device::gpu()` is called freely in tests.
static CONTEXT: OnceLock<Mutex<Option<Arc<GpuContext>>>> = OnceLock::new();

impl GpuContext {
    /// The shared context, created on first use. A failed attempt is not
    /// remembered, so a later call may succeed.
    pub fn shared() -> Result<Arc<GpuContext>> {
        let slot = CONTEXT.get_or_init(|| Mutex::new(None));
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ctx) = slot.as_ref() {
            return Ok(ctx.clone());
        }
        let ctx = Arc::new(pollster::block_on(GpuContext::create())?);
        *slot = Some(ctx.clone());
        Ok(ctx)
    }

    async fn create() -> Result<GpuContext> {
        // Honours WGPU_BACKEND and friends.
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = choose_adapter(&instance).await?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        // Request what the adapter offers, not wgpu's small defaults, and
        // only the features we use (requesting all of them fails on adapters
        // that report experimental ones).
        let wanted =
            wgpu::Features::SUBGROUP | wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY;
        let features = adapter.features() & wanted;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("lazywgpu"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| {
                Error::RequestDevice(format!("{} ({:?}): {e}", info.name, info.backend))
            })?;
        let uncaptured = Arc::new(Mutex::new(None));
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            log::error!("wgpu: {e}");
            *sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        }));
        log::info!(
            "lazywgpu: using {} ({:?}, {:?}); max storage binding {} bytes, max buffer {} bytes",
            info.name,
            info.backend,
            info.device_type,
            limits.max_storage_buffer_binding_size,
            limits.max_buffer_size
        );
        let profiling = profile::requested() && features.contains(wgpu::Features::TIMESTAMP_QUERY);
        // Profiling submits on the caller's thread: lavapipe's timestamps
        // of work submitted from the submission thread came out inflated
        // several times over (their sum exceeded the step's wall time).
        let threaded = match std::env::var("LAZYWGPU_SUBMIT_THREAD").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => info.device_type == wgpu::DeviceType::Cpu,
        } && !profiling;
        let submitter = if threaded {
            Some(Submitter::start(queue.clone()).map_err(|e| {
                Error::RequestDevice(format!("starting the submission thread: {e}"))
            })?)
        } else {
            None
        };
        Ok(GpuContext {
            device,
            queue,
            info,
            limits,
            features,
            submitter,
            profile: profiling.then(KernelProfile::default),
            uncaptured,
        })
    }

    /// An error wgpu raised since the last call, as an `Error`.
    pub fn take_error(&self, during: &str) -> Result<()> {
        match self
            .uncaptured
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            Some(message) => Err(Error::Device {
                during: during.to_string(),
                message,
            }),
            None => Ok(()),
        }
    }

    /// A storage buffer for `len` elements from `pool`, checked against
    /// the adapter's largest buffer (kernels bind buffers past the
    /// storage-binding limit in parts).
    pub fn alloc(&self, pool: &Arc<BufferPool>, len: usize, what: &str) -> Result<Arc<GpuBuffer>> {
        let bytes = (len as u64 * 4).max(16);
        let limit = self.limits.max_buffer_size;
        if bytes > limit {
            return Err(Error::TooLarge {
                what: what.to_string(),
                bytes,
                limit,
            });
        }
        // Near the limit the size class could overshoot it: use the exact size.
        let class = match size_class(bytes) {
            c if c > limit => bytes.next_multiple_of(16),
            c => c,
        };
        Ok(Arc::new(pool.take(&self.device, class)))
    }

    /// Uploads 32-bit patterns into a storage buffer from `pool`. The copy
    /// is staged by wgpu and lands before the next submission runs.
    pub fn upload(&self, pool: &Arc<BufferPool>, bits: &[u32]) -> Result<Arc<GpuBuffer>> {
        let buf = self.alloc(pool, bits.len(), "upload")?;
        if !bits.is_empty() {
            self.write(&buf, 0, bytemuck::cast_slice(bits));
        }
        Ok(buf)
    }

    /// Writes `data` into `buf` at byte `offset`, ordered after everything
    /// submitted before and before everything submitted after.
    pub fn write(&self, buf: &Arc<GpuBuffer>, offset: u64, data: &[u8]) {
        match &self.submitter {
            Some(s) => s.write(buf.buffer().clone(), offset, data.to_vec()),
            None => self.queue.write_buffer(buf.buffer(), offset, data),
        }
    }

    /// Submits a command buffer without waiting for it.
    pub fn submit(&self, cb: wgpu::CommandBuffer) {
        match &self.submitter {
            Some(s) => s.submit(cb),
            None => {
                self.queue.submit([cb]);
            }
        }
    }

    /// Waits until the submission thread (if any) has issued everything
    /// queued so far.
    fn flush(&self) {
        if let Some(s) = &self.submitter {
            s.flush();
        }
    }

    /// Copies `len` elements starting at element `offset` back to the host.
    /// This is the one place that waits for the device.
    pub async fn download(&self, buf: &GpuBuffer, offset: usize, len: usize) -> Result<Vec<u32>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let bytes = len as u64 * 4;
        let staging = self.staging(len)?;
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(buf.buffer(), offset as u64 * 4, &staging, 0, Some(bytes));
        self.submit(encoder.finish());
        self.read_mapped(&staging, "readback").await
    }

    /// A buffer for reading `len` 32-bit elements back to the host,
    /// checked against the adapter's largest buffer.
    pub fn staging(&self, len: usize) -> Result<wgpu::Buffer> {
        let bytes = len as u64 * 4;
        let limit = self.limits.max_buffer_size;
        if bytes > limit {
            return Err(Error::TooLarge {
                what: "readback".to_string(),
                bytes,
                limit,
            });
        }
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("lazywgpu readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }))
    }

    /// Waits for the work submitted so far and reads `staging` (a
    /// `MAP_READ` buffer it copied into) as `T`s.
    pub async fn read_mapped<T: bytemuck::Pod>(
        &self,
        staging: &wgpu::Buffer,
        during: &str,
    ) -> Result<Vec<T>> {
        let device_error = |message: String| Error::Device {
            during: during.to_string(),
            message,
        };
        self.flush();
        let (tx, rx) = futures::channel::oneshot::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| device_error(e.to_string()))?;
        rx.await
            .map_err(|_| device_error("map callback dropped".into()))?
            .map_err(|e| device_error(e.to_string()))?;
        self.take_error(during)?;
        let view = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| device_error(e.to_string()))?;
        let out = bytemuck::cast_slice::<u8, T>(&view).to_vec();
        drop(view);
        staging.unmap();
        Ok(out)
    }

    /// Waits until all submitted work is done.
    pub fn wait(&self) -> Result<()> {
        self.flush();
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Device {
                during: "wait".into(),
                message: e.to_string(),
            })?;
        self.take_error("wait")
    }
}

async fn choose_adapter(instance: &wgpu::Instance) -> Result<wgpu::Adapter> {
    if let Ok(name) = std::env::var("WGPU_ADAPTER_NAME") {
        let wanted = name.to_lowercase();
        let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
        let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
        return adapters
            .into_iter()
            .find(|a| a.get_info().name.to_lowercase().contains(&wanted))
            .ok_or_else(|| {
                Error::NoAdapter(format!(
                    "WGPU_ADAPTER_NAME={name} matches none of {names:?}"
                ))
            });
    }
    instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::from_env().unwrap_or(wgpu::PowerPreference::HighPerformance),
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        })
        .await
        .map_err(|e| {
            Error::NoAdapter(format!(
                "{e} (on Debian/Ubuntu without a GPU, `apt-get install -y mesa-vulkan-drivers` provides lavapipe)"
            ))
        })
}

/// One compiled kernel of an executable.
struct CompiledKernel {
    pipeline: Arc<wgpu::ComputePipeline>,
    source: KernelSource,
    workgroups: (u32, u32),
    /// The kernels dispatched right before it (`source.packs`).
    packs: Vec<(Arc<wgpu::ComputePipeline>, (u32, u32))>,
    /// Views of its scratch textures (`source.scratch`). Small ones are
    /// created with the executable and reused by every run (runs of one
    /// queue execute in order, so a later run's packing cannot overtake an
    /// earlier read), which saves creating them each step; larger ones
    /// (`None`) are created per run and freed with it, so that a cached
    /// executable does not hold hundreds of MB (an MNIST evaluation batch
    /// packs a 663 MB convolution operand).
    scratch: Vec<Option<wgpu::TextureView>>,
    /// The last few bind groups of each dispatch (the packs', then its
    /// own), newest first, with the resources they bind: a training step
    /// gets the same few sets of buffers from the pool step after step
    /// (alternating where a step's output outlives the next step), and
    /// creating bind groups was most of the host's encoding time (W5:
    /// ~12 µs a kernel on lavapipe).
    bind_groups: Vec<Mutex<Vec<CachedBindGroup>>>,
}

/// Bind groups kept per dispatch.
const BIND_GROUPS_KEPT: usize = 4;

/// Bind groups binding more than this many bytes of buffers are not kept.
const KEPT_BIND_GROUP_BYTES: u64 = 4 << 20;

/// A bind group and what it binds, to be reused when a run binds the same.
struct CachedBindGroup {
    resources: Vec<BoundResource>,
    group: wgpu::BindGroup,
}

/// One bound resource, compared by identity (wgpu handles compare so).
#[derive(PartialEq, Eq)]
enum BoundResource {
    Buffer(wgpu::Buffer, u64, Option<std::num::NonZeroU64>),
    Texture(wgpu::TextureView),
}

/// Scratch textures up to this size live as long as their executable.
const KEPT_SCRATCH_BYTES: u64 = 32 << 20;

/// Bytes of an `rgba32float` texture array of `(width, height, layers)`.
fn scratch_bytes((width, height, layers): (u32, u32, u32)) -> u64 {
    16 * width as u64 * height as u64 * layers as u64
}

/// A compiled graph: its kernels in order, and which outputs are written
/// into the buffer of which (donated) input.
pub(crate) struct Executable {
    kernels: Vec<CompiledKernel>,
    donations: Vec<(usize, usize)>,
    /// Per kernel: intermediates (written, not graph outputs) whose last
    /// reader it is, released for reuse once it is encoded.
    releases: Vec<Vec<usize>>,
}

/// Liveness of intermediates: each is released after the last kernel that
/// reads it (or right after the kernel that writes it, if none does).
fn plan_releases(key: &GraphKey, kernels: &[CompiledKernel]) -> Vec<Vec<usize>> {
    let mut last_use: Vec<Option<usize>> = vec![None; key.nodes.len()];
    for (k, kernel) in kernels.iter().enumerate() {
        for n in kernel
            .source
            .writes
            .iter()
            .copied()
            .chain(kernel.source.all_reads())
        {
            last_use[n] = Some(k);
        }
    }
    let mut releases = vec![Vec::new(); kernels.len()];
    for kernel in kernels {
        for &w in &kernel.source.writes {
            if let (false, Some(k)) = (key.outputs.contains(&w), last_use[w]) {
                releases[k].push(w);
            }
        }
    }
    releases
}

/// Chooses outputs that write into the buffer of a donated input (one the
/// graph alone still needs), so an in-place update such as `w -= lr * g`
/// allocates nothing. An input qualifies when at most one kernel reads it,
/// and that kernel reads it only at each invocation's own element: then
/// every element is read before the same invocation overwrites it. Returns
/// `(output node, input node)` pairs and regenerates the kernels involved.
fn plan_donations(
    graph: &Graph,
    target: &Target,
    groups: &[crate::schedule::KernelGroup],
    available: &[Vec<bool>],
    sources: &mut [KernelSource],
) -> Vec<(usize, usize)> {
    let nodes = &graph.key.nodes;
    let mut donations: Vec<(usize, usize)> = Vec::new();
    let mut aliases: Vec<Vec<(usize, usize)>> = vec![Vec::new(); groups.len()];
    for (x, node) in nodes.iter().enumerate() {
        let GKind::Input { slot, .. } = node.kind else {
            continue;
        };
        if !graph.key.donatable[slot] {
            continue;
        }
        let readers: Vec<usize> = (0..groups.len())
            .filter(|&k| sources[k].all_reads().any(|r| r == x))
            .collect();
        let elementwise = |k: &usize| groups[*k].kind == KernelKind::Elementwise;
        let candidates: Vec<usize> = match readers.as_slice() {
            [] => (0..groups.len()).filter(elementwise).collect(),
            [k] if elementwise(k) => vec![*k],
            _ => continue,
        };
        'kernels: for k in candidates {
            for (j, &o) in groups[k].outputs.iter().enumerate() {
                let taken = donations.iter().any(|&(d, _)| d == o);
                let fits = numel(&nodes[o].shape) == numel(&node.shape)
                    && nodes[o].dtype.wgsl_storage_type() == node.dtype.wgsl_storage_type();
                if taken || !fits {
                    continue;
                }
                let mut trial = aliases[k].clone();
                trial.push((x, j));
                let source = generate_kernel(
                    &graph.key,
                    &groups[k].outputs,
                    groups[k].numel,
                    &|i| available[k][i],
                    &trial,
                    target,
                );
                if !source.alias_violation {
                    sources[k] = source;
                    aliases[k] = trial;
                    donations.push((o, x));
                    break 'kernels;
                }
            }
        }
    }
    donations
}

/// Compiled work of one `Device`: executables by graph structure, pipelines
/// by WGSL text (a kernel shared by two graphs compiles once).
pub(crate) struct GpuCaches {
    executables: LruCache<u64, Vec<(GraphKey, Arc<Executable>)>>,
    pipelines: LruCache<String, Arc<wgpu::ComputePipeline>>,
    /// The last graph compiled for each set of output source locations, to
    /// tell a recompilation (same trace site, new structure) from a new
    /// graph, and to say what changed.
    by_site: LruCache<Vec<String>, GraphKey>,
    /// `LAZYWGPU_DUMP`: where newly compiled graphs are written.
    dump_dir: Option<std::path::PathBuf>,
}

impl GpuCaches {
    pub fn new(dump_dir: Option<std::path::PathBuf>) -> GpuCaches {
        GpuCaches {
            executables: LruCache::new(NonZeroUsize::new(512).expect("nonzero")),
            pipelines: LruCache::new(NonZeroUsize::new(2048).expect("nonzero")),
            by_site: LruCache::new(NonZeroUsize::new(256).expect("nonzero")),
            dump_dir,
        }
    }
}

/// Looks up or compiles the executable of `graph`.
fn executable(
    (ctx, target): (&GpuContext, &Target),
    caches: &mut GpuCaches,
    metrics: &Metrics,
    graph: &Graph,
) -> Result<Arc<Executable>> {
    if let Some(entries) = caches.executables.get(&graph.hash) {
        if let Some((_, exe)) = entries.iter().find(|(k, _)| *k == graph.key) {
            metrics.add("graph_cache_hits", 1);
            return Ok(exe.clone());
        }
    }
    metrics.add("graph_cache_misses", 1);
    let compile_start = std::time::Instant::now();
    let site: Vec<String> = graph
        .key
        .outputs
        .iter()
        .map(|&o| graph.locations[o].to_string())
        .collect();
    match caches.by_site.get(&site) {
        Some(before) => {
            metrics.add("recompiles", 1);
            log::debug!(
                "graph {:016x}: cache miss, recompiling the graph of outputs at {site:?}: {}",
                graph.hash,
                graph.key.first_difference(before)
            );
        }
        None => log::debug!(
            "graph {:016x}: cache miss, new graph of {} nodes with outputs at {site:?}",
            graph.hash,
            graph.key.nodes.len()
        ),
    }
    caches.by_site.put(site, graph.key.clone());
    let max_bindings = target.max_storage_buffers;
    let plan = schedule(&graph.key, max_bindings.saturating_sub(2).max(1));
    let nodes = &graph.key.nodes;
    let mut stored: Vec<bool> = nodes
        .iter()
        .map(|n| matches!(n.kind, GKind::Input { .. }))
        .collect();
    let mut groups = plan.kernels;
    let mut available = Vec::with_capacity(groups.len());
    let mut sources = Vec::with_capacity(groups.len());
    let mut k = 0;
    while k < groups.len() {
        let group = &groups[k];
        let source = match group.kind {
            KernelKind::Elementwise => generate_kernel(
                &graph.key,
                &group.outputs,
                group.numel,
                &|i| stored[i],
                &[],
                target,
            ),
            KernelKind::Root { node, write_root } => generate_root_kernel(
                &graph.key,
                node,
                write_root,
                &group.outputs,
                &|i| stored[i],
                target,
            ),
        };
        // The schedule bounds a kernel's outputs, but what it reads is
        // known only once its expressions are inlined: an elementwise
        // kernel over the binding limit is cut in two and both are
        // generated again (the second may read the first's outputs).
        if group.kind == KernelKind::Elementwise
            && source.buffer_bindings() > max_bindings
            && group.outputs.len() > 1
        {
            let half = group.outputs.len() / 2;
            let rest = groups[k].outputs.split_off(half);
            let numel = groups[k].numel;
            groups.insert(
                k + 1,
                crate::schedule::KernelGroup {
                    kind: KernelKind::Elementwise,
                    numel,
                    outputs: rest,
                },
            );
            continue;
        }
        available.push(stored.clone());
        for &o in &source.writes {
            stored[o] = true;
        }
        sources.push(source);
        k += 1;
    }
    let donations = plan_donations(graph, target, &groups, &available, &mut sources);
    if !donations.is_empty() {
        log::debug!(
            "graph {:016x}: outputs take over donated inputs {donations:?}",
            graph.hash
        );
    }
    let mut kernels = Vec::with_capacity(sources.len());
    for (k, source) in sources.into_iter().enumerate() {
        for s in std::iter::once(&source).chain(&source.packs) {
            let bindings = s.buffer_bindings();
            if bindings > max_bindings {
                return Err(Error::Compile {
                    graph_hash: graph.hash,
                    kernel: k,
                    message: format!(
                        "kernel needs {bindings} storage buffers, the adapter allows {max_bindings} (at {})",
                        graph.locations[source.writes.first().copied().unwrap_or(0)]
                    ),
                    source_code: s.wgsl.clone(),
                });
            }
        }
        let mut packs = Vec::with_capacity(source.packs.len());
        for p in &source.packs {
            let pipeline = pipeline(ctx, caches, metrics, &p.wgsl, graph.hash, k)?;
            packs.push((pipeline, grid(ctx, p.groups)));
        }
        let scratch = source
            .scratch
            .iter()
            .map(|&size| {
                (scratch_bytes(size) <= KEPT_SCRATCH_BYTES).then(|| scratch_texture(ctx, size))
            })
            .collect();
        let pipeline = pipeline(ctx, caches, metrics, &source.wgsl, graph.hash, k)?;
        let bind_groups = (0..=packs.len()).map(|_| Mutex::new(Vec::new())).collect();
        kernels.push(CompiledKernel {
            pipeline,
            workgroups: grid(ctx, source.groups),
            source,
            packs,
            scratch,
            bind_groups,
        });
    }
    metrics.add("graphs_compiled", 1);
    metrics.record("compile", compile_start.elapsed());
    if let Some(dir) = &caches.dump_dir {
        let sources: Vec<(&str, Vec<&str>)> = kernels
            .iter()
            .map(|k| {
                let packs = k.source.packs.iter().map(|p| p.wgsl.as_str()).collect();
                (k.source.wgsl.as_str(), packs)
            })
            .collect();
        crate::debug::dump(dir, graph, &sources);
    }
    let releases = plan_releases(&graph.key, &kernels);
    let exe = Arc::new(Executable {
        kernels,
        donations,
        releases,
    });
    match caches.executables.get_mut(&graph.hash) {
        Some(entries) => entries.push((graph.key.clone(), exe.clone())),
        None => {
            caches
                .executables
                .put(graph.hash, vec![(graph.key.clone(), exe.clone())]);
        }
    }
    Ok(exe)
}

/// An `rgba32float` texture array a matmul packs an operand into: written
/// as a storage texture, read by texel fetches.
fn scratch_texture(
    ctx: &GpuContext,
    (width, height, layers): (u32, u32, u32),
) -> wgpu::TextureView {
    ctx.device
        .create_texture(&wgpu::TextureDescriptor {
            label: Some("lazywgpu matmul operand"),
            size: wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: layers,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba32Float,
            usage: wgpu::TextureUsages::STORAGE_BINDING | wgpu::TextureUsages::TEXTURE_BINDING,
            view_formats: &[],
        })
        .create_view(&wgpu::TextureViewDescriptor {
            // An array view even of one layer: the kernels declare arrays.
            dimension: Some(wgpu::TextureViewDimension::D2Array),
            ..Default::default()
        })
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
    wgsl: &str,
    graph_hash: u64,
    kernel: usize,
) -> Result<Arc<wgpu::ComputePipeline>> {
    if let Some(p) = caches.pipelines.get(wgsl) {
        metrics.add("pipeline_cache_hits", 1);
        return Ok(p.clone());
    }
    let compile_error = |message: String| Error::Compile {
        graph_hash,
        kernel,
        message,
        source_code: wgsl.to_string(),
    };
    validate_wgsl(wgsl).map_err(compile_error)?;
    let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = ctx
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(wgsl.into()),
        });
    let pipeline = ctx
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
    if let Some(e) = pollster::block_on(scope.pop()) {
        return Err(compile_error(e.to_string()));
    }
    metrics.add("kernels_compiled", 1);
    let pipeline = Arc::new(pipeline);
    caches.pipelines.put(wgsl.to_string(), pipeline.clone());
    Ok(pipeline)
}

/// Runs `graph`: compiles or finds its executable, allocates its written
/// buffers, encodes one command buffer and submits it without waiting.
/// Returns the storage of each output in `graph.key.outputs` order.
/// With `readback`, the first output is also copied into that staging
/// buffer by the same command buffer: reading a result then costs one
/// submission and one wait instead of two of each.
pub(crate) fn run_graph(
    (ctx, target): (&GpuContext, &Target),
    caches: &Mutex<GpuCaches>,
    pool: &Arc<BufferPool>,
    graph: &Graph,
    readback: Option<&wgpu::Buffer>,
) -> Result<Vec<Storage>> {
    let metrics = &pool.metrics;
    let exe = {
        let mut caches = caches.lock().unwrap_or_else(|e| e.into_inner());
        executable((ctx, target), &mut caches, metrics, graph)?
    };
    let encode_start = std::time::Instant::now();
    let nodes = &graph.key.nodes;
    // Stored data each node is read from, and the buffer each written node
    // is written to. They differ for an output that is itself an input (a
    // strided view being made contiguous).
    let mut buffers: Vec<Option<Arc<GpuBuffer>>> = vec![None; nodes.len()];
    let mut written: Vec<Option<Arc<GpuBuffer>>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if let GKind::Input { slot, .. } = n.kind {
            match &graph.inputs[slot].buffer {
                DataBuffer::Gpu(b) => buffers[i] = Some(b.clone()),
                DataBuffer::Cpu(_) => {
                    return Err(Error::Device {
                        during: format!("graph {:016x}", graph.hash),
                        message: format!(
                            "input created at {} lives on the CPU device; tensors of different devices cannot be mixed",
                            graph.locations[i]
                        ),
                    });
                }
            }
        }
    }
    for &(o, x) in &exe.donations {
        written[o] = buffers[x].clone();
        metrics.add("buffers_donated", 1);
    }
    for &o in &graph.key.outputs {
        if written[o].is_none() {
            // Empty outputs are never written by a kernel.
            written[o] = Some(ctx.alloc(pool, numel(&nodes[o].shape), "empty output")?);
        }
    }
    let params = if graph.params.is_empty() {
        None
    } else {
        metrics.add("params_uploaded_bytes", graph.params.len() as u64 * 4);
        Some(ctx.upload(pool, &graph.params)?)
    };

    let mut encoder = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    // Profiling: one pass per kernel, with timestamps at both ends.
    let queries = ctx.profile.as_ref().map(|_| {
        ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("lazywgpu kernel timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: 2 * exe.kernels.len().max(1) as u32,
        })
    });
    {
        let mut pass: Option<wgpu::ComputePass<'static>> = None;
        for (ki, k) in exe.kernels.iter().enumerate() {
            // Buffers are taken as late as possible and intermediates given
            // back right after their last reader, so later kernels of the
            // same pass reuse them (wgpu orders the dispatches' accesses).
            for &w in &k.source.writes {
                if written[w].is_none() {
                    let what = format!(
                        "output of {} at {}",
                        op_name(&nodes[w].kind),
                        graph.locations[w]
                    );
                    written[w] = Some(ctx.alloc(pool, numel(&nodes[w].shape), &what)?);
                }
            }
            let scratch: Vec<wgpu::TextureView> = k
                .scratch
                .iter()
                .zip(&k.source.scratch)
                .map(|(kept, &size)| match kept {
                    Some(view) => view.clone(),
                    None => scratch_texture(ctx, size),
                })
                .collect();
            // Whether a scratch texture is created for this run only.
            let per_run = k.scratch.iter().any(Option::is_none);
            let bind = |d: usize, pipeline: &wgpu::ComputePipeline, source: &KernelSource| {
                bind_group(
                    (ctx, target.binding_part_bytes),
                    graph.hash,
                    (pipeline, source),
                    params.as_ref(),
                    (&buffers, &written),
                    (&scratch, per_run),
                    (&k.bind_groups[d], metrics),
                )
            };
            let mut dispatches = Vec::with_capacity(1 + k.packs.len());
            for (d, (source, (pipeline, workgroups))) in
                k.source.packs.iter().zip(&k.packs).enumerate()
            {
                dispatches.push((pipeline, bind(d, pipeline, source)?, *workgroups));
            }
            let main = bind(k.packs.len(), &k.pipeline, &k.source)?;
            dispatches.push((&k.pipeline, main, k.workgroups));
            if queries.is_some() || pass.is_none() {
                drop(pass.take());
                let timestamp_writes =
                    queries
                        .as_ref()
                        .map(|query_set| wgpu::ComputePassTimestampWrites {
                            query_set,
                            beginning_of_pass_write_index: Some(2 * ki as u32),
                            end_of_pass_write_index: Some(2 * ki as u32 + 1),
                        });
                pass = Some(
                    encoder
                        .begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: None,
                            timestamp_writes,
                        })
                        .forget_lifetime(),
                );
            }
            let Some(p) = pass.as_mut() else {
                unreachable!("a pass was begun above")
            };
            for (pipeline, bind_group, workgroups) in &dispatches {
                p.set_pipeline(pipeline);
                p.set_bind_group(0, bind_group, &[]);
                p.dispatch_workgroups(workgroups.0, workgroups.1, 1);
            }
            for &n in &exe.releases[ki] {
                written[n] = None;
            }
            if queries.is_some() {
                // Profiling: each kernel runs alone (its own submission,
                // waited for), so that a driver that overlaps independent
                // dispatches, as lavapipe does, cannot blur the times.
                drop(pass.take());
                let done = std::mem::replace(
                    &mut encoder,
                    ctx.device
                        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default()),
                );
                ctx.submit(done.finish());
                ctx.wait()?;
            }
        }
    }
    metrics.add("kernel_launches", exe.kernels.len() as u64);
    if let (Some(staging), Some(&o)) = (readback, graph.key.outputs.first()) {
        let Some(buf) = written[o].as_ref() else {
            return Err(Error::Device {
                during: format!("graph {:016x}", graph.hash),
                message: format!("output node {o} has no buffer"),
            });
        };
        encoder.copy_buffer_to_buffer(buf.buffer(), 0, staging, 0, Some(staging.size()));
    }
    let timestamps = queries.as_ref().map(|q| {
        let bytes = 16 * exe.kernels.len().max(1) as u64;
        let resolved = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("lazywgpu timestamps"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("lazywgpu timestamps readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.resolve_query_set(q, 0..2 * exe.kernels.len() as u32, &resolved, 0);
        encoder.copy_buffer_to_buffer(&resolved, 0, &staging, 0, Some(bytes));
        staging
    });
    ctx.submit(encoder.finish());
    metrics.record("encode_submit", encode_start.elapsed());
    if let (Some(staging), Some(profile)) = (timestamps, ctx.profile.as_ref()) {
        let ticks: Vec<u64> =
            pollster::block_on(ctx.read_mapped(&staging, "reading kernel timestamps"))?;
        let period = ctx.queue.get_timestamp_period() as f64;
        for (k, pair) in exe.kernels.iter().zip(ticks.chunks_exact(2)) {
            let label = match k.source.writes.first() {
                Some(&w) => format!(
                    "{} {:?} ({} outputs) @ {}",
                    op_name(&nodes[w].kind),
                    nodes[w].shape,
                    k.source.writes.len(),
                    graph.locations[w]
                ),
                None => "kernel without outputs".to_string(),
            };
            profile.add(label, pair[1].saturating_sub(pair[0]) as f64 * period);
        }
    }
    metrics.add("graphs_executed", 1);
    ctx.take_error(&format!("graph {:016x}", graph.hash))?;

    graph
        .key
        .outputs
        .iter()
        .map(|&o| {
            let buffer = written[o].clone().ok_or_else(|| Error::Device {
                during: format!("graph {:016x}", graph.hash),
                message: format!("output node {o} has no buffer"),
            })?;
            Ok(Storage {
                buffer: DataBuffer::Gpu(buffer),
                layout: Layout::contiguous(&nodes[o].shape),
            })
        })
        .collect()
}

/// The buffer a node is stored in during a run, if any yet.
type NodeBuffer = Option<Arc<GpuBuffer>>;

/// The bind group of `source` (a kernel or one of its packing kernels)
/// for `pipeline`, or one that `cache` holds binding the same resources: the parameter buffer, its reads and its writes (each in
/// binding-sized parts), then its scratch textures. `buffers` and
/// `written` are the stored data each node is read from and the buffer
/// each written node goes to.
/// Buffers past `part_bytes` are bound in parts of that size.
fn bind_group(
    (ctx, part_bytes): (&GpuContext, usize),
    graph_hash: u64,
    (pipeline, source): (&wgpu::ComputePipeline, &KernelSource),
    params: Option<&Arc<GpuBuffer>>,
    (buffers, written): (&[NodeBuffer], &[NodeBuffer]),
    (scratch, per_run_scratch): (&[wgpu::TextureView], bool),
    (cache, metrics): (&Mutex<Vec<CachedBindGroup>>, &Metrics),
) -> Result<wgpu::BindGroup> {
    let mut resources = Vec::new();
    if source.uses_params {
        let Some(p) = params else {
            return Err(Error::Device {
                during: format!("graph {graph_hash:016x}"),
                message: "kernel reads parameters but the graph has none".into(),
            });
        };
        let size = source.uniform_params.and_then(std::num::NonZeroU64::new);
        resources.push(BoundResource::Buffer(p.buffer().clone(), 0, size));
    }
    let reads = source
        .reads
        .iter()
        .zip(&source.read_parts)
        .map(|(&n, &p)| (n, p, buffers[n].as_ref().or(written[n].as_ref())));
    let writes = source
        .writes
        .iter()
        .zip(&source.write_parts)
        .map(|(&n, &p)| (n, p, written[n].as_ref()));
    for (n, parts, b) in reads.chain(writes) {
        let Some(b) = b else {
            return Err(Error::Device {
                during: format!("graph {graph_hash:016x}"),
                message: format!("node {n} is read before it is written"),
            });
        };
        // Part j covers bytes [j * part, (j + 1) * part) of the buffer
        // (clipped to its size), never more than one storage binding may
        // hold.
        let part = part_bytes as u64;
        let size = b.buffer().size();
        for j in 0..parts as u64 {
            let offset = j * part;
            let len = std::num::NonZeroU64::new((size - offset).min(part));
            resources.push(BoundResource::Buffer(b.buffer().clone(), offset, len));
        }
    }
    for t in &source.textures {
        resources.push(BoundResource::Texture(scratch[t.slot].clone()));
    }
    let mut cached = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = cached.iter().position(|c| c.resources == resources) {
        metrics.add("bind_group_reuses", 1);
        let hit = cached.remove(i);
        let group = hit.group.clone();
        cached.insert(0, hit);
        return Ok(group);
    }
    let entries: Vec<wgpu::BindGroupEntry> = resources
        .iter()
        .enumerate()
        .map(|(i, r)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: match r {
                BoundResource::Buffer(buffer, offset, size) => {
                    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer,
                        offset: *offset,
                        size: *size,
                    })
                }
                BoundResource::Texture(view) => wgpu::BindingResource::TextureView(view),
            },
        })
        .collect();
    let group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    // Only small bind groups are kept: a kept group keeps its buffers
    // alive past the pool's limit, and per-run scratch textures are
    // large by definition.
    let bytes: u64 = resources
        .iter()
        .map(|r| match r {
            BoundResource::Buffer(b, _, size) => size.map_or(b.size(), |s| s.get()),
            BoundResource::Texture(_) => 0,
        })
        .sum();
    if per_run_scratch || bytes > KEPT_BIND_GROUP_BYTES {
        return Ok(group);
    }
    cached.truncate(BIND_GROUPS_KEPT - 1);
    cached.insert(
        0,
        CachedBindGroup {
            resources,
            group: group.clone(),
        },
    );
    Ok(group)
}

fn op_name(kind: &GKind) -> &'static str {
    match kind {
        GKind::Input { .. } => "input",
        GKind::Op { op, .. } => op.name(),
    }
}
