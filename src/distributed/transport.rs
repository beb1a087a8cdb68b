//! What a process group needs from the layer that moves bytes between
//! ranks (MPI across processes, shared memory between threads), and the
//! thread that owns it.
//!
//! Every collective of a group runs on one thread of its own, in the order
//! the program issued them. That is what lets a data-parallel step hand a
//! bucket of gradients to the group and go on queueing device work: the
//! collective proceeds while the caller does not wait. It is also what MPI
//! wants (one thread makes every call), and it gives each rank one place
//! where a timeout is enforced.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};

/// An element-wise reduction across ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum over ranks.
    Sum,
    /// The sum over ranks divided by the number of ranks (PyTorch's `AVG`).
    Mean,
    /// The largest value over ranks (NaN if any rank holds NaN).
    Max,
    /// The smallest value over ranks (NaN if any rank holds NaN).
    Min,
}

/// Moves data between the ranks of a group. Implementations block until
/// the collective is complete on this rank, or fail once `timeout` has
/// passed without it completing.
pub(crate) trait Transport {
    /// This process's (or thread's) index in the group.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn world_size(&self) -> usize;
    /// Replaces `data` by the element-wise reduction of every rank's
    /// `data` (`Sum`, `Max` or `Min`; the caller divides for `Mean`).
    /// Every rank gets the same result, bit for bit.
    fn all_reduce(&mut self, data: &mut [f32], op: ReduceOp, timeout: Duration) -> Result<()>;
    /// Replaces `data` on every rank by `root`'s.
    fn broadcast(&mut self, data: &mut [u32], root: usize, timeout: Duration) -> Result<()>;
    /// Returns once every rank has called it.
    fn barrier(&mut self, timeout: Duration) -> Result<()>;
    /// Ends the group for every rank after an error on this one: no rank
    /// may be left waiting for this one. MPI aborts the job.
    fn fail(&mut self, message: &str);
}

/// A job for the collective thread.
type Job = Box<dyn FnOnce(&mut dyn Transport) + Send>;

/// The thread that owns a group's transport and runs its collectives in
/// order.
pub(crate) struct CollectiveThread {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    rank: usize,
    world_size: usize,
}

impl CollectiveThread {
    /// Starts the thread and makes the transport on it (MPI must be
    /// initialised by the thread that will call it).
    pub fn start(
        name: String,
        make: impl FnOnce() -> Result<Box<dyn Transport>> + Send + 'static,
    ) -> Result<CollectiveThread> {
        let (jobs, queue) = channel::<Job>();
        let (ready_tx, ready) = channel::<Result<(usize, usize)>>();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let mut transport = match make() {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((transport.rank(), transport.world_size())));
                // Ends when the group (the sender) is dropped; the
                // transport is dropped here, on its own thread.
                while let Ok(job) = queue.recv() {
                    job(transport.as_mut());
                }
            })
            .map_err(|e| Error::Collective {
                op: "init",
                rank: 0,
                message: format!("starting the collective thread: {e}"),
            })?;
        let (rank, world_size) = ready.recv().map_err(|_| Error::Collective {
            op: "init",
            rank: 0,
            message: "the collective thread ended while starting".into(),
        })??;
        Ok(CollectiveThread {
            jobs: Some(jobs),
            thread: Some(thread),
            rank,
            world_size,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Queues `f` behind the collectives issued before; its result
    /// arrives on the returned channel.
    pub fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Transport) -> R + Send + 'static,
    ) -> Receiver<R> {
        let (tx, rx) = channel();
        if let Some(jobs) = &self.jobs {
            // A send fails only once the thread has ended (a panic in a
            // job); the receiver then reports it, see `wait`.
            let _ = jobs.send(Box::new(move |t: &mut dyn Transport| {
                let _ = tx.send(f(t));
            }));
        }
        rx
    }

    /// The result of a job queued by `run`.
    pub fn wait<R>(&self, result: Receiver<Result<R>>, op: &'static str) -> Result<R> {
        result.recv().map_err(|_| Error::Collective {
            op,
            rank: self.rank,
            message: "the collective thread has stopped (an earlier collective panicked)".into(),
        })?
    }
}

impl Drop for CollectiveThread {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
