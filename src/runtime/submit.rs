//! A submission thread for adapters whose `vkQueueSubmit` runs the work
//! before returning. Mesa's lavapipe executes a command buffer inside the
//! submit call, so a `mark_step` that submits on the caller's thread
//! blocks for the whole step and the host cannot trace the next one in the
//! meantime. With a `Submitter`, every queue operation (buffer writes and
//! submissions, in program order) goes through one FIFO to a thread of its
//! own, and `mark_step` returns as soon as the command buffer is queued.
//!
//! Ordering is the reason all queue operations take the same path: a
//! buffer write must land after the command buffers encoded before it
//! (which may read the pool buffer it reuses) and before those encoded
//! after it.

use std::sync::mpsc::{Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Condvar, Mutex};

use super::overlap::DeviceClock;

/// Command buffers queued but not yet run before `submit` waits: the host
/// may trace this many steps ahead of the device, and no more, so memory
/// held by queued steps stays bounded.
const MAX_IN_FLIGHT: usize = 2;

/// One queue operation.
enum Job {
    /// `queue.write_buffer(buffer, offset, data)`. The pool may hand the
    /// buffer out again before this runs: whatever uses it next is queued
    /// behind this job.
    Write {
        buffer: wgpu::Buffer,
        offset: u64,
        data: Vec<u8>,
    },
    /// `queue.submit([command_buffer])`.
    Submit(wgpu::CommandBuffer),
    /// Answered once every job before it has been issued.
    Flush(SyncSender<()>),
    /// `buffer.slice(..).map_async(Read)`, asked once the command buffer
    /// that fills it has been issued; the outcome goes to `done`.
    Map {
        buffer: wgpu::Buffer,
        done: Sender<Result<(), wgpu::BufferAsyncError>>,
    },
}

/// The sending side of the submission thread.
pub(crate) struct Submitter {
    tx: Sender<Job>,
    /// Command buffers queued and not yet submitted, and its signal.
    in_flight: Arc<(Mutex<usize>, Condvar)>,
    /// Where a full queue's wait is counted as the host blocked.
    clock: Arc<DeviceClock>,
}

impl Submitter {
    /// Starts the thread that issues `queue`'s operations.
    /// The time each submit takes (the work itself, on the adapters this
    /// thread is for) is the device's busy time on `clock`.
    pub fn start(queue: wgpu::Queue, clock: Arc<DeviceClock>) -> std::io::Result<Submitter> {
        let busy = clock.clone();
        let (tx, rx) = channel::<Job>();
        let in_flight = Arc::new((Mutex::new(0usize), Condvar::new()));
        let counter = in_flight.clone();
        std::thread::Builder::new()
            .name("lazywgpu-submit".into())
            .spawn(move || {
                // Ends when the sender (the GPU context) is dropped.
                while let Ok(job) = rx.recv() {
                    match job {
                        Job::Write {
                            buffer,
                            offset,
                            data,
                        } => queue.write_buffer(&buffer, offset, &data),
                        Job::Submit(cb) => {
                            let start = std::time::Instant::now();
                            queue.submit([cb]);
                            busy.add_busy(start.elapsed());
                            let (count, signal) = &*counter;
                            *count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
                            signal.notify_all();
                        }
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                        Job::Map { buffer, done } => {
                            buffer.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                                let _ = done.send(r);
                            });
                        }
                    }
                }
            })?;
        Ok(Submitter {
            tx,
            in_flight,
            clock,
        })
    }

    fn send(&self, job: Job) {
        // The thread only stops when the sender is dropped, so a failed
        // send cannot happen while `self` exists; ignore it rather than
        // panic in a destructor-time corner.
        let _ = self.tx.send(job);
    }

    /// Queues a buffer write.
    pub fn write(&self, buffer: wgpu::Buffer, offset: u64, data: Vec<u8>) {
        self.send(Job::Write {
            buffer,
            offset,
            data,
        });
    }

    /// Queues a command buffer, first waiting while `MAX_IN_FLIGHT` are
    /// queued and not yet run.
    pub fn submit(&self, cb: wgpu::CommandBuffer) {
        let (count, signal) = &*self.in_flight;
        let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
        if *n >= MAX_IN_FLIGHT {
            // Only a full queue's wait is timed as the host blocked.
            n = self.clock.blocked(|| {
                while *n >= MAX_IN_FLIGHT {
                    n = signal.wait(n).unwrap_or_else(|e| e.into_inner());
                }
                n
            });
        }
        *n += 1;
        drop(n);
        self.send(Job::Submit(cb));
    }

    /// Queues the mapping of `buffer` for reading, behind the command
    /// buffers queued so far.
    pub fn map(&self, buffer: wgpu::Buffer, done: Sender<Result<(), wgpu::BufferAsyncError>>) {
        self.send(Job::Map { buffer, done });
    }

    /// Waits until every queued operation has been issued to wgpu (on
    /// lavapipe: has run).
    pub fn flush(&self) {
        let (tx, rx) = sync_channel(1);
        self.send(Job::Flush(tx));
        let _ = rx.recv();
    }
}
