//! Running a graph: allocate its written buffers, bind, encode one command
//! buffer and submit it without waiting.

use std::sync::{Arc, Mutex};

use crate::codegen::KernelSource;
use crate::error::{Error, Result};
use crate::graph::{GKind, Graph};
use crate::kernel::Target;
use crate::runtime::pool::BufferPool;
use crate::runtime::storage::{DataBuffer, GpuBuffer, Storage};
use crate::shape::{Layout, numel};

use super::bind::bind_group;
use super::compile::{GpuCaches, executable, scratch_texture};
use super::context::GpuContext;

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
    let nodes = &exe.key.nodes;
    let location = |n: usize| graph.locations[exe.origin[n]];
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
                            location(i)
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
    for &o in &exe.key.outputs {
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
                    let what = format!("output of {} at {}", op_name(&nodes[w].kind), location(w));
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
    if let (Some(staging), Some(&o)) = (readback, exe.key.outputs.first()) {
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
                    location(w)
                ),
                None => "kernel without outputs".to_string(),
            };
            profile.add(label, pair[1].saturating_sub(pair[0]) as f64 * period);
        }
    }
    metrics.add("graphs_executed", 1);
    ctx.take_error(&format!("graph {:016x}", graph.hash))?;

    exe.key
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

fn op_name(kind: &GKind) -> &'static str {
    match kind {
        GKind::Input { .. } => "input",
        GKind::Op { op, .. } => op.name(),
    }
}
