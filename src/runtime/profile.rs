//! `LAZYWGPU_PROFILE=1`: device time of every kernel, from timestamp
//! queries written at the start and end of a compute pass per kernel.
//! Profiling waits for each graph to finish (to read its timestamps), so
//! it changes the timing of the program around it; kernel times are what
//! it is for.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Device time per kernel label, accumulated over a run.
#[derive(Default)]
pub(crate) struct KernelProfile {
    /// label -> (launches, total nanoseconds)
    totals: Mutex<BTreeMap<String, (u64, f64)>>,
}

impl KernelProfile {
    /// Adds one launch of `label` that took `ns`.
    pub fn add(&self, label: String, ns: f64) {
        let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        let e = t.entry(label).or_insert((0, 0.0));
        e.0 += 1;
        e.1 += ns;
    }

    /// A markdown table, the dearest kernels first.
    pub fn report(&self) -> String {
        let t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<(&String, &(u64, f64))> = t.iter().collect();
        rows.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
        let all: f64 = rows.iter().map(|r| r.1.1).sum();
        let mut out = String::from(
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
