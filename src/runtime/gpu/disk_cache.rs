//! Warm start: compiled pipelines kept across processes through wgpu's
//! `PipelineCache` (Vulkan's pipeline cache), in a file per adapter and
//! driver under a cache directory. `LAZYWGPU_CACHE_DIR=DIR` sets the
//! directory, `LAZYWGPU_CACHE_DIR=off` turns it off; by default it is
//! `$XDG_CACHE_HOME/lazywgpu` or `~/.cache/lazywgpu`. Backends without a
//! pipeline cache (Metal, DX12, WebGPU) start cold every time.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The least time between two saves: each writes the whole cache, and a
/// warm-up compiles many graphs in a row.
const SAVE_INTERVAL: Duration = Duration::from_secs(2);

/// The process's pipeline cache and the file it is saved to.
pub(crate) struct DiskPipelineCache {
    pub cache: wgpu::PipelineCache,
    path: PathBuf,
    /// Bytes last written, to skip writing an unchanged cache.
    saved_bytes: AtomicUsize,
    /// When it was last saved.
    saved_at: Mutex<Option<Instant>>,
}

/// The cache directory (`ProcessConfig::cache_dir`), if any.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    crate::config::ProcessConfig::get().cache_dir.clone()
}

impl DiskPipelineCache {
    /// Opens the cache of this adapter and driver (empty when there is no
    /// file yet, or when the driver rejects the file's data), or `None`
    /// where the device lacks pipeline caches or the cache is turned off.
    pub fn open(
        device: &wgpu::Device,
        info: &wgpu::AdapterInfo,
        features: wgpu::Features,
    ) -> Option<DiskPipelineCache> {
        if !features.contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        // Keyed by vendor and device; the driver version is checked by the
        // driver against the data's header.
        let path = cache_dir()?.join(wgpu::util::pipeline_cache_key(info)?);
        let data = std::fs::read(&path).ok();
        let loaded = data.as_deref().and_then(|bytes| {
            let cache = create(device, Some(bytes));
            if cache.is_none() {
                log::warn!(
                    "lazywgpu: the pipeline cache {} was written for another adapter, \
                     backend or wgpu version; starting an empty one",
                    path.display()
                );
            }
            cache
        });
        let loaded_ok = loaded.is_some();
        let cache = match loaded {
            Some(cache) => cache,
            None => create(device, None)?,
        };
        log::info!(
            "lazywgpu: pipeline cache {} ({} bytes loaded)",
            path.display(),
            data.as_ref().filter(|_| loaded_ok).map_or(0, Vec::len)
        );
        Some(DiskPipelineCache {
            cache,
            path,
            // A rejected file counts as nothing saved, so the first save
            // replaces it.
            saved_bytes: AtomicUsize::new(data.filter(|_| loaded_ok).map_or(0, |d| d.len())),
            saved_at: Mutex::new(None),
        })
    }

    /// `save`, unless the last save was less than `SAVE_INTERVAL` ago
    /// (then the next compile, or the device's drop, saves).
    pub fn save_if_due(&self) {
        let due = self
            .saved_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none_or(|t| t.elapsed() >= SAVE_INTERVAL);
        if due {
            self.save();
        }
    }

    /// Writes the cache's data to its file when it changed size (after
    /// new pipelines were compiled). Failures are logged, never fatal: a
    /// cold start is only slower.
    pub fn save(&self) {
        *self.saved_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        let Some(data) = self.cache.get_data() else {
            return;
        };
        if data.len() == self.saved_bytes.load(Ordering::Relaxed) {
            return;
        }
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // Written whole, then renamed: a reader never sees half a file.
            let tmp = self
                .path
                .with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, &data)?;
            std::fs::rename(&tmp, &self.path)
        };
        match write() {
            Ok(()) => self.saved_bytes.store(data.len(), Ordering::Relaxed),
            Err(e) => log::warn!(
                "lazywgpu: cannot save the pipeline cache {}: {e}",
                self.path.display()
            ),
        }
    }
}

/// A pipeline cache started from `data` (or empty), or `None` where wgpu
/// or the driver rejects it. wgpu's `fallback` covers data from another
/// driver version, but data whose header names another adapter or
/// backend is reported as a validation error and leaves an invalid cache
/// that fails every pipeline made with it: the error scope catches that.
fn create(device: &wgpu::Device, data: Option<&[u8]>) -> Option<wgpu::PipelineCache> {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    // SAFETY: wgpu requires `data` to come from `PipelineCache::get_data`
    // of an adapter with the same `pipeline_cache_key`. The file is the
    // one `save` writes under that key; a file written elsewhere or
    // damaged is checked against wgpu's header (adapter, backend, wgpu
    // version, length) and the driver's (driver version), and rejected
    // data is never used: `fallback` starts an empty cache for the
    // driver's rejections and the scope reports wgpu's.
    let cache = unsafe {
        device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
            label: Some("lazywgpu pipelines"),
            data,
            fallback: true,
        })
    };
    match pollster::block_on(scope.pop()) {
        None => Some(cache),
        Some(e) => {
            log::debug!("lazywgpu: pipeline cache rejected: {e}");
            None
        }
    }
}
