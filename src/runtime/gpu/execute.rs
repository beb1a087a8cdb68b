//! Running a graph: allocate its written buffers, bind, encode one command
//! buffer and submit it without waiting.

use std::panic::Location;
use std::sync::{Arc, Mutex};

use crate::codegen::KernelSource;
use crate::error::{Error, Result};
use crate::graph::semantics::indexed_axis_len;
use crate::graph::{GKind, Graph};
use crate::kernel::Target;
use crate::runtime::memory_report::{
    BufferRole, PlannedBuffer, ReportedBuffer, largest_listed, live_at, report_of,
};
use crate::runtime::pool::{BufferPool, size_class};
use crate::runtime::profile::ProfileClock;
use crate::runtime::storage::{DataBuffer, Storage};
use crate::shape::{Layout, numel};

use super::bind::{NodeBuffer, bind_group};
use super::compile::{CompiledKernel, Executable, GpuCaches, executable};
use super::context::GpuContext;
use super::pipelines::Pipeline;
use super::scratch::scratch_texture;
use crate::codegen::TextureCopy;
use crate::runtime::pool::texture_bytes;

/// Runs `graph`: compiles or finds its executable, allocates its written
/// buffers, encodes one command buffer and submits it without waiting.
/// Returns the storage of each output in `graph.key.outputs` order.
/// With `readback` `(staging, n)`, the first `n` outputs are also copied
/// into that staging buffer, one after another, by the same command
/// buffer: reading a result then costs one submission and one wait
/// instead of two of each.
pub(crate) fn run_graph(
    (ctx, target): (&GpuContext, &Target),
    caches: &Mutex<GpuCaches>,
    pool: &Arc<BufferPool>,
    graph: &Graph,
    readback: Option<(&wgpu::Buffer, usize)>,
) -> Result<Vec<Storage>> {
    let metrics = &pool.metrics;
    let (exe, compiled) = {
        let mut caches = caches.lock().unwrap_or_else(|e| e.into_inner());
        executable((ctx, target), &mut caches, metrics, graph)?
    };
    if compiled {
        if let Some(disk) = &ctx.pipeline_cache {
            disk.save_if_due();
        }
    }
    let encode_start = std::time::Instant::now();
    // Validation errors of this run's bind groups and commands are caught
    // here, and an invalid command buffer is never submitted: submitted,
    // its error would surface later (from the submission thread) and be
    // reported by the next, unrelated run.
    let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
    // Buffers and textures the run gives back while it is encoded are
    // taken by no other thread before it is submitted.
    let order = pool.queue_order();
    let mut run = Run::start(ctx, target, pool, graph, &exe)?;
    let mut encoder = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    let queries = timestamp_queries(ctx, exe.kernels.len());
    run.encode(&mut encoder, queries.as_ref())?;
    run.report_memory();
    metrics.add("kernel_launches", exe.kernels.len() as u64);
    metrics.add("kernel_bytes_read", exe.work.bytes_read);
    metrics.add("kernel_bytes_written", exe.work.bytes_written);
    metrics.add("matmul_flops", exe.work.matmul_flops);
    let checks = match &exe.checks {
        Some(flags) => {
            let staging = ctx.staging(2)?;
            encoder.copy_buffer_to_buffer(flags, 0, &staging, 0, Some(8));
            Some(staging)
        }
        None => None,
    };
    if let Some(readback) = readback {
        run.copy_outputs(&mut encoder, readback)?;
    }
    let timestamps = queries
        .as_ref()
        .map(|q| resolve_timestamps(ctx, &mut encoder, q, exe.kernels.len()));
    let commands = encoder.finish();
    if let Some(e) = pollster::block_on(scope.pop()) {
        return Err(Error::Device {
            during: format!("graph {:016x}", graph.hash),
            message: e.to_string(),
        });
    }
    ctx.submit(commands);
    drop(order);
    metrics.record("encode_submit", encode_start.elapsed());
    if let Some(staging) = timestamps {
        run.record_profile(&staging)?;
    }
    metrics.add("graphs_executed", 1);
    ctx.take_error(&format!("graph {:016x}", graph.hash))?;
    if let Some(staging) = checks {
        run.anomaly(&staging)?;
    }
    run.outputs()
}

/// One run of an executable: the buffers each node is read from and
/// written to while its kernels are encoded.
struct Run<'a> {
    ctx: &'a GpuContext,
    part_bytes: usize,
    pool: &'a Arc<BufferPool>,
    graph: &'a Graph,
    exe: &'a Executable,
    params: NodeBuffer,
    /// Stored data each node is read from, and the buffer each written
    /// node is written to. They differ for an output that is itself an
    /// input (a strided view being made contiguous).
    buffers: Vec<NodeBuffer>,
    written: Vec<NodeBuffer>,
    /// The device's live bytes while each kernel encoded so far held its
    /// buffers and scratch (for the memory report).
    levels: Vec<u64>,
}

impl<'a> Run<'a> {
    /// Binds the graph's stored inputs, hands donated input buffers to
    /// their outputs, allocates empty outputs and uploads the parameters.
    fn start(
        ctx: &'a GpuContext,
        target: &Target,
        pool: &'a Arc<BufferPool>,
        graph: &'a Graph,
        exe: &'a Executable,
    ) -> Result<Run<'a>> {
        let nodes = &exe.key.nodes;
        let mut run = Run {
            ctx,
            part_bytes: target.binding_part_bytes,
            pool,
            graph,
            exe,
            params: None,
            buffers: vec![None; nodes.len()],
            written: vec![None; nodes.len()],
            levels: Vec::with_capacity(exe.kernels.len()),
        };
        for (i, n) in nodes.iter().enumerate() {
            if let GKind::Input { slot, .. } = n.kind {
                match &graph.inputs[slot].buffer {
                    DataBuffer::Gpu(b) => run.buffers[i] = Some(b.clone()),
                    DataBuffer::Cpu(_) => {
                        return Err(run.error(format!(
                            "input created at {} lives on the CPU device; tensors of different devices cannot be mixed",
                            run.location(i)
                        )));
                    }
                }
            }
        }
        let metrics = &pool.metrics;
        for &(o, x) in &exe.donations.inputs {
            run.written[o] = run.buffers[x].clone();
            metrics.add("buffers_donated", 1);
        }
        // Outputs a kernel writes get their buffers when it is encoded
        // (not before, so that they do not add to the memory held while
        // earlier kernels run); the others (empty ones) here.
        let mut by_kernel = vec![false; nodes.len()];
        for k in &exe.kernels {
            for &w in &k.source.writes {
                by_kernel[w] = true;
            }
        }
        for &o in &exe.key.outputs {
            if run.written[o].is_none() && !by_kernel[o] {
                let words = nodes[o].dtype.words(numel(&nodes[o].shape));
                let (label, at) = (run.op_label(o), run.location(o));
                let what = move || format!("output of {label} at {at}");
                run.written[o] = Some(ctx.alloc(pool, words, what)?);
            }
        }
        if !graph.params.is_empty() {
            metrics.add("params_uploaded_bytes", graph.params.len() as u64 * 4);
            run.params = Some(ctx.upload(pool, &graph.params)?);
        }
        Ok(run)
    }

    /// The source line of the traced node that node `n` computes.
    fn location(&self, n: usize) -> &'static Location<'static> {
        self.graph.locations[self.exe.origin[n]]
    }

    /// The op node `n` computes, as the user called it (`Graph::op_label`).
    fn op_label(&self, n: usize) -> &'static str {
        self.graph.op_label(self.exe.origin[n])
    }

    fn error(&self, message: String) -> Error {
        Error::Device {
            during: format!("graph {:016x}", self.graph.hash),
            message,
        }
    }

    /// Encodes every kernel: in one compute pass (which a kernel's
    /// packing copies end, copies being outside passes), or (profiling)
    /// one pass per kernel, each submitted and waited for alone, with timestamps
    /// (`queries`) where the profile's clock is the device's, its wall
    /// time added to the profile otherwise.
    fn encode(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        queries: Option<&wgpu::QuerySet>,
    ) -> Result<()> {
        let profile = self.ctx.profile.as_ref();
        let by_wall_clock = profile.is_some() && queries.is_none();
        if by_wall_clock {
            // By the wall clock, the first kernel's submit would also run
            // what is pending on the queue (this run's uploads, the last
            // run's copies): an empty submit and a wait, untimed, run it
            // first.
            let empty = (self.ctx.device)
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            self.ctx.submit(empty.finish());
            self.ctx.wait()?;
        }
        if let Some(flags) = &self.exe.checks {
            encoder.clear_buffer(flags, 0, None);
        }
        let mut pass: Option<wgpu::ComputePass<'static>> = None;
        for (ki, k) in self.exe.kernels.iter().enumerate() {
            let commands = self
                .dispatches(k)
                .map_err(|e| self.naming_live_buffers(e, ki))?;
            // Copies are encoded outside compute passes, before the
            // kernel's own (whose timestamps time its dispatches).
            if !commands.copies.is_empty() {
                drop(pass.take());
                self.encode_copies(encoder, &commands.copies, k, by_wall_clock)?;
            }
            if profile.is_some() {
                // A pass of its own (with its timestamps, on a GPU).
                drop(pass.take());
            }
            let packs = commands.dispatches.len() - 1;
            for (d, (pipeline, bind_group, workgroups)) in commands.dispatches.iter().enumerate() {
                let p = pass.get_or_insert_with(|| begin_pass(encoder, queries, ki));
                p.set_pipeline(pipeline);
                p.set_bind_group(0, bind_group, &[]);
                p.dispatch_workgroups(workgroups.0, workgroups.1, 1);
                if by_wall_clock && d < packs {
                    // By the wall clock, a matmul's packing kernels are
                    // timed apart from it.
                    drop(pass.take());
                    self.time_alone(encoder, || format!("pack {d} of {}", self.profile_label(k)))?;
                }
            }
            // Intermediates go back to the pool right after their last
            // reader, so later kernels of the same pass reuse them (wgpu
            // orders the dispatches' accesses).
            for &n in &self.exe.releases[ki] {
                self.written[n] = None;
            }
            if profile.is_some() {
                // Profiling: each kernel runs alone, so that a driver that
                // overlaps independent dispatches, as lavapipe does, cannot
                // blur the times.
                drop(pass.take());
                if by_wall_clock {
                    self.time_alone(encoder, || self.profile_label(k))?;
                } else {
                    self.submit_alone(encoder)?;
                }
            }
        }
        Ok(())
    }

    /// The buffer of `node`, which a packing copy reads.
    fn copied(&self, node: usize) -> Result<wgpu::Buffer> {
        let stored = self.buffers[node].as_ref();
        match stored.or(self.written[node].as_ref()) {
            Some(buffer) => Ok(buffer.buffer().clone()),
            None => Err(self.error(format!("node {node} is copied before it is written"))),
        }
    }

    /// Encodes kernel `k`'s packing copies (outside any pass); by the
    /// wall clock, each submitted and timed alone.
    fn encode_copies(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        copies: &[(wgpu::Buffer, wgpu::Texture, TextureCopy)],
        k: &CompiledKernel,
        by_wall_clock: bool,
    ) -> Result<()> {
        for (c, copy) in copies.iter().enumerate() {
            encode_copy(self.ctx, encoder, copy);
            if by_wall_clock {
                self.time_alone(encoder, || format!("copy {c} of {}", self.profile_label(k)))?;
            }
        }
        Ok(())
    }

    /// Submits what `encoder` holds alone, waits for it and adds its wall
    /// time to the profile under `label` (profiling by the wall clock).
    fn time_alone(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        label: impl FnOnce() -> String,
    ) -> Result<()> {
        let start = self.submit_alone(encoder)?;
        if let Some(profile) = &self.ctx.profile {
            profile.add(label(), start.elapsed().as_nanos() as f64);
        }
        Ok(())
    }

    /// Submits what `encoder` holds alone and waits for it (profiling),
    /// leaving a fresh encoder: returns when the submit began.
    fn submit_alone(&self, encoder: &mut wgpu::CommandEncoder) -> Result<std::time::Instant> {
        let fresh =
            (self.ctx.device).create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let done = std::mem::replace(encoder, fresh).finish();
        let start = std::time::Instant::now();
        self.ctx.submit(done);
        self.ctx.wait()?;
        Ok(start)
    }

    /// The dispatches of kernel `k` (its packing kernels, then itself),
    /// each with its bind group, after taking buffers for what it writes
    /// (as late as possible, so that the pool can hand back buffers that
    /// earlier kernels released).
    fn dispatches(&mut self, k: &'a CompiledKernel) -> Result<KernelCommands<'a>> {
        let nodes = &self.exe.key.nodes;
        // Outputs that take over an intermediate this kernel reads last.
        for &(o, x) in &k.takes_over {
            let Some(buffer) = self.written[x].clone() else {
                return Err(self.error(format!(
                    "node {o} was planned to write into the buffer of node {x}, which was released before"
                )));
            };
            self.written[o] = Some(buffer);
            self.pool.metrics.add("buffers_reused_in_place", 1);
        }
        for &w in &k.source.writes {
            if self.written[w].is_none() {
                let what = || format!("output of {} at {}", self.op_label(w), self.location(w));
                let words = nodes[w].dtype.words(numel(&nodes[w].shape));
                self.written[w] = Some(self.ctx.alloc(self.pool, words, what)?);
            }
        }
        // Its scratch textures, from the device's pool: live (and within
        // the memory limit) while it is encoded, given back right after
        // for the next kernel (dispatches run in the order encoded).
        let mut textures = Vec::with_capacity(k.source.scratch.len());
        for &size in &k.source.scratch {
            let texture = (self.pool)
                .take_texture(&self.ctx.device, size, || scratch_texture(self.ctx, size));
            textures.push(texture.map_err(|short| {
                let w = k.source.writes.first().copied().unwrap_or(0);
                let what = format!(
                    "a matmul operand's scratch texture for {} at {}",
                    self.op_label(w),
                    self.location(w)
                );
                short.into_error(what)
            })?);
        }
        let scratch: Vec<wgpu::TextureView> = textures.iter().map(|t| t.view().clone()).collect();
        let scratch_bytes = scratch_bytes(k);
        let bind = |d: usize, pipeline: &Pipeline, source: &KernelSource| {
            bind_group(
                (self.ctx, self.part_bytes),
                self.graph.hash,
                (pipeline, source),
                (
                    self.params.as_ref(),
                    self.exe.checks.as_ref(),
                    k.sizes[d].as_ref(),
                ),
                (&self.buffers, &self.written),
                (&scratch, scratch_bytes),
                (&k.bind_groups[d], &self.pool.metrics),
            )
        };
        let mut commands = KernelCommands {
            copies: Vec::new(),
            dispatches: Vec::with_capacity(1 + k.packs.len()),
        };
        for (d, (source, (pipeline, workgroups))) in k.source.packs.iter().zip(&k.packs).enumerate()
        {
            match source.copy {
                Some(copy) => {
                    let texture = scratch[copy.slot].texture().clone();
                    commands
                        .copies
                        .push((self.copied(copy.node)?, texture, copy));
                }
                None => {
                    let group = bind(d, pipeline, source)?;
                    commands.dispatches.push((&**pipeline, group, *workgroups));
                }
            }
        }
        let main = bind(k.packs.len(), &k.pipeline, &k.source)?;
        commands.dispatches.push((&*k.pipeline, main, k.workgroups));
        // While its buffers and this run's scratch are held.
        self.levels.push(self.pool.metrics.value("bytes_live"));
        Ok(commands)
    }

    /// An `Error::OutOfMemory` met while kernel `kernel` takes its
    /// buffers, naming the largest of this graph's buffers live then
    /// (the device adds the largest tensors held outside it).
    fn naming_live_buffers(&self, e: Error, kernel: usize) -> Error {
        e.with_largest(|_| {
            format!(
                "in graph {:016x} at kernel {kernel} of {}: {}",
                self.graph.hash,
                self.exe.kernels.len(),
                largest_listed(live_at(self.planned_buffers(), kernel), 5)
            )
        })
    }

    /// Offers the device this run's memory report (kept if its peak is
    /// the highest since the metrics were reset): the buffers live at its
    /// highest level, found from the plan (`memory_report`).
    fn report_memory(&self) {
        let Some(&peak) = self.levels.iter().max() else {
            return;
        };
        self.pool.offer_report(peak, || {
            let exe = self.exe;
            let at = |k: usize| match exe.kernels[k].source.writes.first() {
                Some(&w) => format!(
                    "{} {:?} @ {}",
                    self.op_label(w),
                    exe.key.nodes[w].shape,
                    self.location(w)
                ),
                None => "a kernel without outputs".to_string(),
            };
            let scratch: Vec<u64> = exe.kernels.iter().map(scratch_bytes).collect();
            report_of(
                (self.graph.hash, &at),
                &self.levels,
                self.planned_buffers(),
                &scratch,
            )
        });
    }

    /// Every buffer of this run with the kernels it is live across: the
    /// inputs and outputs not written by a kernel from the start, the
    /// others from the kernel that writes them to their release.
    fn planned_buffers(&self) -> Vec<PlannedBuffer> {
        let exe = self.exe;
        let nodes = &exe.key.nodes;
        let mut from: Vec<Option<usize>> = vec![None; nodes.len()];
        let mut to: Vec<Option<usize>> = vec![None; nodes.len()];
        for (k, kernel) in exe.kernels.iter().enumerate() {
            for &w in &kernel.source.writes {
                from[w].get_or_insert(k);
            }
            for &n in &exe.releases[k] {
                to[n] = Some(k);
            }
        }
        // An output writing into a donated input's buffer is that buffer;
        // an intermediate taken over by an output ends where the output's
        // kernel begins (the buffer lives on as the output).
        let mut same_as: Vec<Option<usize>> = vec![None; nodes.len()];
        for &(o, x) in &exe.donations.inputs {
            same_as[o] = Some(x);
        }
        for &(o, x) in &exe.donations.intermediates {
            if let Some(k) = from[o] {
                to[x] = Some(k.saturating_sub(1));
            }
        }
        let is_output = |n: usize| exe.key.outputs.contains(&n);
        let mut planned = Vec::new();
        for (n, node) in nodes.iter().enumerate() {
            let input = matches!(node.kind, GKind::Input { .. });
            // The buffer, where the run still holds it, tells shared
            // buffers apart and gives the size allocated.
            let held = if input {
                &self.buffers[n]
            } else {
                &self.written[n]
            };
            let bytes = match held {
                Some(b) => b.buffer().size(),
                None if input || from[n].is_none() => continue,
                None => size_class((node.dtype.words(numel(&node.shape)) as u64 * 4).max(16)),
            };
            let held = same_as[n].map_or(held, |x| &self.buffers[x]);
            let id = held
                .as_ref()
                .map_or(usize::MAX - n, |b| Arc::as_ptr(b) as usize);
            let role = if input {
                BufferRole::Input
            } else if is_output(n) {
                BufferRole::Output
            } else {
                BufferRole::Intermediate
            };
            planned.push(PlannedBuffer {
                id,
                from: if input { 0 } else { from[n].unwrap_or(0) },
                to: if input { None } else { to[n] },
                buffer: ReportedBuffer {
                    bytes,
                    role,
                    op: if input {
                        "input".to_string()
                    } else {
                        self.op_label(n).to_string()
                    },
                    shape: node.shape.clone(),
                    location: self.location(n).to_string(),
                },
            });
        }
        planned
    }

    /// Copies the first `count` outputs into `staging`, one after another
    /// (a read's results, fetched by the same command buffer).
    fn copy_outputs(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        (staging, count): (&wgpu::Buffer, usize),
    ) -> Result<()> {
        let mut offset = 0;
        for &o in self.exe.key.outputs.iter().take(count) {
            let node = &self.exe.key.nodes[o];
            let bytes = node.dtype.words(numel(&node.shape)) as u64 * 4;
            let buf = self.output_buffer(o)?;
            encoder.copy_buffer_to_buffer(buf.buffer(), 0, staging, offset, Some(bytes));
            offset += bytes;
        }
        Ok(())
    }

    /// The buffer output node `o` was written to.
    fn output_buffer(&self, o: usize) -> Result<&Arc<crate::runtime::storage::GpuBuffer>> {
        self.written[o]
            .as_ref()
            .ok_or_else(|| self.error(format!("output node {o} has no buffer")))
    }

    /// Reads the kernels' timestamps back and adds them to the profile.
    fn record_profile(&self, staging: &wgpu::Buffer) -> Result<()> {
        let Some(profile) = self.ctx.profile.as_ref() else {
            return Ok(());
        };
        let ticks: Vec<u64> =
            pollster::block_on(self.ctx.read_mapped(staging, "reading kernel timestamps"))?;
        let period = self.ctx.queue.get_timestamp_period() as f64;
        for (k, pair) in self.exe.kernels.iter().zip(ticks.chunks_exact(2)) {
            let ns = pair[1].saturating_sub(pair[0]) as f64 * period;
            profile.add(self.profile_label(k), ns);
        }
        Ok(())
    }

    /// Kernel `k` as the profile names it: its first output's op, shape
    /// and source line.
    fn profile_label(&self, k: &CompiledKernel) -> String {
        match k.source.writes.first() {
            Some(&w) => format!(
                "{} {:?} ({} outputs) @ {}",
                self.op_label(w),
                self.exe.key.nodes[w].shape,
                k.source.writes.len(),
                self.location(w)
            ),
            None => "kernel without outputs".to_string(),
        }
    }

    /// Anomaly mode: waits for the run and turns the earliest node its
    /// kernels flagged into an error naming the op and its source line.
    fn anomaly(&self, staging: &wgpu::Buffer) -> Result<()> {
        let flags: Vec<u32> =
            pollster::block_on(self.ctx.read_mapped(staging, "reading anomaly checks"))?;
        // Each word holds u32::MAX - node of the earliest node flagged.
        let flagged = |slot: usize| {
            let word = flags.get(slot).copied().unwrap_or(0);
            (word != 0).then(|| (u32::MAX - word) as usize)
        };
        let (value, index) = (flagged(0), flagged(1));
        let node = match (value, index) {
            (None, None) => return Ok(()),
            (Some(v), Some(i)) => v.min(i),
            (Some(n), None) | (None, Some(n)) => n,
        };
        let op = self.op_label(node);
        let location = self.location(node).to_string();
        Err(if index == Some(node) {
            Error::IndexOutOfRange {
                op,
                location,
                detail: format!(
                    "an index outside 0..{} (the GPU clamps it)",
                    indexed_axis_len(&self.exe.key.nodes, node).unwrap_or(0)
                ),
            }
        } else {
            Error::NonFinite {
                op,
                location,
                what: "NaN or infinity".to_string(),
            }
        })
    }

    /// The storage of each output, in the graph's output order.
    fn outputs(&self) -> Result<Vec<Storage>> {
        let nodes = &self.exe.key.nodes;
        self.exe
            .key
            .outputs
            .iter()
            .map(|&o| {
                Ok(Storage {
                    buffer: DataBuffer::Gpu(self.output_buffer(o)?.clone()),
                    layout: Layout::contiguous(&nodes[o].shape),
                })
            })
            .collect()
    }
}

/// Profiling by the device's clock: a query set for timestamps at both
/// ends of each of `kernels` kernels' passes.
fn timestamp_queries(ctx: &GpuContext, kernels: usize) -> Option<wgpu::QuerySet> {
    let profile = ctx.profile.as_ref()?;
    (profile.clock == ProfileClock::Timestamps).then(|| {
        ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("lazywgpu kernel timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: 2 * kernels.max(1) as u32,
        })
    })
}

/// Resolves the timestamp queries of `kernels` kernels into a buffer the
/// host can map, at the end of `encoder`.
fn resolve_timestamps(
    ctx: &GpuContext,
    encoder: &mut wgpu::CommandEncoder,
    queries: &wgpu::QuerySet,
    kernels: usize,
) -> wgpu::Buffer {
    let bytes = 16 * kernels.max(1) as u64;
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
    encoder.resolve_query_set(queries, 0..2 * kernels as u32, &resolved, 0);
    encoder.copy_buffer_to_buffer(&resolved, 0, &staging, 0, Some(bytes));
    staging
}

/// Bytes of kernel `k`'s scratch textures.
fn scratch_bytes(k: &CompiledKernel) -> u64 {
    k.source.scratch.iter().map(|&s| texture_bytes(s)).sum()
}

/// What kernel `k` encodes (`Run::dispatches`): its operands packed by
/// copies (the node's buffer, the scratch texture, the copy), then its
/// dispatches (packing kernels, then itself), each with its bind group.
struct KernelCommands<'a> {
    copies: Vec<(wgpu::Buffer, wgpu::Texture, TextureCopy)>,
    dispatches: Vec<(&'a wgpu::ComputePipeline, wgpu::BindGroup, (u32, u32))>,
}

/// A compute pass for kernel `ki`, writing its timestamps into `queries`
/// where given.
fn begin_pass(
    encoder: &mut wgpu::CommandEncoder,
    queries: Option<&wgpu::QuerySet>,
    ki: usize,
) -> wgpu::ComputePass<'static> {
    let timestamp_writes = queries.map(|query_set| wgpu::ComputePassTimestampWrites {
        query_set,
        beginning_of_pass_write_index: Some(2 * ki as u32),
        end_of_pass_write_index: Some(2 * ki as u32 + 1),
    });
    let descriptor = wgpu::ComputePassDescriptor {
        label: None,
        timestamp_writes,
    };
    encoder.begin_compute_pass(&descriptor).forget_lifetime()
}

/// Encodes a packing copy: the node's rows into the texture, a copy per
/// column block (its layers one run over the batch), and zeros (from the
/// device's buffer of them) into the texture's rows past them.
fn encode_copy(
    ctx: &GpuContext,
    encoder: &mut wgpu::CommandEncoder,
    (buffer, texture, copy): &(wgpu::Buffer, wgpu::Texture, TextureCopy),
) {
    let (width, height, layers) = copy.size;
    let blocks = copy.col_blocks();
    let entries = layers / blocks;
    let mut rows_from = |buffer: &wgpu::Buffer, (offset, pitch), (y, z), rows| {
        encoder.copy_buffer_to_texture(
            wgpu::TexelCopyBufferInfo {
                buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset,
                    bytes_per_row: Some(pitch),
                    rows_per_image: Some(rows),
                },
            },
            wgpu::TexelCopyTextureInfo {
                texture,
                mip_level: 0,
                origin: wgpu::Origin3d { x: 0, y, z },
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::Extent3d {
                width,
                height: rows,
                depth_or_array_layers: entries,
            },
        );
    };
    // A block's texel rows: `width` texels, 16 bytes each.
    let block_bytes = u64::from(width) * 16;
    let padding = height.saturating_sub(copy.rows);
    // The zeros' rows: one block's, at copies' row alignment.
    let zeros_pitch = (width * 16).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
    let zeros = (padding > 0).then(|| {
        let bytes = u64::from(zeros_pitch) * u64::from(padding) * u64::from(entries);
        ctx.zeros(bytes)
    });
    for block in 0..blocks {
        let offset = copy.offset_bytes + u64::from(block) * block_bytes;
        let z = block * entries;
        rows_from(buffer, (offset, copy.bytes_per_row), (0, z), copy.rows);
        if let Some(zeros) = &zeros {
            rows_from(zeros, (0, zeros_pitch), (copy.rows, z), padding);
        }
    }
}
