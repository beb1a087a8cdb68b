//! Settings, and the only reads of the environment. Each switch that
//! concerns one device is a field of [`DeviceConfig`]:
//! [`DeviceConfig::from_env`] reads them when a device is made, and tests
//! or programs that want one device fused and another not (or a
//! particular matmul kernel) set the fields instead. Switches that
//! concern the process (its one wgpu device, the adapter, the cache
//! directory, profiling, collectives) are fields of `ProcessConfig`, read
//! once, when the first device is made; the modules below take them from
//! there.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// How a [`Device`](crate::Device) compiles and runs graphs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Fuse elementwise work into kernels (off: one kernel per op, as
    /// `LAZYWGPU_NO_FUSION=1`). Can also be changed later with
    /// [`Device::set_fusion`](crate::Device::set_fusion).
    pub fusion: bool,
    /// Rerun every GPU graph on the CPU reference and compare
    /// (`LAZYWGPU_VERIFY=1`).
    pub verify: bool,
    /// Run every op as it is recorded (`LAZYWGPU_EAGER=1`), so failures
    /// surface at their line.
    pub eager: bool,
    /// Write each newly compiled graph's IR, DOT and WGSL here
    /// (`LAZYWGPU_DUMP=DIR`).
    pub dump_dir: Option<PathBuf>,
    /// The matmul kernel (`LAZYWGPU_MATMUL=tiled|blocked|lanes|coop`); `None`:
    /// the one that measured fastest on the adapter's kind.
    pub matmul: Option<MatmulChoice>,
    /// The reduction kernel to use wherever it is valid
    /// (`LAZYWGPU_REDUCE=per-invocation|by-fours|tree`), so that tests
    /// can run every variant against their oracles; elsewhere, and with
    /// `None`, the built-in choice by the reduction's sizes. See
    /// [`ReduceChoice`] for where each is valid.
    pub reduce: Option<ReduceChoice>,
    /// Kernel autotuning on the adapter (`LAZYWGPU_AUTOTUNE=off|fast|full`):
    /// the first device made on an adapter times the matmul kernels it
    /// can run, and six rules by which a reduction's sizes pick its
    /// kernel, and keeps the fastest of each, cached per adapter and
    /// driver in the cache directory (`LAZYWGPU_CACHE_DIR`), so later
    /// runs read the winners and time nothing. Then the first graph with
    /// a matmul of a new class of sizes (dtype, and batch, rows,
    /// contraction and columns in buckets of powers of four) times the
    /// matmul kernels again on that class's sizes and keeps the fastest
    /// for the class, cached the same way. A class is timed only while
    /// the process has spent under 5 s (`fast`) or 60 s (`full`) timing
    /// classes; a class met after that whose winner is not cached keeps
    /// the device's kernel. A trace site keeps the kernel its first size
    /// got at its later sizes, whatever their class. `None`: `fast` on GPUs,
    /// `off` on CPU adapters such as lavapipe, whose built-in choices were
    /// measured by hand. The matmul is not tuned where `matmul` names a
    /// kernel, nor the reductions where `reduce` does. See
    /// [`AdapterReport::tuning`](crate::AdapterReport::tuning),
    /// [`AdapterReport::reduce_tuning`](crate::AdapterReport::reduce_tuning)
    /// and [`AdapterReport::matmul_class_tunings`](crate::AdapterReport::matmul_class_tunings).
    pub autotune: Option<Autotune>,
    /// The most bytes this device's buffers may hold, live and idle in its
    /// pool together (`LAZYWGPU_MEMORY_LIMIT=BYTES`, with an optional `K`,
    /// `M` or `G` suffix for 1024's powers). Idle buffers are released
    /// first when an allocation would pass it; past it, the step is an
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) naming the value
    /// it was allocating, the bytes live and at peak, and the largest
    /// values the program holds with their source lines. `None`: no limit
    /// but the driver's (whose refusal is the same error).
    pub memory_limit: Option<u64>,
    /// Run `scaled_dot_product_attention` without a mask tensor as one
    /// fused kernel (a query row per invocation, online softmax, scores
    /// never stored) instead of three (`LAZYWGPU_FUSED_ATTENTION=1`). Off
    /// by default: on lavapipe it measured 5-8 % slower per GPT step than
    /// the three kernels, and it has not been measured on a GPU yet.
    pub fused_attention: bool,
    /// Recompiles allowed per trace site before the next one is an
    /// [`Error::RecompileBudget`](crate::Error::RecompileBudget)
    /// (`LAZYWGPU_RECOMPILE_BUDGET=N`); `None`: unlimited (each recompile
    /// is still warned about).
    pub recompile_budget: Option<usize>,
    /// Anomaly mode (`LAZYWGPU_CHECK=1`): every kernel also reports NaN
    /// or infinity produced from finite values, and indices out of range;
    /// the first is an [`Error::NonFinite`](crate::Error::NonFinite) or
    /// [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange) naming
    /// the op and its source line. Each checked graph waits for the
    /// device. Off: nothing is checked and nothing costs.
    pub checks: bool,
    /// The most bytes a kernel binds of one buffer at once
    /// (`LAZYWGPU_MAX_BINDING=BYTES`, with an optional `K`, `M` or `G`
    /// suffix), at most the adapter's limit and rounded down to its
    /// offset alignment. A value larger than this is bound in parts, as
    /// one past the adapter's limit (128 MiB on lavapipe) always is: tests
    /// reach every kernel's parts with small values this way. `None`:
    /// the adapter's limit.
    pub max_binding_bytes: Option<u64>,
    /// Lower each graph that a new size binds to its trace site's
    /// kernels without lowering (the site's kernels were shown generic
    /// over the sizes that change there, and every guard their choices
    /// recorded holds) as well, and panic where the two launches differ
    /// (`LAZYWGPU_CHECK_BINDS=1`): a test of the guards and size
    /// expressions that binding rests on, at the cost of lowering every
    /// new size. The tests run with it on.
    pub check_binds: bool,
}

/// A matmul kernel to ask for (see [`DeviceConfig::matmul`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulChoice {
    /// 64x64 tiles in workgroup memory, 256 invocations of 4x4 outputs
    /// (the default on GPUs).
    Tiled,
    /// 64x64 tiles in workgroup memory, 64 invocations of 8x8 outputs.
    Blocked,
    /// Operands packed into textures, the left one shared by subgroup
    /// broadcasts (the default on CPU adapters with a fixed subgroup size,
    /// such as lavapipe; `Blocked` where an operand would not fit in a
    /// texture or subgroups vary in size).
    Lanes,
    /// 16x16 cooperative matrices (tensor cores) on tiles staged in
    /// workgroup memory, for `f16` products, on adapters that offer
    /// `f16` operands with an `f32` accumulator (wgpu's
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX`; `Tiled` elsewhere, and for
    /// products of other dtypes).
    Coop,
}

impl MatmulChoice {
    /// Every matmul kernel, in the order candidates are listed.
    pub const ALL: [MatmulChoice; 4] = [
        MatmulChoice::Tiled,
        MatmulChoice::Blocked,
        MatmulChoice::Lanes,
        MatmulChoice::Coop,
    ];

    /// The name `LAZYWGPU_MATMUL` takes for it (and tunings and dumps
    /// print).
    pub fn name(self) -> &'static str {
        match self {
            MatmulChoice::Tiled => "tiled",
            MatmulChoice::Blocked => "blocked",
            MatmulChoice::Lanes => "lanes",
            MatmulChoice::Coop => "coop",
        }
    }

    /// The kernel named `name`.
    pub fn named(name: &str) -> Option<MatmulChoice> {
        MatmulChoice::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// A reduction kernel to ask for (see [`DeviceConfig::reduce`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceChoice {
    /// One invocation per result (or per part of a split reduction),
    /// looping over its elements: valid where that loop fits the
    /// adapter's loop limit (65,535 iterations on lavapipe).
    PerInvocation,
    /// The first stage of a split sum, each invocation reading four
    /// neighbouring elements at a time: valid for sums over trailing
    /// dims whose length is a multiple of four, split into parts.
    ByFours,
    /// A workgroup per result: invocations stride over the elements,
    /// then combine in a tree in workgroup memory. Valid everywhere.
    WorkgroupTree,
}

impl ReduceChoice {
    /// Every reduction kernel, in the order tests force them.
    pub const ALL: [ReduceChoice; 3] = [
        ReduceChoice::PerInvocation,
        ReduceChoice::ByFours,
        ReduceChoice::WorkgroupTree,
    ];

    /// The name `LAZYWGPU_REDUCE` takes for it.
    pub fn name(self) -> &'static str {
        match self {
            ReduceChoice::PerInvocation => "per-invocation",
            ReduceChoice::ByFours => "by-fours",
            ReduceChoice::WorkgroupTree => "tree",
        }
    }
}

/// How much kernel autotuning a device does (see
/// [`DeviceConfig::autotune`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Autotune {
    /// The built-in choices; nothing is timed or read.
    Off,
    /// Three products (1024^3 and two training-step shapes) and six
    /// reductions of 2M elements, three timed runs each per candidate.
    Fast,
    /// Six products and nine reductions, seven timed runs each.
    Full,
}

impl Default for DeviceConfig {
    /// Fused, unverified, lazy, no dumps, the adapter's matmul kernel.
    fn default() -> DeviceConfig {
        DeviceConfig {
            fusion: true,
            verify: false,
            eager: false,
            dump_dir: None,
            matmul: None,
            reduce: None,
            autotune: None,
            memory_limit: None,
            fused_attention: false,
            recompile_budget: None,
            checks: false,
            max_binding_bytes: None,
            check_binds: false,
        }
    }
}

/// The switches that concern the whole process, read from the
/// environment once (`ProcessConfig::get`, first called when the first
/// device is made): later changes to the environment are not seen.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProcessConfig {
    /// `LAZYWGPU_PROFILE=1`: time every kernel, each run alone (by the
    /// device's timestamps, or the wall clock on CPU adapters),
    /// submitting on the caller's thread.
    pub profile: bool,
    /// `LAZYWGPU_SUBMIT_THREAD=1|0`: submit on a thread of its own or on
    /// the caller's; `None`: a thread on CPU adapters only.
    pub submit_thread: Option<bool>,
    /// `WGPU_ADAPTER_NAME`: part of the name of the adapter to use.
    pub adapter_name: Option<String>,
    /// Where the pipeline and tuning caches live: `LAZYWGPU_CACHE_DIR`
    /// (`off` or `0`: nowhere), else `$XDG_CACHE_HOME/lazywgpu`, else
    /// `$HOME/.cache/lazywgpu`.
    pub cache_dir: Option<PathBuf>,
    /// `LAZYWGPU_DEVICE=gpu|cpu|auto`, lowercased: what `Device::default`
    /// makes (empty: `auto`).
    pub device: String,
    /// `LAZYWGPU_REQUIRE_GPU` is set: a missing adapter fails a test
    /// instead of skipping it.
    pub require_gpu: bool,
    /// `LAZYWGPU_COLLECTIVE_TIMEOUT` (seconds, positive and finite).
    pub collective_timeout: Option<Duration>,
    /// Lavapipe's `LP_NUM_THREADS` and `LP_NATIVE_VECTOR_WIDTH`, where
    /// set: they change what is fastest, so they are part of a tuning key.
    pub lavapipe: Vec<(&'static str, String)>,
    /// `LAZYWGPU_GPU_CHOICES=1`: generate the kernels a discrete GPU gets
    /// (tiled matmul, reductions split from 4,096 elements into up to
    /// four stages, a workgroup per normalised row) on whatever adapter
    /// this is, its own facts (limits, loop limit) kept, so that the
    /// GPU's schedules run, and are tested, on lavapipe.
    pub gpu_choices: bool,
    /// `LAZYWGPU_SHADER_CHECKS=1`: compile kernels with wgpu's runtime
    /// checks (bounds and loop bounding) on Vulkan too, where the
    /// driver's robust buffer access makes them redundant for buffers.
    pub shader_checks: bool,
}

impl ProcessConfig {
    /// The process's switches, read from the environment at the first
    /// call.
    pub fn get() -> &'static ProcessConfig {
        static CONFIG: OnceLock<ProcessConfig> = OnceLock::new();
        CONFIG.get_or_init(ProcessConfig::from_env)
    }

    fn from_env() -> ProcessConfig {
        ProcessConfig::from_vars(&|name| std::env::var_os(name))
    }

    /// The switches as `var` gives the environment's variables.
    fn from_vars(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> ProcessConfig {
        let text = |name: &str| {
            var(name)
                .and_then(|v| v.into_string().ok())
                .filter(|v| !v.is_empty())
        };
        let cache_dir = match var("LAZYWGPU_CACHE_DIR") {
            Some(dir) if dir == "off" || dir == "0" => None,
            Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
            _ => var("XDG_CACHE_HOME")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|base| base.join("lazywgpu")),
        };
        ProcessConfig {
            profile: text("LAZYWGPU_PROFILE").is_some_and(|v| v == "1"),
            submit_thread: match text("LAZYWGPU_SUBMIT_THREAD").as_deref() {
                Some("1") => Some(true),
                Some("0") => Some(false),
                _ => None,
            },
            adapter_name: text("WGPU_ADAPTER_NAME"),
            cache_dir,
            device: text("LAZYWGPU_DEVICE").unwrap_or_default().to_lowercase(),
            require_gpu: var("LAZYWGPU_REQUIRE_GPU").is_some(),
            collective_timeout: text("LAZYWGPU_COLLECTIVE_TIMEOUT")
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64),
            lavapipe: ["LP_NUM_THREADS", "LP_NATIVE_VECTOR_WIDTH"]
                .into_iter()
                .filter_map(|name| Some((name, text(name)?)))
                .collect(),
            gpu_choices: text("LAZYWGPU_GPU_CHOICES").is_some_and(|v| v == "1" || v == "true"),
            shader_checks: text("LAZYWGPU_SHADER_CHECKS").is_some_and(|v| v == "1" || v == "true"),
        }
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A count from the environment; unset or empty is `None`, and a value
/// that is not a count is ignored with a logged warning.
fn env_count(name: &str) -> Option<usize> {
    let value = std::env::var(name).ok().filter(|v| !v.is_empty())?;
    match value.parse() {
        Ok(n) => Some(n),
        Err(_) => {
            log::warn!("{name}={value}: not a count; ignored");
            None
        }
    }
}

/// A byte count from the environment (`1048576`, `512K`, `64M`, `2G`;
/// 1024's powers); unset or empty is `None`, and a value that does not
/// parse is ignored with a logged warning.
fn env_bytes(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok().filter(|v| !v.is_empty())?;
    let parsed = parse_bytes(&value);
    if parsed.is_none() {
        log::warn!("{name}={value}: not a byte count (such as 512M or 2G); ignored");
    }
    parsed
}

/// `text` as bytes: digits, then optionally `K`, `M` or `G` (1024's
/// powers, either case, an optional `B` or `iB` after).
fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, scale) = match t.chars().last()?.to_ascii_uppercase() {
        'K' => (&t[..t.len() - 1], 1u64 << 10),
        'M' => (&t[..t.len() - 1], 1 << 20),
        'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(scale)
}

impl DeviceConfig {
    /// The defaults with the environment's switches applied:
    /// `LAZYWGPU_NO_FUSION`, `LAZYWGPU_VERIFY`, `LAZYWGPU_EAGER`,
    /// `LAZYWGPU_DUMP`, `LAZYWGPU_FUSED_ATTENTION`, `LAZYWGPU_CHECK`,
    /// `LAZYWGPU_RECOMPILE_BUDGET`, `LAZYWGPU_MATMUL`, `LAZYWGPU_REDUCE`,
    /// `LAZYWGPU_AUTOTUNE`, `LAZYWGPU_CHECK_BINDS`
    /// and `LAZYWGPU_MEMORY_LIMIT` (an unknown kernel name or mode, or a
    /// byte count that does not parse, is ignored with a logged warning).
    pub fn from_env() -> DeviceConfig {
        let matmul = match std::env::var("LAZYWGPU_MATMUL").as_deref() {
            Ok("") | Err(_) => None,
            Ok(name) => {
                let choice = MatmulChoice::named(name);
                if choice.is_none() {
                    log::warn!(
                        "LAZYWGPU_MATMUL={name}: not tiled, blocked, lanes or coop; ignored"
                    );
                }
                choice
            }
        };
        let reduce = match std::env::var("LAZYWGPU_REDUCE").as_deref() {
            Ok("") | Err(_) => None,
            Ok(name) => {
                let choice = ReduceChoice::ALL.into_iter().find(|c| c.name() == name);
                if choice.is_none() {
                    log::warn!(
                        "LAZYWGPU_REDUCE={name}: not per-invocation, by-fours or tree; ignored"
                    );
                }
                choice
            }
        };
        let autotune = match std::env::var("LAZYWGPU_AUTOTUNE").as_deref() {
            Ok("off") | Ok("0") => Some(Autotune::Off),
            Ok("fast") | Ok("1") => Some(Autotune::Fast),
            Ok("full") => Some(Autotune::Full),
            Ok("") | Err(_) => None,
            Ok(other) => {
                log::warn!("LAZYWGPU_AUTOTUNE={other}: not off, fast or full; ignored");
                None
            }
        };
        DeviceConfig {
            autotune,
            memory_limit: env_bytes("LAZYWGPU_MEMORY_LIMIT"),
            fusion: !env_flag("LAZYWGPU_NO_FUSION"),
            verify: env_flag("LAZYWGPU_VERIFY"),
            eager: env_flag("LAZYWGPU_EAGER"),
            dump_dir: std::env::var_os("LAZYWGPU_DUMP")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            matmul,
            reduce,
            fused_attention: env_flag("LAZYWGPU_FUSED_ATTENTION"),
            recompile_budget: env_count("LAZYWGPU_RECOMPILE_BUDGET"),
            checks: env_flag("LAZYWGPU_CHECK"),
            max_binding_bytes: env_bytes("LAZYWGPU_MAX_BINDING"),
            check_binds: env_flag("LAZYWGPU_CHECK_BINDS"),
        }
    }
}

#[cfg(test)]
mod process_tests {
    use super::*;
    use std::collections::HashMap;
    use std::ffi::OsString;

    fn from(vars: &[(&str, &str)]) -> ProcessConfig {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|&(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        ProcessConfig::from_vars(&|name| map.get(name).cloned())
    }

    #[test]
    fn process_switches_parse_from_the_environment() {
        let c = from(&[
            ("LAZYWGPU_PROFILE", "1"),
            ("LAZYWGPU_SUBMIT_THREAD", "0"),
            ("LAZYWGPU_DEVICE", "GPU"),
            ("LAZYWGPU_COLLECTIVE_TIMEOUT", "2.5"),
            ("LP_NUM_THREADS", "1"),
            ("HOME", "/home/u"),
        ]);
        assert!(c.profile && !c.require_gpu && !c.shader_checks);
        assert_eq!(c.submit_thread, Some(false));
        assert!(from(&[("LAZYWGPU_SHADER_CHECKS", "1")]).shader_checks);
        assert_eq!(c.device, "gpu");
        assert_eq!(c.collective_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(c.lavapipe, vec![("LP_NUM_THREADS", "1".to_string())]);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/home/u/.cache/lazywgpu")));
        let c = from(&[
            ("LAZYWGPU_CACHE_DIR", "off"),
            ("LAZYWGPU_COLLECTIVE_TIMEOUT", "-1"),
            ("LAZYWGPU_SUBMIT_THREAD", "maybe"),
            ("LAZYWGPU_REQUIRE_GPU", ""),
        ]);
        assert_eq!(c.cache_dir, None);
        assert_eq!(c.collective_timeout, None, "not positive: the default");
        assert_eq!(c.submit_thread, None, "not 0 or 1: by adapter kind");
        assert!(c.require_gpu, "set, even empty");
        let c = from(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/home/u")]);
        assert_eq!(c.cache_dir, Some(PathBuf::from("/x/lazywgpu")));
    }
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_parse_with_binary_suffixes() {
        assert_eq!(parse_bytes("1048576"), Some(1 << 20));
        assert_eq!(parse_bytes("512K"), Some(512 << 10));
        assert_eq!(parse_bytes("64m"), Some(64 << 20));
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("2GiB"), Some(2 << 30));
        assert_eq!(parse_bytes("3MB"), Some(3 << 20));
        assert_eq!(parse_bytes(" 7 "), Some(7));
        for bad in ["", "G", "-1", "1.5G", "12X", "99999999999999999999G"] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }
}
