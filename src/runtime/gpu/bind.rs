//! Bind groups: the resources a dispatch binds, in its binding order, and
//! a small cache per dispatch so that a step binding the same buffers as
//! one of the last few reuses its bind group.

use std::sync::{Arc, Mutex};

use crate::codegen::KernelSource;
use crate::error::{Error, Result};
use crate::kernel::Binding;
use crate::metrics::Metrics;
use crate::runtime::storage::GpuBuffer;

use super::compile::SizesRange;
use super::context::GpuContext;
use super::pipelines::Pipeline;

/// Bind groups kept per dispatch.
const BIND_GROUPS_KEPT: usize = 4;

/// Bind groups binding more than this many bytes of buffers and
/// textures are not kept.
const KEPT_BIND_GROUP_BYTES: u64 = 4 << 20;

/// A bind group and what it binds, to be reused when a run binds the same.
pub(super) struct CachedBindGroup {
    pub(super) resources: Vec<BoundResource>,
    pub(super) group: wgpu::BindGroup,
}

/// One bound resource, compared by identity (wgpu handles compare so).
#[derive(PartialEq, Eq)]
pub(super) enum BoundResource {
    Buffer(wgpu::Buffer, u64, Option<std::num::NonZeroU64>),
    Texture(wgpu::TextureView),
}

/// The buffer a node is stored in during a run, if any yet.
pub(super) type NodeBuffer = Option<Arc<GpuBuffer>>;

/// The bind group of `source` (a kernel or one of its packing kernels)
/// for `pipeline`, or one that `cache` holds binding the same resources: the parameter buffer, its reads and its writes (each in
/// binding-sized parts), then its scratch textures. `buffers` and
/// `written` are the stored data each node is read from and the buffer
/// each written node goes to.
/// Buffers past `part_bytes` are bound in parts of that size.
pub(super) fn bind_group(
    (ctx, part_bytes): (&GpuContext, usize),
    graph_hash: u64,
    (pipeline, source): (&Pipeline, &KernelSource),
    (params, checks, sizes): (
        Option<&Arc<GpuBuffer>>,
        Option<&wgpu::Buffer>,
        Option<&SizesRange>,
    ),
    (buffers, written): (&[NodeBuffer], &[NodeBuffer]),
    (scratch, scratch_bytes): (&[wgpu::TextureView], u64),
    (cache, metrics): (&Mutex<Vec<CachedBindGroup>>, &Metrics),
) -> Result<wgpu::BindGroup> {
    let resources = resources_of(
        (source, part_bytes, graph_hash),
        (params, checks, sizes),
        (buffers, written),
        scratch,
    )?;
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
        layout: &pipeline.layout,
        entries: &entries,
    });
    // Only small bind groups are kept: a kept group keeps its buffers
    // and textures alive past the pool's limit.
    let buffer_bytes: u64 = resources
        .iter()
        .map(|r| match r {
            BoundResource::Buffer(b, _, size) => size.map_or(b.size(), |s| s.get()),
            BoundResource::Texture(_) => 0,
        })
        .sum();
    if buffer_bytes + scratch_bytes > KEPT_BIND_GROUP_BYTES {
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

/// What `source` binds, in its binding order (see `bind_group`).
fn resources_of(
    (source, part_bytes, graph_hash): (&KernelSource, usize, u64),
    (params, checks, sizes): (
        Option<&Arc<GpuBuffer>>,
        Option<&wgpu::Buffer>,
        Option<&SizesRange>,
    ),
    (buffers, written): (&[NodeBuffer], &[NodeBuffer]),
    scratch: &[wgpu::TextureView],
) -> Result<Vec<BoundResource>> {
    let mut resources = Vec::new();
    let error = |message: String| Error::Device {
        during: format!("graph {graph_hash:016x}"),
        message,
    };
    let missing = |n: usize| error(format!("node {n} is read before it is written"));
    // A buffer the run binds whole (the anomaly flags).
    let whole = |b: Option<&wgpu::Buffer>, what: &str| {
        b.map(|b| BoundResource::Buffer(b.clone(), 0, None))
            .ok_or_else(|| error(format!("kernel binds {what} but the run has none")))
    };
    // Part j covers bytes [j * part, (j + 1) * part) of the buffer (clipped
    // to its size), never more than one storage binding may hold.
    // A part past the buffer's end is a code generation bug: an error
    // here, before wgpu would make an invalid bind group.
    let part_of = |b: &Arc<GpuBuffer>, (node, j): (usize, usize)| {
        let (part, size) = (part_bytes as u64, b.buffer().size());
        let offset = j as u64 * part;
        let rest = size.checked_sub(offset).filter(|&rest| rest > 0).ok_or_else(|| {
            error(format!(
                "node {node}: binding part {j} starts at byte {offset}, past its {size}-byte buffer"
            ))
        })?;
        let len = std::num::NonZeroU64::new(rest.min(part));
        Ok(BoundResource::Buffer(b.buffer().clone(), offset, len))
    };
    for binding in source.bindings() {
        resources.push(match binding {
            Binding::Params { uniform_bytes } => {
                let Some(p) = params else {
                    return Err(error(
                        "kernel reads parameters but the graph has none".into(),
                    ));
                };
                let size = uniform_bytes.and_then(std::num::NonZeroU64::new);
                BoundResource::Buffer(p.buffer().clone(), 0, size)
            }
            Binding::Read { node, part } => {
                let b = buffers[node].as_ref().or(written[node].as_ref());
                part_of(b.ok_or_else(|| missing(node))?, (node, part))?
            }
            Binding::Write { node, part } => part_of(
                written[node].as_ref().ok_or_else(|| missing(node))?,
                (node, part),
            )?,
            Binding::Texture { slot, .. } => BoundResource::Texture(scratch[slot].clone()),
            Binding::Checks => whole(checks, "anomaly checks")?,
            Binding::Sizes { .. } => {
                let r = sizes.ok_or_else(|| {
                    error("kernel binds dynamic sizes but the run has none".into())
                })?;
                BoundResource::Buffer(r.buffer.clone(), r.offset, Some(r.size))
            }
        });
    }
    Ok(resources)
}
