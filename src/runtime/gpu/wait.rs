//! Waiting for the device without a blocking wait in the driver: a
//! non-blocking poll, repeated, yielding the thread at first and then
//! sleeping a little longer each time (up to `MAX_PAUSE`).
//!
//! Why not `PollType::Wait` with no timeout: on an NVIDIA H200 (Vulkan,
//! driver 580, in a virtual machine) a blocking fence wait returned only
//! at the kernel's next timer tick, 10 ms: a 1024^3 matmul whose kernel
//! took 0.14 ms by its timestamps took 10.2 ms a step, and since wgpu
//! holds the device's fence while it waits, the completion watcher's wait
//! also held up the next submit. A short sleep is a high-resolution timer
//! and does not wait for the tick.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The longest sleep between two checks: the most a wait can overshoot
/// the work's end by, once past the first checks.
const MAX_PAUSE: Duration = Duration::from_micros(200);

/// Checks made with only a yield between them before sleeping.
const YIELDS: u32 = 32;

/// The pause before check number `attempt` (0-based): none (a yield) for
/// the first `YIELDS`, then 10 µs doubling up to `MAX_PAUSE`.
pub(crate) fn pause(attempt: u32) -> Option<Duration> {
    let doublings = attempt.checked_sub(YIELDS)?;
    let micros = 10u64.saturating_mul(1u64 << doublings.min(16));
    Some(Duration::from_micros(micros).min(MAX_PAUSE))
}

/// Waits until `done` is set by a callback that completion releases (a
/// submission's `on_submitted_work_done`, a buffer's mapping), run in
/// this thread's poll or another's; also returns once the queue is
/// idle, when every such callback has run. Only `PollType::Poll`: a wait
/// with a zero timeout would do, but wgpu-core asserts that a wait it was
/// asked for has finished when it finds the queue empty, which two
/// threads polling at once broke.
pub(crate) fn until_set(device: &wgpu::Device, done: &AtomicBool) -> Result<(), wgpu::PollError> {
    let done = || done.load(Ordering::Acquire);
    let mut attempt = 0;
    loop {
        if done() || device.poll(wgpu::PollType::Poll)?.is_queue_empty() || done() {
            return Ok(());
        }
        match pause(attempt) {
            None => std::thread::yield_now(),
            Some(p) => std::thread::sleep(p),
        }
        attempt = attempt.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_start_at_yields_and_grow_to_the_cap() {
        assert_eq!(pause(0), None);
        assert_eq!(pause(YIELDS - 1), None);
        assert_eq!(pause(YIELDS), Some(Duration::from_micros(10)));
        assert_eq!(pause(YIELDS + 1), Some(Duration::from_micros(20)));
        assert_eq!(pause(YIELDS + 4), Some(Duration::from_micros(160)));
        assert_eq!(pause(YIELDS + 5), Some(MAX_PAUSE));
        assert_eq!(pause(u32::MAX), Some(MAX_PAUSE));
    }
}
