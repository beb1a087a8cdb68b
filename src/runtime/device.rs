//! `Device`: where tensors live and graphs run.

mod kernels;

use crate::DType;
use crate::graph::GKind;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::DeviceConfig;
use crate::cpu;
use crate::error::{Error, Result};
use crate::graph::{Graph, Node};
use crate::kernel::Target;
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::runtime::gpu::{GpuCaches, GpuContext, run_graph};
use crate::runtime::guards::{Guards, LiveTensorGroup, group_by_line};
use crate::runtime::overlap::StepClock;
use crate::runtime::pool::BufferPool;
use crate::runtime::storage::{DataBuffer, Storage};
use crate::shape::numel;
use crate::tensor::{Handle, LiveTensors};
use crate::tune::classes::ClassTuner;

/// A device: the wgpu GPU backend or the ndarray CPU reference backend.
///
/// Cheap to clone (a shared handle). Each `Device` value made by
/// [`Device::gpu`] or [`Device::cpu`] has its own metrics, caches, random
/// seed and set of live tensors; GPU devices share one wgpu device per
/// process.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

pub(crate) struct DeviceInner {
    pub backend: Backend,
    pub metrics: Arc<Metrics>,
    /// Idle GPU buffers of this device (and its memory gauges).
    pool: Arc<BufferPool>,
    rng: Mutex<RngState>,
    /// The tensors the program still holds (the front end's record).
    live: LiveTensors,
    fusion: AtomicBool,
    verify: AtomicBool,
    /// Anomaly mode (see `DeviceConfig::checks`).
    checks: AtomicBool,
    /// Test hook: corrupt the next GPU result (to prove verify catches it).
    corrupt_next: AtomicBool,
    gpu_caches: Mutex<GpuCaches>,
    /// Graph-growth and leak warnings.
    guards: Guards,
    /// Per-step host, device and hidden time (GPU devices).
    step_clock: StepClock,
    config: DeviceConfig,
    /// What tuning chose for this device, one per kind tuned and one per
    /// matmul class tuned (GPU devices with tuning on; shared with the
    /// per-class tuner in `gpu_caches`).
    pub tuning: Arc<Mutex<Vec<crate::Tuning>>>,
}

pub(crate) enum Backend {
    /// The process's wgpu device, and what this device generates code for.
    Gpu(Arc<GpuContext>, Box<Target>),
    Cpu,
}

/// The device's generator (`cpu::rng`'s scheme).
struct RngState {
    /// The Philox key.
    seed: u64,
    /// The stream position of the next draw.
    counter: u64,
}

impl Device {
    fn with_backend(backend: Backend, config: DeviceConfig) -> Device {
        let metrics = Arc::new(Metrics::new());
        let tuning = Arc::new(Mutex::new(Vec::new()));
        let mut gpu_caches = GpuCaches::new(config.dump_dir.clone(), config.recompile_budget);
        gpu_caches.check_binds = config.check_binds;
        if let Backend::Gpu(ctx, _) = &backend {
            gpu_caches.matmul_classes =
                ClassTuner::new(ctx, &config, tuning.clone(), metrics.clone());
        }
        Device {
            inner: Arc::new(DeviceInner {
                backend,
                pool: BufferPool::new(metrics.clone(), config.memory_limit),
                metrics,
                rng: Mutex::new(RngState {
                    seed: 0,
                    counter: 0,
                }),
                live: LiveTensors::new(),
                fusion: AtomicBool::new(config.fusion),
                verify: AtomicBool::new(config.verify),
                checks: AtomicBool::new(config.checks),
                corrupt_next: AtomicBool::new(false),
                gpu_caches: Mutex::new(gpu_caches),
                guards: Guards::new(),
                step_clock: StepClock::default(),
                config,
                tuning,
            }),
        }
    }

    /// A device on the best wgpu adapter (a discrete GPU before an
    /// integrated one). `WGPU_BACKEND` restricts the backends tried and
    /// `WGPU_ADAPTER_NAME` picks an adapter by a substring of its name.
    /// The device is given the adapter's own limits.
    /// The environment's switches apply ([`DeviceConfig::from_env`]).
    pub fn gpu() -> Result<Device> {
        Device::gpu_with(DeviceConfig::from_env())
    }

    /// [`Device::gpu`] with the settings of `config` (the environment's
    /// per-device switches are not read).
    pub fn gpu_with(config: DeviceConfig) -> Result<Device> {
        Ok(Device::on_context(GpuContext::shared()?, config))
    }

    /// A device on the process's adapter generating code for `target` as
    /// written, tuning off (tests of a GPU's lowering on lavapipe); `None`
    /// without an adapter, a panic then where `LAZYWGPU_REQUIRE_GPU` is set.
    #[cfg(test)]
    pub(crate) fn gpu_for_target(target: Target) -> Option<Device> {
        let Ok(ctx) = GpuContext::shared() else {
            let required = crate::config::ProcessConfig::get().require_gpu;
            assert!(
                !required,
                "LAZYWGPU_REQUIRE_GPU is set but no adapter was found"
            );
            return None;
        };
        // Tuning off: class tuning would replace the target's matmul.
        let config = DeviceConfig {
            autotune: Some(crate::config::Autotune::Off),
            ..DeviceConfig::default()
        };
        Some(Device::on_target(ctx, target, config))
    }

    /// A device on `ctx`'s adapter, generating code for it, with the
    /// matmul kernel the config names, else the tuned one (read from the
    /// tuning cache or timed now; see [`DeviceConfig::autotune`]), else
    /// the adapter's built-in choice; and reductions chosen by the tuned
    /// rule where there is one (`tune::reduce`).
    pub(crate) fn on_context(ctx: Arc<GpuContext>, config: DeviceConfig) -> Device {
        let started = std::time::Instant::now();
        let matmul = crate::tune::matmul::tune(&ctx, &config);
        let reduce = crate::tune::reduce::tune(&ctx, &config);
        let tuned = matmul
            .as_ref()
            .and_then(|t| crate::MatmulChoice::named(&t.winner));
        let alignment = ctx.limits.min_storage_buffer_offset_alignment as u64;
        let mut target = ctx
            .target(config.matmul.or(tuned))
            .forcing_reduce(config.reduce)
            .with_max_binding(config.max_binding_bytes, alignment);
        if let Some(rule) = reduce
            .as_ref()
            .and_then(|t| crate::kernel::ReduceRule::parse(&t.winner))
        {
            target = target.with_reduce_rule(rule);
        }
        let dev = Device::with_backend(Backend::Gpu(ctx, Box::new(target)), config);
        let tunings: Vec<crate::Tuning> = matmul.into_iter().chain(reduce).collect();
        if !tunings.is_empty() {
            dev.inner.metrics.record("autotune", started.elapsed());
        }
        for t in &tunings {
            log::info!("autotune {t}");
        }
        if let Ok(mut slot) = dev.inner.tuning.lock() {
            *slot = tunings;
        }
        dev
    }

    /// A device on `ctx`'s adapter generating code for `target` as given
    /// (the tuner's candidates), nothing tuned.
    pub(crate) fn on_target(ctx: Arc<GpuContext>, target: Target, config: DeviceConfig) -> Device {
        Device::with_backend(Backend::Gpu(ctx, Box::new(target)), config)
    }

    /// One device per GPU adapter of the machine (each discrete or
    /// integrated GPU once, whichever backends offer it; a CPU adapter
    /// such as lavapipe only where there is no GPU), the one
    /// [`Device::gpu`] uses first. For data-parallel training on several
    /// GPUs in one process: see [`crate::distributed::ProcessGroup::local`].
    /// The environment's switches apply.
    pub fn gpus() -> Result<Vec<Device>> {
        let config = DeviceConfig::from_env();
        Ok(GpuContext::all()?
            .into_iter()
            .map(|ctx| Device::on_context(ctx, config.clone()))
            .collect())
    }

    /// A device on the CPU reference backend (ndarray); the environment's
    /// switches apply.
    pub fn cpu() -> Device {
        Device::cpu_with(DeviceConfig::from_env())
    }

    /// [`Device::cpu`] with the settings of `config`.
    pub fn cpu_with(config: DeviceConfig) -> Device {
        Device::with_backend(Backend::Cpu, config)
    }

    /// The settings the device was made with (fusion as it was then; see
    /// [`Device::fusion`] for now).
    pub fn config(&self) -> &DeviceConfig {
        &self.inner.config
    }

    /// Whether this device runs on wgpu.
    pub fn is_gpu(&self) -> bool {
        matches!(self.inner.backend, Backend::Gpu(..))
    }

    /// A one-line description: the adapter's name and backend, or `cpu`.
    pub fn name(&self) -> String {
        match &self.inner.backend {
            Backend::Gpu(ctx, _) => format!(
                "{} ({:?}, {:?})",
                ctx.info.name, ctx.info.backend, ctx.info.device_type
            ),
            Backend::Cpu => "cpu (ndarray reference)".to_string(),
        }
    }

    /// Runs every pending tensor the program still holds, as one graph, and
    /// returns once the work is submitted (it does not wait for the device).
    ///
    /// Only bases are computed: a view is a window on its base, so after
    /// the step it reads the stored base (and still aliases it).
    pub fn mark_step(&self) -> Result<()> {
        let (pending, live) = self.inner.live.pending_bases();
        if !pending.is_empty() {
            self.realize(&pending)?;
        }
        LiveTensors::after_step(&live);
        self.inner.guards.note_step(&live, &self.inner.metrics);
        if let Backend::Gpu(ctx, _) = &self.inner.backend {
            self.inner.step_clock.step(&ctx.clock, &self.inner.metrics);
        }
        Ok(())
    }

    /// The tensors the program still holds on this device, grouped by the
    /// source line that recorded their current values, the largest groups
    /// first: where to look when memory grows from step to step (see also
    /// the leak warning in [`MetricsSnapshot::warnings`]).
    pub fn live_tensors(&self) -> Vec<LiveTensorGroup> {
        group_by_line(&self.inner.live.handles())
    }

    /// Waits until all work submitted to the device has finished.
    pub fn wait(&self) -> Result<()> {
        match &self.inner.backend {
            Backend::Gpu(ctx, _) => self.inner.metrics.time("device_wait", || ctx.wait()),
            Backend::Cpu => Ok(()),
        }
    }

    /// A snapshot of the device's counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Where device memory went at the highest peak since the metrics
    /// were last reset ([`Device::reset_metrics`]): the graph run that
    /// reached it, the kernel it was reached at, and the largest buffers
    /// of that graph then, each with the source line of the value it
    /// holds (a parameter, an activation kept for the backward pass, an
    /// optimiser's state, a scratch texture). `None` on the CPU backend,
    /// which keeps no device memory, and before any graph ran.
    ///
    /// ```
    /// # use lazywgpu::{Device, Tensor};
    /// let dev = Device::default();
    /// let x = Tensor::ones([256, 256], &dev);
    /// let y = (x.matmul(&x) + 1.0).relu().sum_all();
    /// dev.mark_step().unwrap();
    /// if let Some(report) = dev.memory_report() {
    ///     println!("{report}"); // peak, kernel, largest buffers with their source lines
    /// }
    /// # drop(y);
    /// ```
    pub fn memory_report(&self) -> Option<crate::MemoryReport> {
        self.inner.pool.report()
    }

    /// Adds a sample to timer `name` (for work timed outside the
    /// runtime, such as a data loader's waits).
    pub(crate) fn record_timer(&self, name: &'static str, elapsed: std::time::Duration) {
        self.inner.metrics.record(name, elapsed);
    }

    /// Sets every counter back to zero (and forgets kernel timings).
    pub fn reset_metrics(&self) {
        self.inner.metrics.reset();
        self.inner.pool.clear_report();
        if let Backend::Gpu(ctx, _) = &self.inner.backend {
            if let Some(p) = &ctx.profile {
                p.clear();
            }
        }
    }

    /// Time per kernel, dearest first, under a line naming the clock (the
    /// device's timestamps, or the wall clock on CPU adapters), with
    /// `LAZYWGPU_PROFILE=1` on a GPU adapter (`None` otherwise). Each
    /// kernel runs alone: it shows where time goes, not a loop's time.
    pub fn kernel_profile(&self) -> Option<String> {
        match &self.inner.backend {
            Backend::Gpu(ctx, _) => ctx.profile.as_ref().map(|p| p.report()),
            Backend::Cpu => None,
        }
    }

    /// Seeds `rand`/`randn` on this device; the same seed gives the same
    /// numbers on the GPU and on the CPU reference.
    pub fn manual_seed(&self, seed: u64) {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        *rng = RngState { seed, counter: 0 };
    }

    /// Moves the generator to position `counter` of its seed's stream (the
    /// next `rand`/`randn` starts there): for tests of the stream past
    /// 2^32 numbers, without drawing 2^32 numbers first.
    #[doc(hidden)]
    pub fn set_rng_counter(&self, counter: u64) {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        rng.counter = counter;
    }

    /// The generator's seed and position in its stream (the next draw's
    /// counter).
    pub(crate) fn rng_state(&self) -> (u64, u64) {
        let rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        (rng.seed, rng.counter)
    }

    /// Puts the generator at `(seed, counter)` (from [`Device::rng_state`]).
    pub(crate) fn set_rng_state(&self, (seed, counter): (u64, u64)) {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        *rng = RngState { seed, counter };
    }

    /// Turns fusion on or off for graphs compiled from now on (off: one
    /// kernel per computing op, as `LAZYWGPU_NO_FUSION=1` does).
    pub fn set_fusion(&self, on: bool) {
        self.inner.fusion.store(on, Ordering::Relaxed);
    }

    /// Turns verification on or off (as `LAZYWGPU_VERIFY=1` does): every
    /// GPU graph is also run on the CPU reference and compared, and a
    /// mismatch is an [`Error::VerifyMismatch`] naming the op and the
    /// source line. Each verified step waits for the device.
    pub fn set_verify(&self, on: bool) {
        self.inner.verify.store(on, Ordering::Relaxed);
    }

    /// Test hook: the next GPU graph's first output is overwritten with a
    /// wrong value after it runs, as a miscompiled kernel would leave it.
    #[doc(hidden)]
    pub fn debug_corrupt_next_result(&self) {
        self.inner.corrupt_next.store(true, Ordering::Relaxed);
    }

    /// Allows each trace site (the source lines of a graph's outputs)
    /// `budget` recompiles after its first compile; the next one fails
    /// with [`Error::RecompileBudget`] naming the site, what changed and
    /// the line that changed it (`None`: no limit, the default; each
    /// recompile is still a warning in the log and in
    /// [`MetricsSnapshot::warnings`]). The CPU reference compiles nothing,
    /// so the budget concerns GPU devices.
    pub fn set_recompile_budget(&self, budget: impl Into<Option<usize>>) {
        self.gpu_caches().recompile_budget = budget.into();
    }

    /// Turns anomaly mode on or off (as `LAZYWGPU_CHECK=1` does): every
    /// kernel also reports whether an op produced NaN or infinity from
    /// finite values (kernel roots such as reductions and matmuls: NaN)
    /// and whether an indexing op read an index out of range; the first
    /// such op (in graph order) makes the step or read that ran it return
    /// [`Error::NonFinite`] or [`Error::IndexOutOfRange`] with the op and
    /// the source line that recorded it. Checked graphs compile apart from
    /// unchecked ones and wait for the device; with the mode off nothing
    /// is checked and nothing costs. The CPU reference checks the same.
    pub fn set_checks(&self, on: bool) {
        self.inner.checks.store(on, Ordering::Relaxed);
    }

    /// Whether anomaly mode is on (see [`Device::set_checks`]).
    pub fn checks(&self) -> bool {
        self.inner.checks.load(Ordering::Relaxed)
    }

    /// Whether graphs are fused.
    pub fn fusion(&self) -> bool {
        self.inner.fusion.load(Ordering::Relaxed)
    }

    /// The loop iterations each of `loops` long loops of one kernel may
    /// run on this device (`Target::loop_budget`; `None`: no limit, as on
    /// the CPU reference).
    pub(crate) fn loop_budget(&self, loops: usize) -> Option<usize> {
        match &self.inner.backend {
            Backend::Gpu(_, target) => target.loop_budget(loops),
            Backend::Cpu => None,
        }
    }

    /// The runtime parameters of `count` fresh random numbers,
    /// `[seed_lo, seed_hi, offset_lo, offset_hi]` (`cpu::rng`'s scheme): the
    /// whole 64-bit counter, so that the stream does not repeat after 2^32
    /// numbers.
    pub(crate) fn next_rng(&self, count: usize) -> [u32; 4] {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        let counter = rng.counter;
        rng.counter = rng.counter.wrapping_add(count as u64);
        [
            rng.seed as u32,
            (rng.seed >> 32) as u32,
            counter as u32,
            (counter >> 32) as u32,
        ]
    }

    /// The pending values the program still holds (bases only).
    pub(super) fn pending_bases(&self) -> Vec<Arc<Node>> {
        self.inner.live.pending_bases().0
    }

    pub(crate) fn register(&self, handle: &Arc<Handle>) {
        self.inner.live.register(handle);
    }

    /// Computes `nodes` (as one graph) and stores their results in them.
    pub(crate) fn realize(&self, nodes: &[Arc<Node>]) -> Result<()> {
        self.realize_reading(nodes, None)
    }

    /// `realize`, also copying the results of the first `n` nodes, one
    /// after another, into `readback` `(staging, n)` in the same
    /// submission (those nodes must be pending and distinct).
    fn realize_reading(
        &self,
        nodes: &[Arc<Node>],
        readback: Option<(&wgpu::Buffer, usize)>,
    ) -> Result<()> {
        let graph = self.inner.metrics.time("collect", || {
            Graph::collect_with(nodes, self.fusion(), self.checks())
        });
        self.inner.guards.note_graph(&graph, &self.inner.metrics);
        // The size of the work each step hands the compiler, counted so that
        // a test can bound it without timing it (`tests/graph_scale.rs`).
        self.inner
            .metrics
            .add("graph_nodes", graph.key.nodes.len() as u64);
        // Verification copies the inputs first: an output may take over an
        // input's buffer (donation).
        let verify_inputs = match &self.inner.backend {
            Backend::Gpu(ctx, _) if self.inner.verify.load(Ordering::Relaxed) => {
                Some(host_copies(ctx, &graph)?)
            }
            _ => None,
        };
        let results = match &self.inner.backend {
            Backend::Gpu(ctx, target) => run_graph(
                (ctx, target),
                &self.inner.gpu_caches,
                &self.inner.pool,
                &graph,
                readback,
            )
            .map_err(|e| self.with_largest_values(e))?,
            Backend::Cpu => self.run(&graph)?,
        };
        if let Backend::Gpu(ctx, _) = &self.inner.backend {
            if self.inner.corrupt_next.swap(false, Ordering::Relaxed) {
                corrupt(
                    ctx,
                    &results[0],
                    graph.key.nodes[graph.key.outputs[0]].dtype,
                );
            }
            if let Some(inputs) = verify_inputs {
                verify(ctx, &graph, inputs, &results)?;
            }
        }
        for (node, storage) in graph.output_nodes.iter().zip(results) {
            node.set_ready(storage);
        }
        Ok(())
    }

    /// `e` with the values the program holds, largest first, where it is
    /// an [`Error::OutOfMemory`]: what to drop or shrink (after the
    /// failing graph's own largest buffers, where the run named them).
    fn with_largest_values(&self, e: Error) -> Error {
        e.with_largest(|largest| {
            let held = self
                .live_tensors()
                .iter()
                .take(5)
                .map(|g| {
                    format!(
                        "{} bytes in {} tensors from {}",
                        g.bytes, g.count, g.location
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            match (held.is_empty(), largest.starts_with("in graph")) {
                // The run named its own buffers: the tensors held outside
                // it follow.
                (false, true) => format!("{largest}; tensors held: {held}"),
                (true, true) => largest,
                (false, false) => held,
                (true, false) => "none".to_string(),
            }
        })
    }

    fn run(&self, graph: &Graph) -> Result<Vec<Storage>> {
        match &self.inner.backend {
            Backend::Gpu(ctx, target) => run_graph(
                (ctx, target),
                &self.inner.gpu_caches,
                &self.inner.pool,
                graph,
                None,
            ),
            Backend::Cpu => {
                self.inner.metrics.add("graphs_executed", 1);
                cpu::run_graph(graph)
            }
        }
    }

    /// Whether GPU results are read back after their run (verify mode, or
    /// the corruption test hook), so no readback rides along with it.
    pub(super) fn checking_results(&self) -> bool {
        self.inner.verify.load(Ordering::Relaxed) || self.inner.corrupt_next.load(Ordering::Relaxed)
    }

    /// Computes `nodes` and copies the first `reads` of them (pending and
    /// distinct), one after another, into a new staging buffer of `words`
    /// 32-bit words in the same submission; counts the readback.
    pub(super) fn realize_into_staging(
        &self,
        ctx: &GpuContext,
        nodes: &[Arc<Node>],
        reads: usize,
        words: usize,
    ) -> Result<wgpu::Buffer> {
        let staging = ctx.staging(words)?;
        self.realize_reading(nodes, Some((&staging, reads)))?;
        self.inner.metrics.add("readbacks", 1);
        self.inner.metrics.add("bytes_downloaded", words as u64 * 4);
        Ok(staging)
    }

    /// The elements of `node` in row-major order, as 32-bit patterns.
    /// Computes the node first if it is pending; a strided view is made
    /// contiguous by a copy graph (which leaves the node itself a view).
    pub(crate) async fn read_bits(&self, node: &Arc<Node>) -> Result<Vec<u32>> {
        let start = std::time::Instant::now();
        let bits = self.read_bits_untimed(node).await;
        self.inner.metrics.record("readback", start.elapsed());
        bits
    }

    async fn read_bits_untimed(&self, node: &Arc<Node>) -> Result<Vec<u32>> {
        let count = numel(&node.shape);
        if node.is_pending() {
            // A pending result is copied out by the command buffer that
            // computes it (one submission and one wait; W6 and every
            // `item()` are this round trip). Not while verifying or
            // corrupting results on purpose: those read them afterwards.
            if let Backend::Gpu(ctx, _) = &self.inner.backend {
                if count > 0 && !self.checking_results() {
                    let words = node.dtype.words(count);
                    let staging =
                        self.realize_into_staging(ctx, std::slice::from_ref(node), 1, words)?;
                    let read: Vec<u32> = ctx.read_mapped(&staging, "readback").await?;
                    return Ok(node.dtype.unpack(read, 0, count));
                }
            }
            self.realize(std::slice::from_ref(node))?;
        }
        let storage = node.storage().ok_or_else(|| Error::Device {
            during: "readback".into(),
            message: "node still pending after it was computed".into(),
        })?;
        let storage = if storage.layout.is_row_major(&node.shape) || count == 0 {
            storage
        } else {
            let graph = Graph::collect(std::slice::from_ref(node), true);
            self.run(&graph)?.remove(0)
        };
        self.inner.metrics.add("readbacks", 1);
        self.inner
            .metrics
            .add("bytes_downloaded", node.dtype.words(count) as u64 * 4);
        match (&self.inner.backend, &storage.buffer) {
            (Backend::Gpu(ctx, _), DataBuffer::Gpu(buf)) => {
                ctx.download(buf, node.dtype, storage.layout.offset, count)
                    .await
            }
            // An empty view's offset may lie past the end of its buffer.
            (Backend::Cpu, DataBuffer::Cpu(_)) if count == 0 => Ok(Vec::new()),
            (Backend::Cpu, DataBuffer::Cpu(flat)) => {
                Ok(flat[storage.layout.offset..storage.layout.offset + count].to_vec())
            }
            _ => Err(Error::Device {
                during: "readback".into(),
                message: format!(
                    "tensor recorded at {} is stored on another device",
                    node.location
                ),
            }),
        }
    }

    /// Stores host data (one 32-bit pattern per element of `dtype`) on
    /// the device.
    pub(crate) fn upload(
        &self,
        dtype: DType,
        bits: Vec<u32>,
    ) -> Result<crate::runtime::storage::DataBuffer> {
        self.inner
            .metrics
            .add("bytes_uploaded", dtype.words(bits.len()) as u64 * 4);
        match &self.inner.backend {
            Backend::Gpu(ctx, _) => {
                let packed = dtype.pack(bits);
                let _order = self.inner.pool.queue_order();
                Ok(DataBuffer::Gpu(ctx.upload(&self.inner.pool, &packed)?))
            }
            Backend::Cpu => Ok(DataBuffer::Cpu(Arc::new(bits))),
        }
    }
}

/// Overwrites the first element of a GPU result (the word holding it, for
/// a 16-bit dtype) with a value no kernel here computes.
fn corrupt(ctx: &GpuContext, storage: &Storage, dtype: DType) {
    if let DataBuffer::Gpu(buf) = &storage.buffer {
        ctx.write(
            buf,
            (storage.layout.offset / dtype.per_word()) as u64 * 4,
            bytemuck::bytes_of(&12345.0f32.to_bits()),
        );
    }
}

/// Every element of a stored buffer of `dtype`, on the host.
fn download_all(ctx: &GpuContext, s: &Storage, dtype: DType) -> Result<Vec<u32>> {
    match &s.buffer {
        DataBuffer::Gpu(buf) => {
            let len = buf.buffer().size() as usize / dtype.size_in_bytes();
            pollster::block_on(ctx.download(buf, dtype, 0, len))
        }
        DataBuffer::Cpu(v) => Ok(v.to_vec()),
    }
}

/// Host copies of a graph's inputs, same layouts.
fn host_copies(ctx: &GpuContext, graph: &Graph) -> Result<Vec<Storage>> {
    let mut dtypes = vec![DType::F32; graph.inputs.len()];
    for node in &graph.key.nodes {
        if let GKind::Input { slot, .. } = node.kind {
            dtypes[slot] = node.dtype;
        }
    }
    graph
        .inputs
        .iter()
        .zip(dtypes)
        .map(|(s, dtype)| {
            Ok(Storage {
                buffer: DataBuffer::Cpu(Arc::new(download_all(ctx, s, dtype)?)),
                layout: s.layout.clone(),
            })
        })
        .collect()
}

/// Reruns `graph` on the CPU reference from host copies of its inputs and
/// compares with the GPU's results.
fn verify(
    ctx: &GpuContext,
    graph: &Graph,
    cpu_inputs: Vec<Storage>,
    results: &[Storage],
) -> Result<()> {
    let cpu_results = cpu::run_graph(&graph.with_inputs(cpu_inputs))?;
    let mut gpu_values = Vec::with_capacity(results.len());
    let mut cpu_values = Vec::with_capacity(results.len());
    for ((g, c), &o) in results.iter().zip(&cpu_results).zip(&graph.key.outputs) {
        let n = numel(&graph.key.nodes[o].shape);
        let dtype = graph.key.nodes[o].dtype;
        gpu_values.push(download_all(ctx, g, dtype)?[..n].to_vec());
        let DataBuffer::Cpu(cv) = &c.buffer else {
            unreachable!("the CPU reference returns host data")
        };
        cpu_values.push(cv[..n].to_vec());
    }
    crate::debug::compare(graph, &gpu_values, &cpu_values)
}

impl Drop for DeviceInner {
    /// Waits for the work submitted so far, then saves the pipeline cache
    /// (compiles since the last save were throttled, see
    /// `DiskPipelineCache::save_if_due`).
    ///
    /// Why wait: the wgpu device lives on in the process-wide context,
    /// and lavapipe runs submitted work (compiling kernels with LLVM) on
    /// threads of its own. A program that returned from `main` right after
    /// `mark_step` exited while such a thread still compiled, and LLVM's
    /// static destructors freed what it used: `double free or corruption`
    /// or a segfault in about 3 % of runs of `memory_report`'s example.
    /// The wait takes no device error (`GpuContext::settle`): the context
    /// is shared, and another device's next read reports its own. Not
    /// while unwinding, where a lost device's poll could panic again and
    /// abort.
    fn drop(&mut self) {
        if let Backend::Gpu(ctx, _) = &self.backend {
            if !std::thread::panicking() {
                let _ = ctx.settle();
            }
            if let Some(disk) = &ctx.pipeline_cache {
                disk.save();
            }
        }
    }
}

impl Default for Device {
    /// The GPU if an adapter exists, else the CPU reference backend, saying
    /// so in one line on standard error (once per process: a program that
    /// makes many devices should not repeat it). `LAZYWGPU_DEVICE=gpu|cpu|auto`
    /// overrides; with `gpu` a missing adapter is a panic, since the user
    /// demanded one, and with `cpu` (as with [`Device::cpu`]) nothing is
    /// printed, since nothing was chosen for the user.
    fn default() -> Device {
        match crate::config::ProcessConfig::get().device.as_str() {
            "cpu" => Device::cpu(),
            "gpu" => match Device::gpu() {
                Ok(dev) => dev,
                Err(e) => panic!("LAZYWGPU_DEVICE=gpu but no GPU device could be made: {e}"),
            },
            _ => match Device::gpu() {
                Ok(dev) => dev,
                Err(e) => {
                    // Standard error, not the log: a logger is often not
                    // set up (or filters warnings out), and a program that
                    // silently runs 10-100x slower than its author expects
                    // should say why.
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| {
                        eprintln!(
                            "lazywgpu: {e}; using the CPU reference backend instead \
                             (LAZYWGPU_DEVICE=cpu chooses it without this line)"
                        );
                    });
                    Device::cpu()
                }
            },
        }
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({})", self.name())
    }
}

/// Runs every pending tensor on `dev` (see [`Device::mark_step`]).
pub fn mark_step(dev: &Device) -> Result<()> {
    dev.mark_step()
}
