//! The process's wgpu adapter, device and queue: created once, shared by
//! every GPU `Device`; uploads, submission, and the one wait (readback).

use crate::config::ProcessConfig;
use crate::dtype::DType;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::runtime::pool::{BufferPool, size_class};
use crate::runtime::profile::{self, KernelProfile, ProfileClock};
use crate::runtime::storage::GpuBuffer;
use crate::runtime::submit::Submitter;

use super::disk_cache::DiskPipelineCache;
use crate::runtime::overlap::DeviceClock;

/// The process-wide wgpu adapter, device and queue.
pub(crate) struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// The features requested (and granted) for the device
    /// (`requested_features`).
    pub features: wgpu::Features,
    /// The submission thread, on adapters whose submit runs the work
    /// before returning (CPU adapters; `LAZYWGPU_SUBMIT_THREAD=0|1`
    /// overrides). `None`: submit on the caller's thread.
    submitter: Option<Submitter>,
    /// Kernel timings (`LAZYWGPU_PROFILE=1`), by the adapter's clock.
    pub profile: Option<KernelProfile>,
    /// The last error wgpu reported outside an error scope.
    uncaptured: Arc<Mutex<Option<String>>>,
    /// Host time blocked on the device, and device busy time.
    pub clock: Arc<DeviceClock>,
    /// Without a submission thread: a thread that waits for each
    /// submission to complete and stamps the time on `clock` (completion
    /// callbacks only run at the next submit or poll, which would count
    /// idle time as busy).
    completions: Option<std::sync::mpsc::Sender<(Completion, std::time::Instant)>>,
    /// Compiled pipelines kept across processes, where the backend
    /// allows it (see `super::disk_cache`).
    pub pipeline_cache: Option<DiskPipelineCache>,
    /// A buffer of zeros that copies read (never written; replaced by a
    /// larger one where a copy needs more: `zeros`).
    zeros: Mutex<Option<wgpu::Buffer>>,
}

/// The features to request: what the library uses of what the adapter
/// offers (requesting all of them fails on adapters that report
/// experimental ones), and cooperative matrices (tensor cores) only where
/// the adapter lists the one configuration the matmul uses and can run
/// that kernel (`CoopAdapter::of`); with them, wgpu's acknowledgement of
/// experimental features.
fn requested_features(
    adapter: &wgpu::Adapter,
    info: &wgpu::AdapterInfo,
    limits: &wgpu::Limits,
) -> (wgpu::Features, wgpu::ExperimentalFeatures) {
    let wanted = wgpu::Features::SUBGROUP
        | wgpu::Features::SHADER_F16
        | wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::PIPELINE_CACHE;
    let features = adapter.features() & wanted;
    let coop_f16 = adapter
        .features()
        .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
        && adapter
            .cooperative_matrix_properties()
            .iter()
            .any(coop_f16_config)
        && crate::kernel::CoopAdapter::of(info, limits, features).is_some();
    if !coop_f16 {
        return (features, wgpu::ExperimentalFeatures::disabled());
    }
    // SAFETY: wgpu marks cooperative matrices experimental, which it asks
    // callers to acknowledge; the only experimental feature requested is
    // that one, and only its 16x16 f16 configuration with an f32
    // accumulator is used, by one kernel (`codegen::matmul_coop`), checked
    // against f64 products by the tuning trial and by
    // `tests/coop_matmul.rs`.
    let acknowledged = unsafe { wgpu::ExperimentalFeatures::enabled() };
    (
        features | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
        acknowledged,
    )
}

/// Whether `p` is the cooperative-matrix configuration the matmul uses:
/// 16x16x16, `f16` operands, `f32` accumulator.
fn coop_f16_config(p: &wgpu::CooperativeMatrixProperties) -> bool {
    (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
        && p.ab_type == wgpu::CooperativeScalarType::F16
        && p.cr_type == wgpu::CooperativeScalarType::F32
}

/// One device per process: wgpu devices are dear to create (lavapipe spins
/// up threads for each), and `Device::gpu()` is called freely in tests.
static CONTEXT: OnceLock<Mutex<Option<Arc<GpuContext>>>> = OnceLock::new();

impl GpuContext {
    /// The target kernels are generated for on this adapter
    /// (`Target::for_adapter`, the matmul kernel `matmul` where that
    /// names one), with a discrete GPU's choices under
    /// `LAZYWGPU_GPU_CHOICES=1` (`ProcessConfig::gpu_choices`).
    pub(crate) fn target(&self, matmul: Option<crate::MatmulChoice>) -> crate::kernel::Target {
        let gpu_choices = crate::config::ProcessConfig::get().gpu_choices;
        let matmul = matmul.or(gpu_choices.then_some(crate::MatmulChoice::Tiled));
        let target =
            crate::kernel::Target::for_adapter(&self.info, &self.limits, self.features, matmul);
        if gpu_choices {
            target.with_gpu_choices()
        } else {
            target
        }
    }

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
        GpuContext::create_on(adapter).await
    }

    /// One context per distinct adapter of the machine, for training on
    /// several at once: the shared context for the adapter it uses, a new
    /// one for each other. An adapter offered by several backends (Vulkan
    /// and GL, say) counts once, by its best backend; CPU adapters
    /// (lavapipe) only when there is no other.
    pub fn all() -> Result<Vec<Arc<GpuContext>>> {
        let shared = GpuContext::shared()?;
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        let rank = |b: wgpu::Backend| match b {
            wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
            _ => 1,
        };
        // The same physical adapter, whichever backend offers it.
        let identity = |info: &wgpu::AdapterInfo| (info.vendor, info.device, info.name.clone());
        let mut chosen: Vec<wgpu::Adapter> = Vec::new();
        for adapter in adapters {
            let info = adapter.get_info();
            let same = chosen
                .iter()
                .position(|c| identity(&c.get_info()) == identity(&info));
            match same {
                Some(i) if rank(info.backend) < rank(chosen[i].get_info().backend) => {
                    chosen[i] = adapter;
                }
                Some(_) => {}
                None => chosen.push(adapter),
            }
        }
        if chosen
            .iter()
            .any(|a| a.get_info().device_type != wgpu::DeviceType::Cpu)
        {
            chosen.retain(|a| a.get_info().device_type != wgpu::DeviceType::Cpu);
        }
        let mut contexts = vec![shared.clone()];
        for adapter in chosen {
            if identity(&adapter.get_info()) != identity(&shared.info) {
                contexts.push(Arc::new(pollster::block_on(GpuContext::create_on(
                    adapter,
                ))?));
            }
        }
        Ok(contexts)
    }

    async fn create_on(adapter: wgpu::Adapter) -> Result<GpuContext> {
        let info = adapter.get_info();
        let limits = adapter.limits();
        let (features, experimental_features) = requested_features(&adapter, &info, &limits);
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("lazywgpu"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features,
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
        let profile = profile::requested().then(|| {
            KernelProfile::new(ProfileClock::for_adapter(
                info.device_type,
                features.contains(wgpu::Features::TIMESTAMP_QUERY),
            ))
        });
        let profiling = profile.is_some();
        // Profiling submits on the caller's thread: each kernel's submit
        // and wait are timed there by the wall clock (CPU adapters), and
        // lavapipe's timestamps of work submitted from the submission
        // thread came out inflated several times over.
        let threaded = ProcessConfig::get()
            .submit_thread
            .unwrap_or(info.device_type == wgpu::DeviceType::Cpu)
            && !profiling;
        let clock = Arc::new(DeviceClock::default());
        let submitter = if threaded {
            Some(Submitter::start(queue.clone(), clock.clone()).map_err(|e| {
                Error::RequestDevice(format!("starting the submission thread: {e}"))
            })?)
        } else {
            None
        };
        let pipeline_cache = DiskPipelineCache::open(&device, &info, features);
        let completions = match submitter {
            Some(_) => None,
            None => Some(
                watch_completions(device.clone(), clock.clone()).map_err(|e| {
                    Error::RequestDevice(format!("starting the completion thread: {e}"))
                })?,
            ),
        };
        Ok(GpuContext {
            completions,
            clock,
            pipeline_cache,
            device,
            queue,
            info,
            limits,
            features,
            submitter,
            profile,
            uncaptured,
            zeros: Mutex::new(None),
        })
    }

    /// A buffer of at least `bytes` zeros, to copy from (a matmul
    /// operand's texture rows past its matrix): the device's, made once
    /// and grown where needed (wgpu fills a new buffer with zeros).
    pub fn zeros(&self, bytes: u64) -> wgpu::Buffer {
        let mut zeros = self.zeros.lock().unwrap_or_else(|e| e.into_inner());
        match zeros.as_ref() {
            Some(b) if b.size() >= bytes => b.clone(),
            _ => {
                let b = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("lazywgpu zeros"),
                    size: bytes.next_power_of_two(),
                    usage: wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                zeros.insert(b).clone()
            }
        }
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
    /// `what` names the buffer in the error; it is only called then (runs
    /// allocate every step, and naming costs a `format!`).
    pub fn alloc(
        &self,
        pool: &Arc<BufferPool>,
        len: usize,
        what: impl FnOnce() -> String,
    ) -> Result<Arc<GpuBuffer>> {
        let bytes = (len as u64 * 4).max(16);
        let limit = self.limits.max_buffer_size;
        if bytes > limit {
            return Err(Error::TooLarge {
                what: what(),
                bytes,
                limit,
            });
        }
        // Near the limit the size class could overshoot it: use the exact size.
        let class = match size_class(bytes) {
            c if c > limit => bytes.next_multiple_of(16),
            c => c,
        };
        match pool.take(&self.device, class) {
            Ok(buffer) => Ok(Arc::new(buffer)),
            Err(short) => Err(short.into_error(what())),
        }
    }

    /// Uploads 32-bit words into a storage buffer from `pool`. The copy
    /// is staged by wgpu and lands before the next submission runs.
    pub fn upload(&self, pool: &Arc<BufferPool>, bits: &[u32]) -> Result<Arc<GpuBuffer>> {
        let buf = self.alloc(pool, bits.len(), || "upload".to_string())?;
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
                let submitted = std::time::Instant::now();
                self.queue.submit([cb]);
                if let Some(watcher) = &self.completions {
                    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
                    let flag = done.clone();
                    self.queue.on_submitted_work_done(move || {
                        flag.store(true, std::sync::atomic::Ordering::Release)
                    });
                    // The thread lives as long as the context: a failed
                    // send only loses a timing.
                    let _ = watcher.send((done, submitted));
                }
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

    /// Copies `len` elements of `dtype` starting at element `offset` back
    /// to the host, one 32-bit pattern each. This is the one place that
    /// waits for the device.
    pub async fn download(
        &self,
        buf: &GpuBuffer,
        dtype: DType,
        offset: usize,
        len: usize,
    ) -> Result<Vec<u32>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        // Whole words: a 16-bit element at an odd offset shares its word.
        let (first_word, skip) = (offset / dtype.per_word(), offset % dtype.per_word());
        let words = dtype.words(skip + len);
        let staging = self.staging(words)?;
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(
            buf.buffer(),
            first_word as u64 * 4,
            &staging,
            0,
            Some(words as u64 * 4),
        );
        self.submit(encoder.finish());
        let read: Vec<u32> = self.read_mapped(&staging, "readback").await?;
        Ok(dtype.unpack(read, skip, len))
    }

    /// A buffer for reading `len` 32-bit words back to the host,
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
        let (tx, rx) = futures::channel::oneshot::channel();
        self.clock.blocked(|| {
            self.flush();
            // Waits for this mapping alone, not for work other threads
            // submit meanwhile (an idle queue would wait for all of it).
            let mapped = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = mapped.clone();
            staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
                flag.store(true, std::sync::atomic::Ordering::Release);
            });
            super::wait::until_set(&self.device, &mapped).map_err(|e| device_error(e.to_string()))
        })?;
        rx.await
            .map_err(|_| device_error("map callback dropped".into()))?
            .map_err(|e| device_error(e.to_string()))?;
        self.take_error(during)?;
        copy_mapped(staging, during)
    }

    /// Asks for `staging` to be mapped for reading once the command
    /// buffers submitted so far have run, without waiting. The outcome
    /// arrives on the returned channel when the device is polled (see
    /// [`GpuContext::read_when_mapped`]); later submissions are not waited
    /// for, which is what lets a reader overlap them.
    pub fn map_after_submitted(
        &self,
        staging: &wgpu::Buffer,
    ) -> std::sync::mpsc::Receiver<Result<(), wgpu::BufferAsyncError>> {
        let (tx, rx) = std::sync::mpsc::channel();
        match &self.submitter {
            Some(s) => s.map(staging.clone(), tx),
            None => staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            }),
        }
        rx
    }

    /// Reads `staging` once the mapping asked by
    /// [`GpuContext::map_after_submitted`] is done, polling the device
    /// without blocking it (callable from any thread, while others submit).
    pub fn read_when_mapped(
        &self,
        staging: &wgpu::Buffer,
        mapped: std::sync::mpsc::Receiver<Result<(), wgpu::BufferAsyncError>>,
        during: &str,
    ) -> Result<Vec<u32>> {
        use std::sync::mpsc::TryRecvError;
        let device_error = |message: String| Error::Device {
            during: during.to_string(),
            message,
        };
        let outcome = loop {
            match mapped.try_recv() {
                Ok(outcome) => break outcome,
                Err(TryRecvError::Disconnected) => {
                    return Err(device_error("map callback dropped".into()));
                }
                Err(TryRecvError::Empty) => {}
            }
            self.device
                .poll(wgpu::PollType::Poll)
                .map_err(|e| device_error(e.to_string()))?;
            if let Ok(outcome) = mapped.try_recv() {
                break outcome;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        };
        outcome.map_err(|e| device_error(e.to_string()))?;
        self.take_error(during)?;
        copy_mapped(staging, during)
    }

    /// Waits until the work submitted so far is done (not work other
    /// threads submit while it waits), counted as the host blocked, and
    /// reports a device error raised by any work since the last report.
    pub fn wait(&self) -> Result<()> {
        self.clock
            .blocked(|| self.settle())
            .map_err(|e| Error::Device {
                during: "wait".into(),
                message: e.to_string(),
            })?;
        self.take_error("wait")
    }

    /// Waits until the work submitted so far is done, and nothing else:
    /// no time counted, no error taken (a device error stays for the
    /// next read or `wait` to report).
    pub fn settle(&self) -> std::result::Result<(), wgpu::PollError> {
        self.flush();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        self.queue
            .on_submitted_work_done(move || flag.store(true, std::sync::atomic::Ordering::Release));
        super::wait::until_set(&self.device, &done)
    }
}

/// The contents of a mapped staging buffer as `T`s; unmaps it.
fn copy_mapped<T: bytemuck::Pod>(staging: &wgpu::Buffer, during: &str) -> Result<Vec<T>> {
    let view = staging
        .slice(..)
        .get_mapped_range()
        .map_err(|e| Error::Device {
            during: during.to_string(),
            message: e.to_string(),
        })?;
    let out = bytemuck::cast_slice::<u8, T>(&view).to_vec();
    drop(view);
    staging.unmap();
    Ok(out)
}

/// Set by a submission's completion callback.
type Completion = Arc<std::sync::atomic::AtomicBool>;

/// Starts the thread that waits for each submission sent to it to
/// complete and records the device's busy time on `clock`.
fn watch_completions(
    device: wgpu::Device,
    clock: Arc<DeviceClock>,
) -> std::io::Result<std::sync::mpsc::Sender<(Completion, std::time::Instant)>> {
    let (tx, rx) = std::sync::mpsc::channel::<(Completion, std::time::Instant)>();
    std::thread::Builder::new()
        .name("lazywgpu-completions".into())
        .spawn(move || {
            while let Ok((done, submitted)) = rx.recv() {
                // A lost device is reported to the caller by its next
                // wait; here it only ends the timing.
                if super::wait::until_set(&device, &done).is_err() {
                    break;
                }
                clock.work_done(submitted);
            }
        })?;
    Ok(tx)
}

async fn choose_adapter(instance: &wgpu::Instance) -> Result<wgpu::Adapter> {
    if let Some(name) = &ProcessConfig::get().adapter_name {
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
