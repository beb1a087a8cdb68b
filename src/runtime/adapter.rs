//! What a GPU device runs on, as plain data: the adapter's identity, the
//! limits and features the library relies on, and the choices it made
//! from them. Benchmarks record it beside their figures (a table measured
//! on a GPU says which driver and limits gave it), and tests size their
//! cases from it instead of assuming lavapipe's limits.

use std::fmt;

use super::gpu::GpuContext;
use crate::kernel::{MatmulKernel, Target};

/// A GPU device's adapter, limits and kernel choices (see
/// [`crate::Device::adapter`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterReport {
    /// The adapter's name (`NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// The wgpu backend (`Vulkan`, `Metal`, `Dx12`).
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `Cpu`, ...
    pub device_type: String,
    /// The driver's name and version, as the adapter reports them.
    pub driver: String,
    /// PCI vendor and device ids.
    pub vendor_device: (u32, u32),
    /// The largest buffer the device may create, in bytes: a tensor or a
    /// readback larger than this is an [`crate::Error::TooLarge`].
    pub max_buffer_bytes: u64,
    /// The largest storage binding, in bytes (larger buffers are bound in
    /// parts of this size).
    pub max_storage_binding_bytes: u64,
    /// Storage buffers one kernel may bind.
    pub max_storage_buffers_per_stage: u32,
    /// Workgroups per dispatch dimension.
    pub max_workgroups_per_dimension: u32,
    /// The smallest and largest subgroup size the adapter reports.
    pub subgroup_sizes: (u32, u32),
    /// The optional wgpu features the device was created with.
    pub features: Vec<String>,
    /// The matmul kernel the library generates on this adapter.
    pub matmul_kernel: String,
    /// The loop-iteration limit lowering respects (`None`: no limit).
    pub loop_limit: Option<usize>,
    /// The rule by which a reduction's sizes pick its kernel
    /// (`tree-from-256`: a workgroup tree from 256 elements an output;
    /// `-no-fours`: split sums do not read four elements at a time).
    pub reduce_rule: String,
    /// Reduced elements from which a reduction into few results is split
    /// into stages of partial results (4,096 on GPUs, 65,536 on CPU
    /// adapters; `LAZYWGPU_GPU_CHOICES=1` takes the GPU's anywhere).
    pub reduce_split_from: usize,
    /// The most stages such a reduction is split into (4 on GPUs, 2 on
    /// CPU adapters).
    pub reduce_stages: usize,
    /// Whether row kernels (layer norm, long softmax rows) give each row
    /// a workgroup (GPUs) rather than an invocation (CPU adapters).
    pub rows_per_workgroup: bool,
    /// What autotuning chose and measured for the matmul kernel, where it
    /// ran or was read from the tuning cache (see
    /// [`crate::DeviceConfig::autotune`]).
    pub tuning: Option<crate::Tuning>,
    /// What autotuning chose and measured for the reduction rule.
    pub reduce_tuning: Option<crate::Tuning>,
    /// What per-class tuning chose and measured for each class of matmul
    /// sizes compiled so far (each `Tuning::class` names its class), in
    /// the order they were first compiled.
    pub matmul_class_tunings: Vec<crate::Tuning>,
    /// Whether the kernel choices above (`matmul_kernel`, `reduce_rule`
    /// and the kernel of each matmul class) are pinned: under
    /// [`crate::distributed::DataParallel`], every rank's device, rank 0's
    /// included, generates rank 0's choices, and no matmul class is tuned
    /// after. `tuning` and `matmul_class_tunings` keep what this device's
    /// own tuning measured before.
    pub kernels_pinned: bool,
}

impl AdapterReport {
    pub(crate) fn of(
        ctx: &GpuContext,
        target: &Target,
        tunings: Vec<crate::Tuning>,
    ) -> AdapterReport {
        let of_kind = |kind: &str| {
            tunings
                .iter()
                .find(|t| t.kind == kind && t.class.is_none())
                .cloned()
        };
        let matmul_class_tunings = tunings
            .iter()
            .filter(|t| t.class.is_some())
            .cloned()
            .collect();
        let features = ctx
            .features
            .iter_names()
            .map(|(name, _)| name.to_string())
            .collect();
        let matmul_kernel = match target.matmul {
            MatmulKernel::Tiled => "tiled 4x4".to_string(),
            MatmulKernel::Blocked => "blocked 8x8".to_string(),
            MatmulKernel::Lanes(l) => format!("lanes (subgroup {})", l.subgroup),
            MatmulKernel::Coop(c) => format!("coop 16x16 f16 (subgroup {})", c.subgroup),
        };
        let driver = [ctx.info.driver.as_str(), ctx.info.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        AdapterReport {
            name: ctx.info.name.clone(),
            backend: format!("{:?}", ctx.info.backend),
            device_type: format!("{:?}", ctx.info.device_type),
            driver,
            vendor_device: (ctx.info.vendor, ctx.info.device),
            max_buffer_bytes: ctx.limits.max_buffer_size,
            max_storage_binding_bytes: ctx.limits.max_storage_buffer_binding_size,
            max_storage_buffers_per_stage: ctx.limits.max_storage_buffers_per_shader_stage,
            max_workgroups_per_dimension: ctx.limits.max_compute_workgroups_per_dimension,
            subgroup_sizes: (ctx.info.subgroup_min_size, ctx.info.subgroup_max_size),
            features,
            matmul_kernel,
            loop_limit: target.loop_limit,
            reduce_rule: target.reduce_rule.name(),
            reduce_split_from: target.reduce_split.threshold,
            reduce_stages: target.reduce_split.max_stages,
            rows_per_workgroup: target.rows_per_workgroup,
            tuning: of_kind("matmul"),
            reduce_tuning: of_kind("reduce"),
            matmul_class_tunings,
            kernels_pinned: false,
        }
    }
}

impl fmt::Display for AdapterReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} ({}, {}), driver {}, ids {:04x}:{:04x}",
            self.name,
            self.backend,
            self.device_type,
            self.driver,
            self.vendor_device.0,
            self.vendor_device.1
        )?;
        writeln!(
            f,
            "largest buffer {} B, storage binding {} B, {} storage buffers a stage, {} workgroups a dimension",
            self.max_buffer_bytes,
            self.max_storage_binding_bytes,
            self.max_storage_buffers_per_stage,
            self.max_workgroups_per_dimension
        )?;
        writeln!(
            f,
            "subgroups {}..={}, matmul {}, reductions {} (split from {} into up to {} stages), rows per {}, loop limit {}",
            self.subgroup_sizes.0,
            self.subgroup_sizes.1,
            self.matmul_kernel,
            self.reduce_rule,
            self.reduce_split_from,
            self.reduce_stages,
            if self.rows_per_workgroup {
                "workgroup"
            } else {
                "invocation"
            },
            self.loop_limit
                .map_or("none".to_string(), |l| l.to_string())
        )?;
        write!(f, "features: {}", self.features.join(", "))?;
        let tunings = self.tuning.iter().chain(&self.reduce_tuning);
        for t in tunings.chain(&self.matmul_class_tunings) {
            write!(f, "\ntuned {t}")?;
        }
        if self.kernels_pinned {
            write!(
                f,
                "\nkernel choices pinned to another device's (data parallelism: rank 0's)"
            )?;
        }
        Ok(())
    }
}
