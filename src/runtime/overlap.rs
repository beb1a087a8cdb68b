//! How much of the host's work hides behind the device's. The process's
//! wgpu device keeps two clocks: the time the host spent blocked on the
//! device (waits, readbacks, a full submission queue) and the time the
//! device spent running command buffers (on CPU adapters, whose submit runs
//! the work, the submission thread times it exactly; elsewhere it runs from
//! a submission, or the previous completion if later, to the completion
//! callback). Each `mark_step` turns the clocks' progress into a step's
//! figures: its wall time, the host's busy time (wall minus blocked), the
//! device's busy time, and the host time hidden behind the device
//! (`host + device - wall`, within `0..=min(host, device)`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::metrics::Metrics;

/// The process-wide clocks of the wgpu device.
#[derive(Default)]
pub(crate) struct DeviceClock {
    blocked_ns: AtomicU64,
    busy_ns: AtomicU64,
    /// When the last command buffer completed (completion callbacks).
    last_done: Mutex<Option<Instant>>,
}

impl DeviceClock {
    /// Runs `f`, which blocks the host on the device, and counts its time.
    pub fn blocked<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.blocked_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    /// Adds device time measured directly (a submit that runs the work).
    pub fn add_busy(&self, busy: Duration) {
        self.busy_ns
            .fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
    }

    /// A command buffer submitted at `submitted` has completed (now): the
    /// device was busy since then, or since the previous completion.
    pub fn work_done(&self, submitted: Instant) {
        let now = Instant::now();
        let mut last = self.last_done.lock().unwrap_or_else(|e| e.into_inner());
        let start = last.map_or(submitted, |l| l.max(submitted));
        self.add_busy(now.saturating_duration_since(start));
        *last = Some(now);
    }

    /// (blocked, busy) so far.
    fn totals(&self) -> (Duration, Duration) {
        (
            Duration::from_nanos(self.blocked_ns.load(Ordering::Relaxed)),
            Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed)),
        )
    }
}

/// A device's position on the clocks at its last step.
#[derive(Default)]
pub(crate) struct StepClock {
    last: Mutex<Option<(Instant, Duration, Duration)>>,
}

impl StepClock {
    /// Records a step ending now into `metrics` (timers `step_wall`,
    /// `step_host`, `step_device`, `step_hidden`); the first step only
    /// starts the clock.
    pub fn step(&self, clock: &DeviceClock, metrics: &Metrics) {
        let now = Instant::now();
        let (blocked, busy) = clock.totals();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((then, blocked_then, busy_then)) = last.replace((now, blocked, busy)) {
            let wall = now - then;
            let host = wall.saturating_sub(blocked.saturating_sub(blocked_then));
            let device = busy.saturating_sub(busy_then);
            let hidden = (host + device).saturating_sub(wall).min(host.min(device));
            metrics.record("step_wall", wall);
            metrics.record("step_host", host);
            metrics.record("step_device", device);
            metrics.record("step_hidden", hidden);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_splits_its_wall_time_into_host_device_and_hidden() {
        let (clock, steps, metrics) =
            (DeviceClock::default(), StepClock::default(), Metrics::new());
        steps.step(&clock, &metrics);
        // The host blocks 5 ms; the device runs 30 ms, 20 of them while the
        // host traced.
        clock.blocked(|| std::thread::sleep(Duration::from_millis(5)));
        clock.add_busy(Duration::from_millis(30));
        std::thread::sleep(Duration::from_millis(25));
        steps.step(&clock, &metrics);
        let s = metrics.snapshot();
        let ms = |name: &str| s.timer(name).expect(name).total.as_secs_f64() * 1e3;
        let (wall, host, device, hidden) = (
            ms("step_wall"),
            ms("step_host"),
            ms("step_device"),
            ms("step_hidden"),
        );
        // A sleep lasts at least as long as asked and longer on a busy
        // machine: the checks hold for any overshoot (host is the 25 ms
        // sleep and more, blocked the 5 ms one and more).
        assert!(wall >= 30.0, "{wall}");
        assert!(host >= 25.0 && host <= wall - 5.0 + 1e-6, "{host} {wall}");
        assert_eq!(device, 30.0);
        let overlap = (host + device - wall).max(0.0);
        assert!((hidden - overlap).abs() < 1e-6, "{hidden} {overlap}");
        assert!(hidden <= host.min(device));
    }
}
