//! A pool of wgpu storage buffers in size classes, and of the scratch
//! textures matmuls pack their operands into, by size.
//!
//! Creating a buffer is dear (the driver allocates, and wgpu zero-fills it
//! before its first use), so buffers of dropped tensors and of finished
//! intermediates go back to the pool and are handed out again. Reuse right
//! after a drop is safe: everything runs on one queue, in submission order,
//! and wgpu orders the accesses of successive submissions (and of
//! successive dispatches of one pass). Scratch textures are the same:
//! a kernel takes its textures while it is encoded and gives them back
//! right after, so every kernel and every executable of a device shares
//! them, and only the textures of the kernel being encoded count as live.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};

use crate::metrics::Metrics;
use crate::runtime::memory_report::MemoryReport;

/// Most bytes kept idle in the pool; past this, freed buffers are released.
const MAX_POOLED_BYTES: u64 = 1 << 30;

/// Buffer sizes are rounded up to classes 2^k · {1, 33/32, ..., 63/32}
/// (at least 256 bytes, in steps of at least 16), so a buffer fits any
/// request of its class and no more than 1/32 (or 16 bytes) is wasted.
/// (Quarters wasted up to 25 %: 10.5 MB buffers for 9.4 MB activations,
/// 5 MB of the MNIST CNN step's 59 MB peak; eighths still held 1.70 MB
/// buffers for the ResNet's 1.61 MB activations, 0.9 MB of its 20 MB
/// peak.) A request may also take an idle buffer up to an eighth larger
/// (`BufferPool::take`), so sizes that differ a little still share
/// buffers: the ResNet example's first three steps allocate 245 buffers,
/// 256 with eighths.
pub(crate) fn size_class(bytes: u64) -> u64 {
    let bytes = bytes.max(256);
    let top = 63 - bytes.leading_zeros() as u64; // 2^top <= bytes
    let base = 1u64 << top;
    // Classes stay multiples of 16 bytes: a uniform block is bound in
    // whole 16-byte rows (440 bytes of parameters bind as 448).
    let step = (base / 32).max(16);
    bytes.div_ceil(step) * step
}

/// Idle buffers by size class, and the memory gauges of one device.
pub(crate) struct BufferPool {
    /// Idle buffers by size in bytes.
    free: Idle<u64, wgpu::Buffer>,
    /// Idle scratch textures by `(width, height, layers)`.
    free_textures: Idle<TextureSize, wgpu::TextureView>,
    pub metrics: Arc<Metrics>,
    /// The most bytes the device's buffers may hold, live and idle
    /// together (`DeviceConfig::memory_limit`).
    limit: Option<u64>,
    /// The memory report of the run with the highest peak since the
    /// metrics were last reset (`Device::memory_report`).
    report: Mutex<Option<MemoryReport>>,
    /// Held from taking buffers to queueing the work that writes them
    /// (`BufferPool::queue_order`).
    queue_order: Mutex<()>,
}

/// Why a buffer could not be had: the limit, or the driver.
#[derive(Debug)]
pub(crate) struct Shortfall {
    pub requested: u64,
    pub live: u64,
    pub peak: u64,
    pub cause: String,
}

impl Shortfall {
    /// The error for allocating `what` (the device adds the largest
    /// values held: `Device::with_largest_values`).
    pub fn into_error(self, what: String) -> crate::Error {
        crate::Error::OutOfMemory {
            what,
            requested: self.requested,
            live: self.live,
            peak: self.peak,
            cause: self.cause,
            largest: "(see Device::live_tensors)".to_string(),
        }
    }
}

impl BufferPool {
    pub fn new(metrics: Arc<Metrics>, limit: Option<u64>) -> Arc<BufferPool> {
        Arc::new(BufferPool {
            free: Idle::default(),
            free_textures: Idle::default(),
            metrics,
            limit,
            report: Mutex::new(None),
            queue_order: Mutex::new(()),
        })
    }

    /// Keeps the pool's hand-outs in the queue's order while held. A run
    /// gives its intermediates back to the pool as soon as their last
    /// reader is encoded, before its command buffer is submitted; another
    /// thread (a data loader uploading a batch) that took one of them and
    /// queued its write before that submission would see its data
    /// overwritten by the run's kernels. So a run holds this from its
    /// first allocation to its submission, and an upload from its
    /// allocation to queueing its write.
    pub fn queue_order(&self) -> std::sync::MutexGuard<'_, ()> {
        self.queue_order.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the report `build` makes of a run whose peak was `peak`
    /// bytes live, if no run since the last reset peaked higher.
    pub fn offer_report(&self, peak: u64, build: impl FnOnce() -> Option<MemoryReport>) {
        let mut kept = self.report.lock().unwrap_or_else(|e| e.into_inner());
        if kept.as_ref().is_none_or(|r| peak > r.peak_bytes) {
            if let Some(report) = build() {
                *kept = Some(report);
            }
        }
    }

    /// The report kept by `offer_report`.
    pub fn report(&self) -> Option<MemoryReport> {
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Forgets the kept report (the metrics were reset).
    pub fn clear_report(&self) {
        *self.report.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Releases every idle buffer (wgpu frees each once no submission
    /// uses it).
    fn release_idle(&self) {
        let bytes =
            self.free.clear(|&class| class) + self.free_textures.clear(|&s| texture_bytes(s));
        self.metrics.gauge("bytes_pooled", -(bytes as i64));
    }

    /// An idle resource of the smallest key in `keys` from `idle`, with
    /// its key, no longer counted as pooled (`bytes` of a key); the caller
    /// counts it live.
    fn reuse<K: Ord + Copy, V>(
        &self,
        idle: &Idle<K, V>,
        keys: RangeInclusive<K>,
        bytes: impl Fn(&K) -> u64,
    ) -> Option<(K, V)> {
        let (key, reused) = idle.take_first(keys)?;
        self.metrics.gauge("bytes_pooled", -(bytes(&key) as i64));
        Some((key, reused))
    }

    /// A resource of `bytes` made by `create` within the memory limit
    /// (idle ones are released first to make room), or the driver's
    /// refusal as a `Shortfall`.
    fn create<T>(
        &self,
        device: &wgpu::Device,
        bytes: u64,
        create: impl FnOnce() -> T,
    ) -> Result<T, Shortfall> {
        self.make_room(bytes)?;
        let scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let made = create();
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(self.shortfall(bytes, format!("the driver refused it: {e}")));
        }
        Ok(made)
    }

    /// Gives a no longer live resource of `bytes` back to `idle`, or
    /// drops it past `MAX_POOLED_BYTES` (wgpu frees it once no submission
    /// uses it).
    fn retire<K: Ord, V>(&self, idle: &Idle<K, V>, key: K, resource: V, bytes: u64) {
        self.metrics.gauge("bytes_live", -(bytes as i64));
        if self.metrics.value("bytes_pooled") + bytes > MAX_POOLED_BYTES {
            return;
        }
        self.metrics.gauge("bytes_pooled", bytes as i64);
        idle.put(key, resource);
    }

    /// What a failed request for `class` bytes reports.
    fn shortfall(&self, class: u64, cause: String) -> Shortfall {
        Shortfall {
            requested: class,
            live: self.metrics.value("bytes_live"),
            peak: self.metrics.value("peak_bytes_live"),
            cause,
        }
    }

    /// A scratch texture of `size`, idle in the pool or else made by
    /// `create` within the memory limit, counted as live until the
    /// returned guard drops (which gives it back).
    pub fn take_texture(
        self: &Arc<Self>,
        device: &wgpu::Device,
        size: TextureSize,
        create: impl FnOnce() -> wgpu::TextureView,
    ) -> Result<PooledTexture, Shortfall> {
        let bytes = texture_bytes(size);
        let view = match self.reuse(&self.free_textures, size..=size, |&s| texture_bytes(s)) {
            Some((_, view)) => view,
            None => {
                let view = self.create(device, bytes, create)?;
                self.metrics.add("textures_allocated", 1);
                view
            }
        };
        self.metrics.gauge("bytes_live", bytes as i64);
        Ok(PooledTexture {
            view: Some(view),
            size,
            pool: self.clone(),
        })
    }

    /// Checks that `bytes` more fit the memory limit, releasing idle
    /// buffers first where they would not.
    fn make_room(&self, bytes: u64) -> Result<(), Shortfall> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let held = |m: &Metrics| m.value("bytes_live") + m.value("bytes_pooled");
        if held(&self.metrics) + bytes > limit {
            self.release_idle();
        }
        if held(&self.metrics) + bytes > limit {
            let cause = format!("the device's memory limit is {limit} bytes");
            return Err(self.shortfall(bytes, cause));
        }
        Ok(())
    }

    /// A buffer of `class` bytes, or of up to an eighth more: the
    /// smallest idle one of those sizes, else a new one of `class` bytes
    /// only within the memory limit (idle buffers are released first to
    /// make room) and if the driver grants it. (Fresh buffers are sized
    /// finely, see `size_class`; reuse takes a slightly larger one rather
    /// than allocating.)
    pub fn take(
        self: &Arc<Self>,
        device: &wgpu::Device,
        class: u64,
    ) -> Result<PooledBuffer, Shortfall> {
        let fitting = self.reuse(&self.free, class..=class + class / 8, |&size| size);
        let (class, buffer) = match fitting {
            Some(reused) => {
                self.metrics.add("pool_reuses", 1);
                reused
            }
            None => {
                let buffer = self.create(device, class, || {
                    device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("lazywgpu"),
                        size: class,
                        // UNIFORM: a graph's parameters are bound as a
                        // uniform buffer (see `Gen::uniform_params_bytes`).
                        usage: wgpu::BufferUsages::STORAGE
                            | wgpu::BufferUsages::UNIFORM
                            | wgpu::BufferUsages::COPY_SRC
                            | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    })
                })?;
                self.metrics.add("buffers_allocated", 1);
                (class, buffer)
            }
        };
        self.metrics.gauge("bytes_live", class as i64);
        Ok(PooledBuffer {
            buffer: Some(buffer),
            class,
            pool: self.clone(),
        })
    }
}

/// Idle resources of one kind, by the key a request must match, in the
/// keys' order (a buffer request takes the smallest size that fits).
struct Idle<K, V>(Mutex<BTreeMap<K, Vec<V>>>);

impl<K, V> Default for Idle<K, V> {
    fn default() -> Self {
        Idle(Mutex::new(BTreeMap::new()))
    }
}

impl<K: Ord + Copy, V> Idle<K, V> {
    /// An idle resource of the smallest key in `keys`, with its key.
    fn take_first(&self, keys: RangeInclusive<K>) -> Option<(K, V)> {
        let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (&key, held) = idle.range_mut(keys).next()?;
        let resource = held.pop()?;
        if held.is_empty() {
            idle.remove(&key); // no empty entries to step over
        }
        Some((key, resource))
    }
}

impl<K: Ord, V> Idle<K, V> {
    fn put(&self, key: K, resource: V) {
        let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        idle.entry(key).or_default().push(resource);
    }

    /// Drops every idle resource; returns their bytes (`bytes` of one
    /// resource of each key).
    fn clear(&self, bytes: impl Fn(&K) -> u64) -> u64 {
        let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let total = idle.iter().map(|(k, v)| bytes(k) * v.len() as u64).sum();
        idle.clear();
        total
    }
}

/// A scratch texture's `(width, height, layers)`.
pub(crate) type TextureSize = (u32, u32, u32);

/// Bytes of an `rgba32float` texture array of `size`.
pub(crate) fn texture_bytes((width, height, layers): TextureSize) -> u64 {
    16 * width as u64 * height as u64 * layers as u64
}

/// A scratch texture that returns to its pool when dropped.
pub(crate) struct PooledTexture {
    view: Option<wgpu::TextureView>,
    size: TextureSize,
    pool: Arc<BufferPool>,
}

impl PooledTexture {
    pub fn view(&self) -> &wgpu::TextureView {
        self.view.as_ref().expect("present until drop")
    }
}

impl Drop for PooledTexture {
    fn drop(&mut self) {
        if let Some(view) = self.view.take() {
            let bytes = texture_bytes(self.size);
            (self.pool).retire(&self.pool.free_textures, self.size, view, bytes);
        }
    }
}

/// A storage buffer that returns to its pool when dropped.
pub(crate) struct PooledBuffer {
    buffer: Option<wgpu::Buffer>,
    class: u64,
    pool: Arc<BufferPool>,
}

impl PooledBuffer {
    pub fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("present until drop")
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            (self.pool).retire(&self.pool.free, self.class, b, self.class);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn classes_fit_and_waste_at_most_a_thirty_second() {
        for bytes in [
            1u64,
            255,
            256,
            257,
            1000,
            4096,
            4097,
            9_437_184,
            100_000_000,
            (1 << 30) + 1,
        ] {
            let c = size_class(bytes);
            assert!(c >= bytes, "{bytes} -> {c}");
            assert!(
                c <= bytes.max(256) + (bytes.max(256) / 32).max(16),
                "{bytes} -> {c}"
            );
            assert_eq!(size_class(c), c, "a class is its own class");
            assert_eq!(c % 16, 0, "{bytes} -> {c}: not whole 16-byte rows");
        }
        // The MNIST CNN's conv2 activation (9 MiB) takes a 9 MiB buffer,
        // the ResNet's first stage's (64x8x28x28 floats) its own size.
        assert_eq!(size_class(9 << 20), 9 << 20);
        assert_eq!(size_class(64 * 8 * 28 * 28 * 4), 64 * 8 * 28 * 28 * 4);
    }
}
