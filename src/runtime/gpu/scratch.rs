//! Scratch textures: the `rgba32float` arrays the lane matmul packs its
//! operands into. A kernel takes them from the device's pool
//! (`BufferPool::take_texture`) while it is encoded and gives them back
//! right after, so kernels of every executable share them by size, and
//! only the textures of the kernel being encoded count as live.
//!
//! (Kept per executable, they held the MNIST CNN's training step at
//! 139 MB where its buffers took 53 MB, the first step's graph and the
//! steady one each holding their packed operands; kept only up to 1 MiB
//! and made per run above that, 60 MB for steps 5-15 % slower on
//! lavapipe: PERFORMANCE.md.)

use super::context::GpuContext;

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
            usage: wgpu::TextureUsages::STORAGE_BINDING
                | wgpu::TextureUsages::TEXTURE_BINDING
                | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        })
        .create_view(&wgpu::TextureViewDescriptor {
            // An array view even of one layer: the kernels declare arrays.
            dimension: Some(wgpu::TextureViewDimension::D2Array),
            ..Default::default()
        })
}
