//! `LAZYWGPU_PROFILE=1`: the time of every kernel, each run alone (a
//! compute pass of its own, submitted and waited for). On a GPU the
//! clock is the device's timestamps at both ends of the pass; on a CPU
//! adapter it is the host's wall clock around the submit and the wait
//! (`ProfileClock`). By the wall clock, a lane matmul's operand packing
//! is timed apart from the kernel, in rows of its own: `copy i of ...`
//! for the i-th operand packed by a buffer-to-texture copy, `pack i of
//! ...` for the i-th packed by a kernel. By timestamps, packing kernels
//! are inside the kernel's pass and its row, and copies (outside passes)
//! are not timed. Profiling waits for each kernel,
//! so it changes the timing of the program around it; kernel times are
//! what it is for.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Which clock times a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProfileClock {
    /// Timestamp queries at the start and end of the kernel's pass.
    Timestamps,
    /// The host's wall clock from the kernel's submit to the end of the
    /// wait for it: CPU adapters, whose timestamps do not time the
    /// shader's work (lavapipe's summed to 0.16 s of a GPT step whose
    /// 1.26 s the host spent 94 % in shader code), and adapters without
    /// timestamp queries. It includes the submit and the wait, whose
    /// polls sleep up to 0.2 ms (`gpu::wait`): a kernel of tens of
    /// microseconds reads several times too long.
    Wall,
}

impl ProfileClock {
    /// The clock for an adapter of `device_type`, with or without
    /// timestamp queries.
    pub fn for_adapter(device_type: wgpu::DeviceType, timestamps: bool) -> ProfileClock {
        if device_type == wgpu::DeviceType::Cpu || !timestamps {
            ProfileClock::Wall
        } else {
            ProfileClock::Timestamps
        }
    }
}

/// Time per kernel label, accumulated over a run.
pub(crate) struct KernelProfile {
    /// The clock every time here was read from.
    pub clock: ProfileClock,
    /// label -> (launches, total nanoseconds)
    totals: Mutex<BTreeMap<String, (u64, f64)>>,
}

impl KernelProfile {
    /// An empty profile timed by `clock`.
    pub fn new(clock: ProfileClock) -> KernelProfile {
        KernelProfile {
            clock,
            totals: Mutex::default(),
        }
    }

    /// Adds one launch of `label` that took `ns`.
    pub fn add(&self, label: String, ns: f64) {
        let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        let e = t.entry(label).or_insert((0, 0.0));
        e.0 += 1;
        e.1 += ns;
    }

    /// A markdown table, the dearest kernels first, under a line naming
    /// the clock.
    pub fn report(&self) -> String {
        let t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<(&String, &(u64, f64))> = t.iter().collect();
        rows.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
        let all: f64 = rows.iter().map(|r| r.1.1).sum();
        let clock = match self.clock {
            ProfileClock::Timestamps => "device timestamps at both ends of each kernel's pass",
            ProfileClock::Wall => {
                "wall time from each kernel's submit to the end of the wait for it (a CPU adapter, or no timestamp queries)"
            }
        };
        let mut out = format!("kernel times: {clock}\n\n");
        out.push_str(
            "| kernel (first output, shape, where recorded) | launches | total | mean | share |\n| --- | --- | --- | --- | --- |\n",
        );
        for (label, &(n, ns)) in rows {
            out.push_str(&format!(
                "| {label} | {n} | {:.3} ms | {:.1} µs | {:.1} % |\n",
                ns / 1e6,
                ns / n as f64 / 1e3,
                100.0 * ns / all.max(1.0)
            ));
        }
        out
    }

    /// Forgets everything recorded so far.
    pub fn clear(&self) {
        self.totals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// Whether `LAZYWGPU_PROFILE=1` asks for kernel timings.
pub(crate) fn requested() -> bool {
    crate::config::ProcessConfig::get().profile
}
