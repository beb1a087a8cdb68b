//! The MPI transport (feature `mpi`): ranks are processes started by
//! `mpirun`, on one host or many, and collectives are MPI's.
//!
//! Each collective is started non-blocking (`MPI_Iallreduce`,
//! `MPI_Ibcast`, `MPI_Ibarrier`) and tested until it completes or its
//! timeout passes. A timeout means a peer died or stopped calling
//! collectives; an MPI collective cannot be cancelled, so the rank prints
//! why and aborts the job (`MPI_Abort`), which ends every rank instead of
//! leaving them waiting. A panic on any thread of a rank does the same
//! (the hook is installed by [`MpiTransport::init`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::environment::Universe;
use mpi::request::Request;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::Equivalence;

use super::transport::{ReduceOp, Transport};
use crate::error::{Error, Result};

/// How long a collective is polled without sleeping.
const IDLE_AFTER: Duration = Duration::from_secs(1);

/// This process's rank and world size, for the panic hook (which runs
/// on whichever thread panicked).
static RANK: AtomicUsize = AtomicUsize::new(0);
static WORLD_SIZE: AtomicUsize = AtomicUsize::new(0);

/// One process's end of `MPI_COMM_WORLD`.
pub(crate) struct MpiTransport {
    world: SimpleCommunicator,
    rank: usize,
    world_size: usize,
    /// Finalises MPI when dropped (on the collective thread, which
    /// initialised it).
    _universe: Universe,
}

impl MpiTransport {
    /// Initialises MPI on the calling thread (the collective thread).
    pub fn init() -> Result<MpiTransport> {
        let (universe, _threading) =
            mpi::initialize_with_threading(mpi::Threading::Multiple).ok_or_else(|| {
                Error::Collective {
                    op: "init",
                    rank: 0,
                    message: "MPI is already initialised in this process (distributed::init may be called once)".into(),
                }
            })?;
        let world = universe.world();
        let rank = world.rank() as usize;
        let world_size = world.size() as usize;
        RANK.store(rank, Ordering::Relaxed);
        WORLD_SIZE.store(world_size, Ordering::Relaxed);
        install_abort_on_panic();
        Ok(MpiTransport {
            world,
            rank,
            world_size,
            _universe: universe,
        })
    }

    /// Tests `request` until it completes; past `timeout`, aborts the job.
    fn finish<'a, D: ?Sized, S: mpi::request::Scope<'a>>(
        &self,
        op: &'static str,
        mut request: Request<'a, D, S>,
        timeout: Duration,
    ) {
        let start = Instant::now();
        loop {
            match request.test() {
                Ok(_) => return,
                Err(pending) => request = pending,
            }
            if start.elapsed() >= timeout {
                let message = format!(
                    "{op} did not complete within {timeout:?}: a peer rank died, hangs, or called another collective"
                );
                self.abort_job(op, &message);
            }
            // MPI progresses a non-blocking collective only inside calls
            // like this test (Open MPI has no progress thread), so poll
            // without sleeping while data may be moving; yielding lets
            // the other rank's process (or this rank's device, on a CPU
            // adapter) have the core. A peer that has not arrived after
            // `IDLE_AFTER` is waited for with short sleeps.
            if start.elapsed() < IDLE_AFTER {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// `MPI_Iallreduce` of `send` into `recv`, tested until done.
    fn all_reduce_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: SystemOperation,
        timeout: Duration,
    ) {
        mpi::request::scope(|scope| {
            let request = self.world.immediate_all_reduce_into(scope, send, recv, op);
            self.finish("all_reduce", request, timeout);
        });
    }

    fn abort_job(&self, op: &str, message: &str) -> ! {
        say(&format!(
            "lazywgpu: rank {} of {}: {op}: {message}; aborting the MPI job",
            self.rank, self.world_size
        ));
        self.world.abort(1)
    }
}

/// `MPI_Abort`s the job after a panic on any thread of this rank, so that
/// the other ranks do not wait for this one until their timeout.
fn install_abort_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        say(&format!(
            "lazywgpu: rank {} of {} panicked; aborting the MPI job",
            RANK.load(Ordering::Relaxed),
            WORLD_SIZE.load(Ordering::Relaxed)
        ));
        SimpleCommunicator::world().abort(1);
    }));
}

/// Writes a line to stderr in one write, so that `mpirun --tag-output`
/// (and anything else interleaving ranks' output) keeps it whole.
fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

fn system_op(op: ReduceOp) -> SystemOperation {
    match op {
        ReduceOp::Sum | ReduceOp::Mean => SystemOperation::sum(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Min => SystemOperation::min(),
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn all_reduce(&mut self, data: &mut [f32], op: ReduceOp, timeout: Duration) -> Result<()> {
        let send = data.to_vec();
        self.all_reduce_into(&send, data, system_op(op), timeout);
        // MPI's MAX and MIN do not promise to keep NaN; PyTorch's do.
        if matches!(op, ReduceOp::Max | ReduceOp::Min) {
            let mine: Vec<u8> = send.iter().map(|v| v.is_nan() as u8).collect();
            let mut any_nan = vec![0u8; mine.len()];
            self.all_reduce_into(&mine, &mut any_nan, SystemOperation::max(), timeout);
            for (d, nan) in data.iter_mut().zip(any_nan) {
                if nan != 0 {
                    *d = f32::NAN;
                }
            }
        }
        Ok(())
    }

    fn broadcast(&mut self, data: &mut [u32], root: usize, timeout: Duration) -> Result<()> {
        let root = self.world.process_at_rank(root as mpi::Rank);
        mpi::request::scope(|scope| {
            let request = root.immediate_broadcast_into(scope, &mut data[..]);
            self.finish("broadcast", request, timeout);
        });
        Ok(())
    }

    fn barrier(&mut self, timeout: Duration) -> Result<()> {
        let request = self.world.immediate_barrier();
        self.finish("barrier", request, timeout);
        Ok(())
    }

    fn fail(&mut self, message: &str) {
        self.abort_job("error", message)
    }
}
