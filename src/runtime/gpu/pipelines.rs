//! Creating compute pipelines from WGSL, one at a time or a graph's new
//! ones at once. On a CPU adapter (lavapipe) the driver compiles a
//! pipeline (LLVM) on the thread that asks for it, so a first step, whose
//! kernels are all new, compiles them on as many threads as the CPU has
//! cores (`compile_new`). wgpu's error scopes are per thread, so each
//! pipeline's validation errors stay with the thread that made it.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::codegen::validate_wgsl;

/// How many threads create a graph's new pipelines: the CPU's cores, read
/// once (the standard library reads cgroup files on Linux each time it
/// is asked, which a new size's compile would pay every step).
pub(super) fn compile_threads() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get))
}

/// A compute pipeline and the layout of its bind group 0, fetched once:
/// asking wgpu for the layout at each bind group made went through its
/// registry (a sixth of binding a new size's dispatches on lavapipe).
pub(super) struct Pipeline {
    pub compute: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

impl Pipeline {
    fn new(compute: wgpu::ComputePipeline) -> Pipeline {
        let layout = compute.get_bind_group_layout(0);
        Pipeline { compute, layout }
    }
}

impl std::ops::Deref for Pipeline {
    type Target = wgpu::ComputePipeline;
    fn deref(&self) -> &wgpu::ComputePipeline {
        &self.compute
    }
}

/// What creating a pipeline needs of the device.
#[derive(Clone, Copy)]
pub(super) struct PipelineMaker<'a> {
    pub device: &'a wgpu::Device,
    /// The pipeline cache kept on disk, where the backend has one.
    pub cache: Option<&'a wgpu::PipelineCache>,
    /// Whether kernels keep wgpu's runtime checks
    /// (`compile::shader_checks_needed`).
    pub checked: bool,
}

impl PipelineMaker<'_> {
    /// A compute pipeline (entry point `main`) from `wgsl`, validated by
    /// naga first; the validation or driver error as text otherwise.
    pub fn create(&self, wgsl: &str) -> std::result::Result<Pipeline, String> {
        validate_wgsl(wgsl)?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let descriptor = wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(wgsl.into()),
        };
        let module = if self.checked {
            self.device.create_shader_module(descriptor)
        } else {
            // SAFETY: see `compile::shader_checks_needed`: the driver
            // bounds every buffer access, and the generated code's loops,
            // local arrays and texture loads are bounded by construction.
            unsafe {
                self.device.create_shader_module_trusted(
                    descriptor,
                    wgpu::ShaderRuntimeChecks::unchecked(),
                )
            }
        };
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: self.cache,
            });
        match pollster::block_on(scope.pop()) {
            Some(e) => Err(e.to_string()),
            None => Ok(Pipeline::new(pipeline)),
        }
    }

    /// Creates the pipelines of `texts` (distinct WGSL) on up to
    /// `threads` threads, each taking the next text not yet taken. A text
    /// that fails is left out: the caller creates it again, alone, and
    /// reports its error with the kernel it belongs to.
    pub fn compile_new(&self, texts: &[&str], threads: usize) -> HashMap<String, Pipeline> {
        let threads = threads.min(texts.len());
        if threads < 2 {
            return HashMap::new();
        }
        let next = AtomicUsize::new(0);
        let work = || {
            let mut made = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&text) = texts.get(i) else {
                    return made;
                };
                if let Ok(p) = self.create(text) {
                    made.push((text.to_string(), p));
                }
            }
        };
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
            // A worker that panicked (inside wgpu) leaves its texts to the
            // caller, which meets the same panic where it can be reported.
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_default())
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::gpu::GpuContext;

    /// A kernel that writes `n` (each `n` its own pipeline).
    fn kernel(n: u32) -> String {
        format!(
            "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
             @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n\
             x[g.x] = {n}u;\n}}\n"
        )
    }

    #[test]
    fn new_pipelines_compile_on_several_threads_and_failures_are_left_to_the_caller() {
        let Ok(ctx) = GpuContext::shared() else {
            let required = crate::config::ProcessConfig::get().require_gpu;
            assert!(
                !required,
                "LAZYWGPU_REQUIRE_GPU is set but no adapter was found"
            );
            return;
        };
        let maker = PipelineMaker {
            device: &ctx.device,
            cache: None,
            checked: true,
        };
        let good: Vec<String> = (0..5).map(kernel).collect();
        let unparsable = "fn main( {".to_string();
        // WGSL that naga accepts and the device refuses: a workgroup past
        // its limits, reported in the error scope of the thread that
        // asked for it.
        let too_wide = "@compute @workgroup_size(100000) fn main() {}".to_string();
        let mut texts: Vec<&str> = good.iter().map(String::as_str).collect();
        texts.extend([unparsable.as_str(), too_wide.as_str()]);
        let made = maker.compile_new(&texts, 3);
        let mut names: Vec<&String> = made.keys().collect();
        names.sort();
        assert_eq!(names, good.iter().collect::<Vec<_>>());
        assert!(maker.create(&unparsable).is_err());
        let refused = maker
            .create(&too_wide)
            .map(|_| ())
            .expect_err("past the limits");
        assert!(refused.to_lowercase().contains("workgroup"), "{refused}");
        assert!(
            maker.compile_new(&texts, 1).is_empty(),
            "one thread: the caller compiles"
        );
    }
}
