//! Baselines measured in the same run as the workloads: a hand-written
//! `vec4` copy kernel on the same adapter (bandwidth ceiling), written
//! directly against wgpu so it shares no code with lazywgpu's codegen.

use std::time::{Duration, Instant};

use wgpu::util::DeviceExt;

/// A wgpu device of its own with one copy pipeline.
pub struct CopyKernel {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
}

const COPY_WGSL: &str = include_str!("../../shaders/copy_vec4.wgsl");

impl CopyKernel {
    pub fn new() -> Option<CopyKernel> {
        pollster::block_on(async {
            let instance = wgpu::Instance::new(
                wgpu::InstanceDescriptor::new_without_display_handle_from_env(),
            );
            let adapter = instance
                .request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    force_fallback_adapter: false,
                    compatible_surface: None,
                    apply_limit_buckets: false,
                })
                .await
                .ok()?;
            let (device, queue) = adapter
                .request_device(&wgpu::DeviceDescriptor {
                    label: None,
                    required_features: wgpu::Features::empty(),
                    required_limits: adapter.limits(),
                    experimental_features: wgpu::ExperimentalFeatures::disabled(),
                    memory_hints: wgpu::MemoryHints::Performance,
                    trace: wgpu::Trace::Off,
                })
                .await
                .ok()?;
            let pipeline = compile(&device, COPY_WGSL);
            Some(CopyKernel {
                device,
                queue,
                pipeline,
            })
        })
    }

    /// Median wall time of submit + wait for copying `n` f32 (n % 4 == 0).
    pub fn time_copy(&self, n: usize, runs: usize) -> Duration {
        self.time_pipeline(&self.pipeline, n, runs)
    }

    /// Median wall time of W1 (`sigmoid(tanh(x*2+1) - x) * x + 0.5`) as a
    /// hand-written vec4 kernel over `n` f32: the fused ceiling where the
    /// chain is compute-bound.
    #[allow(dead_code)]
    pub fn time_w1_by_hand(&self, n: usize, runs: usize) -> Duration {
        let pipeline = compile(&self.device, include_str!("../../shaders/w1_fused.wgsl"));
        self.time_pipeline(&pipeline, n, runs)
    }

    /// Median wall time of submitting one dispatch of one workgroup that
    /// does nothing and waiting for it: the latency floor of a step.
    #[allow(dead_code)]
    pub fn time_empty(&self, runs: usize) -> Duration {
        let pipeline = compile(&self.device, "@compute @workgroup_size(1) fn main() {}");
        self.time_dispatch(&pipeline, None, (1, 1), runs)
    }

    /// Median wall time of `pipeline` (bindings: src, dst) over `n` f32,
    /// four elements an invocation, 256 invocations a workgroup.
    fn time_pipeline(&self, pipeline: &wgpu::ComputePipeline, n: usize, runs: usize) -> Duration {
        let src = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(&vec![1.0f32; n]),
                usage: wgpu::BufferUsages::STORAGE,
            });
        let dst = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: n as u64 * 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: src.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: dst.as_entire_binding(),
                },
            ],
        });
        let groups = (n / 4).div_ceil(256) as u32;
        let grid = if groups > 65535 {
            (65535, groups.div_ceil(65535))
        } else {
            (groups, 1)
        };
        self.time_dispatch(pipeline, Some(&bind), grid, runs)
    }

    /// Median wall time of one dispatch of `pipeline` over `grid`,
    /// submitted and waited for.
    fn time_dispatch(
        &self,
        pipeline: &wgpu::ComputePipeline,
        bind: Option<&wgpu::BindGroup>,
        grid: (u32, u32),
        runs: usize,
    ) -> Duration {
        median_of(runs, || {
            let mut enc = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(pipeline);
                if let Some(bind) = bind {
                    pass.set_bind_group(0, bind, &[]);
                }
                pass.dispatch_workgroups(grid.0, grid.1, 1);
            }
            self.queue.submit([enc.finish()]);
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .expect("poll");
        })
    }
}

/// A compute pipeline from WGSL source with entry point `main`.
fn compile(device: &wgpu::Device, wgsl: &str) -> wgpu::ComputePipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(wgsl.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    })
}

/// Median wall time of `runs` calls of `f`, after two warm-up calls
/// (compiles, pool fills, caches).
pub fn median_of(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    f();
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[t.len() / 2]
}
