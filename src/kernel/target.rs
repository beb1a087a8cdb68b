//! What code generation needs to know about the adapter it generates for,
//! decided once when a device is made and passed down as a value: no
//! process-wide settings, no environment reads below `Device` creation.
//! A `Target` can be written by hand, so lowering and code generation are
//! testable without an adapter.

use std::collections::BTreeMap;

use super::matmul_class::MatmulClass;
use super::strategy::{ReduceRule, ReduceStrategy};
/// The adapter facts and choices that shape generated kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// Bytes one storage binding covers: the adapter's largest storage
    /// binding rounded down to its offset alignment. A larger buffer is
    /// bound as consecutive parts of this size, and kernels pick the part
    /// by index.
    pub binding_part_bytes: usize,
    /// Storage buffers one kernel may bind.
    pub max_storage_buffers: usize,
    /// The matmul kernel to generate where `matmul_by_class` has none.
    pub matmul: MatmulKernel,
    /// Where matmuls are tuned per class of sizes (`tune::classes`; `None`
    /// with tuning off): the kernel tuned for each class the graph being
    /// compiled has, which takes the place of `matmul` for products of
    /// that class, unless the product's trace site generated a kernel
    /// before (`codegen::roots::matmul_kind`).
    pub matmul_by_class: Option<BTreeMap<MatmulClass, MatmulKernel>>,
    /// What this adapter offers the kernels that need more than the tiled
    /// and blocked ones (the lane and cooperative-matrix kernels);
    /// `LAZYWGPU_DUMP` lists every matmul kernel and whether it is valid
    /// for a product.
    pub adapter_matmuls: AdapterMatmuls,
    /// Whether kernels may store `f16` (wgpu's `SHADER_F16`); without it
    /// an f16 graph is an [`crate::Error::Unsupported`].
    pub shader_f16: bool,
    /// The most loop iterations one invocation may run, where the driver
    /// cuts loops short: lavapipe (gallivm's loop limiter, one counter
    /// per shader that every loop's back-edge decrements) leaves all
    /// loops after 65,535 iterations in all, silently. Lowering keeps
    /// every kernel within it (`loop_budget`): strategies whose loops
    /// would run longer are not chosen, and loops with no alternative are
    /// unrolled until they fit (`codegen::wgsl::bounded_loop`).
    pub loop_limit: Option<usize>,
    /// How long reductions into few results are split into stages.
    pub reduce_split: ReduceSplit,
    /// When running sums and products over long lines are split into
    /// chunks scanned in parallel.
    pub scan_split: ScanSplit,
    /// When sorts of long lines are split into runs sorted apart and
    /// merged.
    pub sort_split: SortSplit,
    /// Whether row kernels (layer norm forward and gradient, softmax rows
    /// of at least `strategy::GPU_ROW_MIN`) give each row a workgroup
    /// rather than one invocation: on GPUs, where a row per invocation
    /// left 768 layer-norm rows of 128 to 768 threads looping alone (0.48
    /// ms forward, 0.38 ms backward on an H200, half the GPT step) and a
    /// 4096 x 1024 softmax at 2.6x two copies' time; not on CPU adapters,
    /// where barriers are dear and one invocation a row measured fastest.
    pub rows_per_workgroup: bool,
    /// The reduction strategy to use wherever it is valid
    /// (`DeviceConfig::reduce`); `None`: chosen by sizes.
    pub reduce: Option<ReduceStrategy>,
    /// How sizes choose a reduction kernel: the adapter kind's
    /// (`ReduceRule::CPU` or `GPU`), or the one tuning found fastest on
    /// the adapter (`tune::reduce`).
    pub reduce_rule: ReduceRule,
}

/// When and how finely a long reduction into few results is split into
/// stages of partial results (`schedule::split::split_reductions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReduceSplit {
    /// Reduced elements from which a reduction is split.
    pub threshold: usize,
    /// Elements each partial result of a first stage covers at least
    /// (up to twice as many: the part count is a power of two, see
    /// `schedule::split::split_parts`).
    pub per_part: usize,
    /// Stages a reduction may be split into: 2 keeps the second stage
    /// whole however many parts it reduces; more split it again.
    pub max_stages: usize,
}

/// When a running sum or product (`cumsum`, `cumprod`) along lines of
/// `len` elements, `lines` of them, is split into chunks scanned in
/// parallel (`schedule::split::split_long_scans`): one invocation
/// walking a whole line leaves the adapter idle where lines are few and
/// long (a sampler's cumulative sum over a 50,257-token vocabulary, 8
/// rows: 8 invocations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScanSplit {
    /// Line lengths from which a scan is split.
    pub from: usize,
    /// Lines up to which a scan is split (more lines already spread
    /// over the adapter).
    pub max_lines: usize,
}

impl ScanSplit {
    /// CPU adapters: lines past lavapipe's loop limit (65,536 elements
    /// and more), up to 16 of them. Shorter lines stay whole: at 8 x
    /// 50,257 the split measured no faster there (3.8-9.8 ms whole,
    /// 4.7-12.3 ms split, alternated on a 2-core EPYC).
    pub const CPU: ScanSplit = ScanSplit {
        from: 1 << 16,
        max_lines: 16,
    };
    /// GPUs: from 1,024 elements a line, up to 8,192 lines.
    pub const GPU: ScanSplit = ScanSplit {
        from: 1 << 10,
        max_lines: 1 << 13,
    };

    /// The elements a chunk covers in a scan of `lines` lines of `len`,
    /// or `None` to scan whole lines: a power of two near `sqrt(len)`
    /// (at least 64), so that the chunks' running values, scanned in
    /// turn, are about as many as a chunk's elements.
    pub fn chunk(&self, len: usize, lines: usize) -> Option<usize> {
        if len < self.from || lines > self.max_lines {
            return None;
        }
        let chunk = len.isqrt().next_power_of_two().max(64);
        (chunk < len).then_some(chunk)
    }
}

/// When a sort (`argsort`, and `sort`/`topk` on it) of lines of `len`
/// elements, `lines` of them, is split into runs of `run` elements, each
/// sorted by a workgroup of its own, then merged in pairs by one kernel
/// a doubling (`schedule::split::split_long_sorts`): one workgroup
/// sorting a whole line runs `log2(len)^2 / 2` steps of the network
/// alone (a million elements: 217 ms on an H100, 15 s on lavapipe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SortSplit {
    /// Line lengths from which a sort is split.
    pub from: usize,
    /// Lines up to which a sort is split.
    pub max_lines: usize,
    /// Elements of each run sorted by one workgroup (a power of two).
    pub run: usize,
    /// Where set, a line to split is sorted instead by eight radix passes
    /// over its order (`Op::RadixCount`, a running sum, `Op::RadixScatter`),
    /// each invocation walking a block of this many positions: no
    /// barriers and no merges, which lavapipe runs at a few times the
    /// speed of the runs' networks and their merges (PERFORMANCE.md).
    /// Keys of `f32`, `i32` and `u32` (16-bit floats read as `f32`).
    pub radix_block: Option<usize>,
    /// Line lengths from which a line is sorted by radix passes (where
    /// `radix_block` is set), over any number of lines.
    pub radix_from: usize,
}

impl SortSplit {
    /// CPU adapters: lines from 16,384 elements, up to 64 of them, in
    /// runs of 2,048 (2^20 elements: 5.6 s where one workgroup took
    /// 17-20 s, alternated on a 2-core EPYC).
    pub const CPU: SortSplit = SortSplit {
        from: 1 << 14,
        max_lines: 64,
        run: 1 << 11,
        radix_block: Some(512),
        radix_from: 1 << 11,
    };
    /// GPUs: lines from 2,048 elements, up to 16,384 of them, in runs of
    /// 1,024.
    pub const GPU: SortSplit = SortSplit {
        from: 1 << 11,
        max_lines: 1 << 14,
        run: 1 << 10,
        radix_block: None,
        radix_from: usize::MAX,
    };

    /// The block of the radix passes that sort lines of `len`, or `None`
    /// to sort them in runs or whole.
    pub fn radix(&self, len: usize) -> Option<usize> {
        self.radix_block.filter(|_| len >= self.radix_from)
    }

    /// The run length a sort of `lines` lines of `len` is split into, or
    /// `None` to sort whole lines.
    pub fn run(&self, len: usize, lines: usize) -> Option<usize> {
        (len >= self.from && len > self.run && lines <= self.max_lines).then_some(self.run)
    }
}

impl ReduceSplit {
    /// CPU adapters (measured on lavapipe, PERFORMANCE.md): from 65,536
    /// elements, 128 a part, two stages.
    pub const CPU: ReduceSplit = ReduceSplit {
        threshold: 1 << 16,
        per_part: 128,
        max_stages: 2,
    };
    /// GPUs: from 4,096 elements, 32 a part, up to four stages. A
    /// reduction left whole runs in one workgroup, a sliver of a GPU: on
    /// an H200 the GPT step's gradient-norm sums over 8,192-49,152
    /// elements took 0.58 ms each (a third of the step), and a second
    /// stage over 131,072 partial sums kept the 16M sum at 0.4 of the
    /// copy's bandwidth.
    pub const GPU: ReduceSplit = ReduceSplit {
        threshold: 1 << 12,
        per_part: 32,
        max_stages: 4,
    };
}

/// Loop iterations kept aside from `Target::loop_limit` for a kernel's
/// short loops of fixed length (workgroup trees, head-dim and tile loops).
pub(crate) const FIXED_LOOP_ITERATIONS: usize = 1024;

/// Lavapipe's loop limit (`LP_MAX_TGSI_LOOP_ITERATIONS` in Mesa's gallivm).
pub(crate) const LAVAPIPE_LOOP_LIMIT: usize = 65_535;

/// Which matmul kernel to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MatmulKernel {
    /// 64x64 tiles in workgroup memory, 256 invocations of 4x4 (GPUs).
    Tiled,
    /// 64x64 tiles in workgroup memory, 64 invocations of 8x8.
    Blocked,
    /// Texture-packed operands and subgroup broadcasts (CPU adapters);
    /// falls back to `Blocked` where the textures would not fit.
    Lanes(LaneAdapter),
    /// 16x16 cooperative matrices of `f16` accumulated in `f32`, on
    /// tiles staged in workgroup memory (`codegen::matmul_coop`), for
    /// `f16` products; others fall back to `Tiled`.
    Coop(CoopAdapter),
}

/// What the adapter offers the kernels that need more than the tiled and
/// blocked ones (`None`: that kernel cannot run here).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AdapterMatmuls {
    pub lanes: Option<LaneAdapter>,
    pub coop: Option<CoopAdapter>,
}

impl AdapterMatmuls {
    /// Every matmul kernel and whether it can compute a product of
    /// `dtype` here: the tiled and blocked kernels always; the lane kernel
    /// where the adapter has subgroups of one fixed size and `lanes_fit`
    /// (its subgroup size and textures for the product at hand); the
    /// cooperative-matrix kernel for `f16` where the adapter offers it.
    pub fn candidates(
        self,
        dtype: crate::DType,
        lanes_fit: &dyn Fn(LaneAdapter) -> bool,
    ) -> Vec<(crate::MatmulChoice, bool)> {
        use crate::MatmulChoice as C;
        C::ALL
            .into_iter()
            .map(|c| {
                let valid = match c {
                    C::Tiled | C::Blocked => true,
                    C::Lanes => self.lanes.is_some_and(lanes_fit),
                    C::Coop => self.coop.is_some() && dtype == crate::DType::F16,
                };
                (c, valid)
            })
            .collect()
    }
}

/// What the adapter offers the cooperative-matrix matmul: a 16x16x16
/// configuration of `f16` operands and an `f32` accumulator, one known
/// subgroup size, and the workgroup memory its tiles take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoopAdapter {
    /// The subgroup size, fixed for every pipeline (NVIDIA: 32): a
    /// workgroup holds four subgroups, one per 32x32 quarter of its tile.
    pub subgroup: usize,
}

impl CoopAdapter {
    /// What the adapter offers the kernel where it lists the 16x16x16
    /// `f16`/`f32` configuration: `None` unless it stores `f16`, has
    /// subgroups of one known size, and fits a workgroup of four of them
    /// with the kernel's tiles. The kernel also takes subgroup `s` to be
    /// invocations `s * size .. (s + 1) * size` of its workgroup, as
    /// NVIDIA's drivers form them (Vulkan does not promise it).
    pub fn of(
        info: &wgpu::AdapterInfo,
        limits: &wgpu::Limits,
        features: wgpu::Features,
    ) -> Option<CoopAdapter> {
        let size = info.subgroup_max_size;
        (features.contains(wgpu::Features::SHADER_F16)
            && features.contains(wgpu::Features::SUBGROUP)
            && info.subgroup_min_size == size
            && size > 0
            && 4 * size <= limits.max_compute_invocations_per_workgroup
            && 4 * size <= limits.max_compute_workgroup_size_x
            && Self::WORKGROUP_BYTES as u32 <= limits.max_compute_workgroup_storage_size)
            .then_some(CoopAdapter {
                subgroup: size as usize,
            })
    }

    /// Workgroup memory the kernel takes: the f16 A and B tiles of one K
    /// step (64 x 32 and 32 x 64) and the f32 output tile (64 x 64).
    pub const WORKGROUP_BYTES: usize = (64 * 32 + 32 * 64) * 2 + 64 * 64 * 4;
}

/// What the adapter offers the lane matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaneAdapter {
    /// The subgroup size, fixed for every pipeline (lavapipe: 8).
    pub subgroup: usize,
    /// Largest 2-D texture side.
    pub max_texture: usize,
    /// Most layers of a texture array.
    pub max_layers: usize,
}

/// The part size for an adapter whose largest storage binding is
/// `max_binding` bytes and whose binding offsets align to `alignment`.
pub(crate) fn binding_part_bytes(max_binding: u64, alignment: u64) -> usize {
    let align = alignment.max(16);
    ((max_binding / align) * align).max(align) as usize
}

impl Target {
    /// The target of an adapter: its limits, and the matmul kernel that
    /// measured fastest on its kind (see `codegen::matmul_lanes`) unless
    /// `matmul` names one.
    /// The cooperative-matrix kernel where `features` has
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX`, which the device requests only
    /// where the adapter lists that kernel's configuration.
    pub fn for_adapter(
        info: &wgpu::AdapterInfo,
        limits: &wgpu::Limits,
        features: wgpu::Features,
        matmul: Option<crate::MatmulChoice>,
    ) -> Target {
        // The lane kernel names lanes by number: it needs one known
        // subgroup size.
        let adapter_matmuls = AdapterMatmuls {
            lanes: (features.contains(wgpu::Features::SUBGROUP)
                && info.subgroup_min_size == info.subgroup_max_size)
                .then_some(LaneAdapter {
                    subgroup: info.subgroup_max_size as usize,
                    max_texture: limits.max_texture_dimension_2d as usize,
                    max_layers: limits.max_texture_array_layers as usize,
                }),
            coop: features
                .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
                .then(|| CoopAdapter::of(info, limits, features))
                .flatten(),
        };
        let lanes = adapter_matmuls.lanes.map(MatmulKernel::Lanes);
        let coop = adapter_matmuls.coop.map(MatmulKernel::Coop);
        let cpu = info.device_type == wgpu::DeviceType::Cpu;
        let matmul = match matmul {
            Some(crate::MatmulChoice::Coop) => coop.unwrap_or(MatmulKernel::Tiled),
            Some(crate::MatmulChoice::Tiled) => MatmulKernel::Tiled,
            Some(crate::MatmulChoice::Blocked) => MatmulKernel::Blocked,
            Some(crate::MatmulChoice::Lanes) => lanes.unwrap_or(MatmulKernel::Blocked),
            None if cpu => lanes.unwrap_or(MatmulKernel::Blocked),
            None => MatmulKernel::Tiled,
        };
        Target {
            binding_part_bytes: binding_part_bytes(
                limits.max_storage_buffer_binding_size,
                limits.min_storage_buffer_offset_alignment as u64,
            ),
            max_storage_buffers: limits.max_storage_buffers_per_shader_stage as usize,
            matmul,
            matmul_by_class: None,
            adapter_matmuls,
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            // Every CPU adapter wgpu finds on Linux is Mesa's (lavapipe or
            // llvmpipe through gallivm); others loop as long as asked.
            loop_limit: cpu.then_some(LAVAPIPE_LOOP_LIMIT),
            reduce_split: if cpu {
                ReduceSplit::CPU
            } else {
                ReduceSplit::GPU
            },
            rows_per_workgroup: !cpu,
            scan_split: if cpu { ScanSplit::CPU } else { ScanSplit::GPU },
            sort_split: if cpu { SortSplit::CPU } else { SortSplit::GPU },
            reduce: None,
            reduce_rule: if cpu {
                ReduceRule::CPU
            } else {
                ReduceRule::GPU
            },
        }
    }

    /// This target with a discrete GPU's reductions and rows
    /// (`ReduceSplit::GPU`, `ReduceRule::GPU`, a workgroup per row) and
    /// its own adapter's facts (`LAZYWGPU_GPU_CHOICES`; the GPU's tiled
    /// matmul is asked for where the target is made).
    pub fn with_gpu_choices(self) -> Target {
        Target {
            reduce_split: ReduceSplit::GPU,
            scan_split: ScanSplit::GPU,
            sort_split: SortSplit::GPU,
            rows_per_workgroup: true,
            reduce_rule: ReduceRule::GPU,
            ..self
        }
    }

    /// The matmul kernel for a product of `class`: its tuned kernel, else
    /// the target's.
    pub fn matmul_for(&self, class: MatmulClass) -> MatmulKernel {
        (self.matmul_by_class.as_ref())
            .and_then(|by_class| by_class.get(&class).copied())
            .unwrap_or(self.matmul)
    }

    /// This target binding at most `max_bytes` of a buffer at once (the
    /// adapter's limit where that is lower; whole multiples of the
    /// adapter's offset `alignment`, at least one), so that values past
    /// it are bound in parts (`DeviceConfig::max_binding_bytes`).
    pub fn with_max_binding(self, max_bytes: Option<u64>, alignment: u64) -> Target {
        let Some(max_bytes) = max_bytes else {
            return self;
        };
        let bytes = binding_part_bytes(max_bytes, alignment).min(self.binding_part_bytes);
        Target {
            binding_part_bytes: bytes,
            ..self
        }
    }

    /// This target with reductions forced to `choice` wherever valid.
    pub fn forcing_reduce(self, choice: Option<crate::ReduceChoice>) -> Target {
        let reduce = choice.map(|c| match c {
            crate::ReduceChoice::PerInvocation => ReduceStrategy::PerInvocation,
            crate::ReduceChoice::ByFours => ReduceStrategy::SumByFours,
            crate::ReduceChoice::WorkgroupTree => ReduceStrategy::WorkgroupTree,
        });
        Target { reduce, ..self }
    }

    /// This target with reductions chosen by `rule` (a tuned one).
    pub fn with_reduce_rule(self, rule: ReduceRule) -> Target {
        Target {
            reduce_rule: rule,
            ..self
        }
    }

    /// The iterations each of `loops` long loops of one kernel may run so
    /// that together they stay within the loop limit (`None`: no limit).
    pub fn loop_budget(&self, loops: usize) -> Option<usize> {
        self.loop_limit
            .map(|limit| (limit.saturating_sub(FIXED_LOOP_ITERATIONS) / loops.max(1)).max(1))
    }

    /// The adapter feature a value of `dtype` needs and this target lacks:
    /// `f16` storage needs `SHADER_F16`; `bf16` is stored in `u32` words
    /// and needs nothing.
    pub fn missing_feature(&self, dtype: crate::DType) -> Option<&'static str> {
        (dtype == crate::DType::F16 && !self.shader_f16).then_some("SHADER_F16")
    }

    /// Lavapipe's description (128 MiB bindings, 32 storage buffers,
    /// subgroups of 8), for tests that generate kernels without a device.
    #[cfg(test)]
    pub fn lavapipe() -> Target {
        const LANES: LaneAdapter = LaneAdapter {
            subgroup: 8,
            max_texture: 16384,
            max_layers: 2048,
        };
        Target {
            binding_part_bytes: 128 << 20,
            max_storage_buffers: 32,
            matmul: MatmulKernel::Lanes(LANES),
            matmul_by_class: None,
            adapter_matmuls: AdapterMatmuls {
                lanes: Some(LANES),
                coop: None,
            },
            shader_f16: true,
            loop_limit: Some(LAVAPIPE_LOOP_LIMIT),
            reduce_split: ReduceSplit::CPU,
            scan_split: ScanSplit::CPU,
            sort_split: SortSplit::CPU,
            rows_per_workgroup: false,
            reduce: None,
            reduce_rule: ReduceRule::CPU,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_needs_shader_f16_and_bf16_nothing() {
        let without = Target {
            shader_f16: false,
            ..Target::lavapipe()
        };
        assert_eq!(
            without.missing_feature(crate::DType::F16),
            Some("SHADER_F16")
        );
        assert_eq!(without.missing_feature(crate::DType::BF16), None);
        assert_eq!(without.missing_feature(crate::DType::F32), None);
        assert_eq!(Target::lavapipe().missing_feature(crate::DType::F16), None);
    }

    #[test]
    fn parts_are_the_largest_binding_rounded_down_to_the_alignment() {
        assert_eq!(binding_part_bytes(128 << 20, 256), 128 << 20);
        assert_eq!(binding_part_bytes(1000, 256), 768);
        // Never below one alignment unit, never below 16 bytes (a vec4).
        assert_eq!(binding_part_bytes(100, 256), 256);
        assert_eq!(binding_part_bytes(100, 4), 96);
    }

    #[test]
    fn a_lower_binding_limit_shrinks_parts_and_a_higher_one_does_not() {
        let adapter = Target::lavapipe().binding_part_bytes;
        let at = |max| {
            Target::lavapipe()
                .with_max_binding(max, 256)
                .binding_part_bytes
        };
        assert_eq!(at(None), adapter);
        assert_eq!(at(Some(1 << 20)), 1 << 20);
        // Rounded down to the alignment, never below one unit.
        assert_eq!(at(Some(1000)), 768);
        assert_eq!(at(Some(1)), 256);
        // Past the adapter's own limit: the adapter's.
        assert_eq!(at(Some(u64::MAX)), adapter);
    }

    #[test]
    fn long_scans_over_few_lines_split_into_chunks_near_the_square_root() {
        let gpu = ScanSplit::GPU;
        // A sampler's running sum over GPT-2's vocabulary, 8 rows.
        assert_eq!(gpu.chunk(50_257, 8), Some(256));
        assert_eq!(gpu.chunk(1 << 20, 1), Some(1024));
        // Short lines, or lines enough to fill the adapter: whole lines.
        assert_eq!(gpu.chunk(1023, 1), None);
        assert_eq!(gpu.chunk(50_257, 1 << 14), None);
        // Chunks of at least 64, and never the whole line.
        assert_eq!(gpu.chunk(1024, 1), Some(64));
        assert_eq!(ScanSplit { from: 2, ..gpu }.chunk(64, 1), None);
        assert_eq!(ScanSplit::CPU.chunk(2048, 1), None);
        assert_eq!(ScanSplit::CPU.chunk(70_001, 2), Some(512));
    }

    #[test]
    fn long_sorts_over_few_lines_split_into_runs() {
        assert_eq!(SortSplit::GPU.run(1 << 20, 1), Some(1024));
        assert_eq!(SortSplit::GPU.run(50_257, 8), Some(1024));
        assert_eq!(SortSplit::GPU.run(1024, 1), None);
        assert_eq!(SortSplit::GPU.run(4096, 1 << 15), None);
        assert_eq!(SortSplit::CPU.run(1 << 20, 1), Some(2048));
        assert_eq!(SortSplit::CPU.run(10_000, 1), None);
    }
}
