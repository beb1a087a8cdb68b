//! String-named counters and timers in the spirit of `torch._lazy.metrics`
//! and torch-xla's metrics report.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Timers every device reports: host time spent in each stage of a step.
pub const STANDARD_TIMERS: &[&str] = &[
    "collect",
    "compile",
    "encode_submit",
    "device_wait",
    "readback",
    "step_wall",
    "step_host",
    "step_device",
    "step_hidden",
];

/// Samples kept per timer for the median.
const TIMER_SAMPLES: usize = 1024;

/// Counters every device reports, even while zero.
pub const STANDARD_COUNTERS: &[&str] = &[
    "graphs_executed",
    "graph_nodes",
    "graph_cache_hits",
    "graph_cache_misses",
    "graphs_compiled",
    "graphs_specialized",
    // Of `graphs_specialized` (new graphs that compiled no pipeline), those
    // bound to their trace site's kernels without lowering them
    // (`runtime::gpu::rebind`): each a key lookup.
    "graphs_bound",
    "recompiles",
    // Dispatches lowered to kernel IR by compiles (a graph found in the
    // executable cache lowers none), and of those, the ones bound to the
    // kernel their trace site bound at earlier sizes, neither simplified
    // nor printed.
    "kernels_lowered",
    "kernels_bound",
    "kernels_compiled",
    "pipeline_cache_hits",
    "kernel_launches",
    "kernel_bytes_read",
    "kernel_bytes_written",
    "matmul_flops",
    "bytes_uploaded",
    "bytes_downloaded",
    "params_uploaded_bytes",
    "readbacks",
    "buffers_allocated",
    "textures_allocated",
    "pool_reuses",
    "buffers_donated",
    "buffers_reused_in_place",
    "bytes_live",
    "bytes_pooled",
    "peak_bytes_live",
    "graph_growth_warnings",
    "leak_warnings",
];

/// Warnings kept per device for [`MetricsSnapshot::warnings`].
const WARNINGS_KEPT: usize = 64;

/// The live counters and timers of one device.
#[derive(Debug)]
pub(crate) struct Metrics {
    counters: Mutex<BTreeMap<&'static str, u64>>,
    timers: Mutex<BTreeMap<&'static str, TimerState>>,
    /// The most recent warnings (recompiles, graph growth, leaks).
    warnings: Mutex<VecDeque<String>>,
}

#[derive(Debug, Default, Clone)]
struct TimerState {
    count: u64,
    total: Duration,
    recent: VecDeque<Duration>,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            counters: Mutex::new(STANDARD_COUNTERS.iter().map(|&n| (n, 0)).collect()),
            timers: Mutex::new(
                STANDARD_TIMERS
                    .iter()
                    .map(|&n| (n, TimerState::default()))
                    .collect(),
            ),
            warnings: Mutex::new(VecDeque::new()),
        }
    }

    /// Logs `message` as a warning and keeps it for the snapshot.
    pub fn warn(&self, message: String) {
        log::warn!("lazywgpu: {message}");
        let mut w = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if w.len() == WARNINGS_KEPT {
            w.pop_front();
        }
        w.push_back(message);
    }

    /// Adds one sample to timer `name`.
    pub fn record(&self, name: &'static str, elapsed: Duration) {
        let mut t = self.timers.lock().unwrap_or_else(|e| e.into_inner());
        let state = t.entry(name).or_default();
        state.count += 1;
        state.total += elapsed;
        if state.recent.len() == TIMER_SAMPLES {
            state.recent.pop_front();
        }
        state.recent.push_back(elapsed);
    }

    /// Runs `f`, recording its duration under timer `name`.
    pub fn time<T>(&self, name: &'static str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.record(name, start.elapsed());
        out
    }

    pub fn add(&self, name: &'static str, amount: u64) {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        *c.entry(name).or_insert(0) += amount;
    }

    /// Moves a gauge (a level, not a count) by `delta`; `bytes_live` also
    /// raises `peak_bytes_live`.
    pub fn gauge(&self, name: &'static str, delta: i64) {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let v = c.entry(name).or_insert(0);
        *v = v.saturating_add_signed(delta);
        if name == "bytes_live" {
            let live = *v;
            let peak = c.entry("peak_bytes_live").or_insert(0);
            *peak = (*peak).max(live);
        }
    }

    pub fn value(&self, name: &str) -> u64 {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        c.get(name).copied().unwrap_or(0)
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let t = self.timers.lock().unwrap_or_else(|e| e.into_inner());
        let w = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        MetricsSnapshot {
            warnings: w.iter().cloned().collect(),
            counters: c.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            timers: t
                .iter()
                .map(|(k, v)| {
                    let mut sorted: Vec<Duration> = v.recent.iter().copied().collect();
                    sorted.sort();
                    let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
                    (
                        k.to_string(),
                        TimerStats {
                            count: v.count,
                            total: v.total,
                            median,
                        },
                    )
                })
                .collect(),
        }
    }

    /// Zeroes the counters. Gauges (memory levels) keep their values; the
    /// peak restarts from the current level.
    pub fn reset(&self) {
        let mut c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let live = c.get("bytes_live").copied().unwrap_or(0);
        for (name, v) in c.iter_mut() {
            match *name {
                "bytes_live" | "bytes_pooled" => {}
                "peak_bytes_live" => *v = live,
                _ => *v = 0,
            }
        }
        drop(c);
        let mut t = self.timers.lock().unwrap_or_else(|e| e.into_inner());
        t.values_mut().for_each(|v| *v = TimerState::default());
        drop(t);
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// A timer's figures: how often it ran, for how long in all, and the
/// median of its last 1,024 samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerStats {
    /// Samples recorded.
    pub count: u64,
    /// Sum of all samples.
    pub total: Duration,
    /// Median of the most recent samples.
    pub median: Duration,
}

/// A copy of a device's counters and timers at one moment (see
/// [`crate::Device::metrics`]).
///
/// Counters include the memory gauges `bytes_live` (bytes in buffers that
/// tensors or running graphs hold), `bytes_pooled` (idle buffers kept for
/// reuse) and `peak_bytes_live`, and `graph_nodes`, the nodes of every
/// graph collected (a step's work as the compiler sees it, counted on both
/// backends).
///
/// Once a [`DataLoader`](crate::data::DataLoader) has run on the device,
/// the timers `data_wait` (the caller blocked waiting for a batch) and
/// `data_load` (the loader's thread reading, assembling and uploading
/// one) appear too: a `data_wait` total much smaller than `data_load`'s
/// means the loading was hidden behind the steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    counters: BTreeMap<String, u64>,
    timers: BTreeMap<String, TimerStats>,
    warnings: Vec<String>,
}

impl MetricsSnapshot {
    /// The value of counter `name`; 0 for a counter that never counted.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// The names of all counters, sorted.
    pub fn counter_names(&self) -> Vec<String> {
        self.counters.keys().cloned().collect()
    }

    /// The figures of timer `name`, if it exists.
    pub fn timer(&self, name: &str) -> Option<TimerStats> {
        self.timers.get(name).copied()
    }

    /// The names of all timers, sorted.
    pub fn timer_names(&self) -> Vec<String> {
        self.timers.keys().cloned().collect()
    }

    /// The share of the host's busy time per step (tracing, collecting,
    /// compiling, encoding: the step's wall time minus the time blocked on
    /// the device) that ran while the device worked on earlier steps,
    /// over the steps recorded (timers `step_host` and `step_hidden`,
    /// kept by `mark_step` on GPU devices); `None` before two steps.
    pub fn hidden_host_fraction(&self) -> Option<f64> {
        let host = self.timer("step_host")?.total.as_secs_f64();
        let hidden = self.timer("step_hidden")?.total.as_secs_f64();
        (host > 0.0).then(|| hidden / host)
    }

    /// The most recent warnings the device logged, oldest first: each
    /// recompile after warm-up (what changed, and where), a graph that
    /// keeps growing without `mark_step()`, tensors that leak across
    /// steps. The last 64 are kept.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

impl fmt::Display for MetricsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.counters.keys().map(String::len).max().unwrap_or(0);
        writeln!(f, "{:<width$}  {:>12}", "counter", "value")?;
        for (name, value) in &self.counters {
            writeln!(f, "{name:<width$}  {value:>12}")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<width$}  {:>8}  {:>12}  {:>12}",
            "timer", "count", "total", "median"
        )?;
        for (name, t) in &self.timers {
            writeln!(
                f,
                "{name:<width$}  {:>8}  {:>12}  {:>12}",
                t.count,
                format!("{:.3?}", t.total),
                format!("{:.3?}", t.median)
            )?;
        }
        if let Some(hidden) = self.hidden_host_fraction() {
            writeln!(
                f,
                "\nhost time hidden behind the device: {:.0} % (step_hidden / step_host)",
                100.0 * hidden
            )?;
        }
        if !self.warnings.is_empty() {
            writeln!(f, "\nwarnings")?;
            for w in &self.warnings {
                writeln!(f, "  {w}")?;
            }
        }
        Ok(())
    }
}
