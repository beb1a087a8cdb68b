//! Scratch textures: the `rgba32float` arrays the lane matmul packs its
//! operands into, which ones an executable keeps (shared by size among
//! its kernels) and how kept ones count as live memory.

use std::collections::HashMap;
use std::sync::Arc;

use super::context::GpuContext;
use crate::metrics::Metrics;

/// Scratch textures up to this size live as long as their executable
/// (shared by its kernels of one size: `SharedScratch`); larger ones are
/// made for each run. Counted, kept up to 32 MiB they held the MNIST
/// CNN's training at 139 MB where its buffers took 53 MB (the first
/// step's graph and the steady one each holding their packed operands)
/// and the ResNet's at 177-230 MB; kept up to 1 MiB, 60 and 53 MB, for
/// steps 5-15 % slower on lavapipe (PERFORMANCE.md). A pool of textures
/// shared across executables would have both.
pub(super) const KEPT_SCRATCH_BYTES: u64 = 1 << 20;

/// A kept scratch texture's bytes in `bytes_live` (and so in the peak and
/// the memory report's level) for as long as its executable keeps it:
/// memory a step holds, like a buffer's.
pub(super) struct KeptScratch {
    bytes: u64,
    metrics: Arc<Metrics>,
}

impl KeptScratch {
    pub(super) fn count(bytes: u64, metrics: &Arc<Metrics>) -> KeptScratch {
        metrics.gauge("bytes_live", bytes as i64);
        KeptScratch {
            bytes,
            metrics: metrics.clone(),
        }
    }
}

impl Drop for KeptScratch {
    fn drop(&mut self) {
        self.metrics.gauge("bytes_live", -(self.bytes as i64));
    }
}

/// Bytes of an `rgba32float` texture array of `(width, height, layers)`.
pub(super) fn scratch_bytes((width, height, layers): (u32, u32, u32)) -> u64 {
    16 * width as u64 * height as u64 * layers as u64
}

/// The kept scratch textures of one executable, by size and slot: kernels
/// whose operands pack into textures of the same size share them (they
/// run one after another; each packs before it reads), so an executable
/// holds one texture per size and slot, not one per kernel (a
/// checkpointed block's recomputed forward adds kernels, not textures).
pub(super) type SharedScratch = HashMap<((u32, u32, u32), usize), wgpu::TextureView>;

/// An `rgba32float` texture array a matmul packs an operand into: written
/// as a storage texture, read by texel fetches.
pub(super) fn scratch_texture(
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
