//! String-named counters in the spirit of `torch._lazy.metrics`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

/// Counters every device reports, even while zero.
pub const STANDARD_COUNTERS: &[&str] = &[
    "graphs_executed",
    "graph_cache_hits",
    "graph_cache_misses",
    "graphs_compiled",
    "kernels_compiled",
    "pipeline_cache_hits",
    "kernel_launches",
    "bytes_uploaded",
    "bytes_downloaded",
    "params_uploaded_bytes",
    "readbacks",
    "buffers_allocated",
    "pool_reuses",
    "buffers_donated",
    "bytes_live",
    "bytes_pooled",
    "peak_bytes_live",
];

/// The live counters of one device.
#[derive(Debug)]
pub(crate) struct Metrics {
    counters: Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            counters: Mutex::new(STANDARD_COUNTERS.iter().map(|&n| (n, 0)).collect()),
        }
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
        MetricsSnapshot {
            counters: c.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
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
    }
}

/// A copy of a device's counters at one moment (see [`crate::Device::metrics`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    counters: BTreeMap<String, u64>,
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
}

impl fmt::Display for MetricsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.counters.keys().map(String::len).max().unwrap_or(0);
        writeln!(f, "{:<width$}  {:>12}", "counter", "value")?;
        for (name, value) in &self.counters {
            writeln!(f, "{name:<width$}  {value:>12}")?;
        }
        Ok(())
    }
}
