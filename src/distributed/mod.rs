//! Training on several devices: process groups and data parallelism.
//!
//! A [`ProcessGroup`] is a set of ranks that run the same program on
//! different data and meet in collectives: [`ProcessGroup::barrier`],
//! [`ProcessGroup::broadcast`] and [`ProcessGroup::all_reduce`] of tensors.
//! Ranks are either
//! - processes started by `mpirun`, on one host or many, through MPI
//!   ([`init`], behind the cargo feature `mpi`), or
//! - threads of one process, one per device, with a shared-memory
//!   all-reduce ([`ProcessGroup::local`]): two GPUs in one machine need no
//!   MPI.
//!
//! [`DataParallel`] trains one model on all ranks: parameters are
//! broadcast from rank 0 at the start, each rank runs forward and backward
//! on its shard of the batch, and [`DataParallel::sync_gradients`]
//! averages the gradients across ranks in buckets, overlapping each
//! bucket's all-reduce with the device's work on the buckets after it; the
//! optimiser step that follows is then the same on every rank.
//!
//! wgpu has no peer-to-peer buffers, so gradients travel through the host:
//! each bucket is read back, reduced in host memory (MPI or shared memory)
//! and uploaded again.
//!
//! ```no_run
//! # fn main() -> lazywgpu::Result<()> {
//! use lazywgpu::distributed::{self, DataParallel};
//! use lazywgpu::nn::{Linear, Module, Parameters, functional::mse_loss};
//! use lazywgpu::optim::{Optimizer, Sgd};
//! use lazywgpu::{Device, Tensor};
//! let group = distributed::init()?; // under `mpirun -np 2`
//! let dev = Device::default();
//! let model = Linear::new(784, 10, &dev);
//! let mut ddp = DataParallel::new(group, model.params())?;
//! let mut opt = Sgd::new(model.params(), 0.1);
//! # let (images, labels) = (Tensor::zeros([64, 784], &dev), Tensor::zeros([64, 10], &dev));
//! let rows = ddp.shard(64); // this rank's rows of a global batch of 64
//! let x = images.narrow(0, rows.start, rows.len());
//! let y = labels.narrow(0, rows.start, rows.len());
//! let loss = mse_loss(&model.forward(&x), &y);
//! loss.backward();
//! let stats = ddp.sync_gradients()?; // gradients are now the mean over ranks
//! opt.step();
//! opt.zero_grad();
//! dev.mark_step()?;
//! println!("all-reduce {:?}, {:.0} % hidden", stats.communication, 100.0 * stats.hidden_fraction());
//! # Ok(()) }
//! ```
//!
//! ## Failures
//! Every collective has a timeout ([`ProcessGroup::set_timeout`],
//! `LAZYWGPU_COLLECTIVE_TIMEOUT` in seconds, 300 by default). Under MPI a
//! rank that times out, panics or calls [`ProcessGroup::abort`] prints why
//! and aborts the job, so no rank is left waiting for a dead peer; `mpirun`
//! itself ends the job when a rank is killed. In a local group a rank that
//! fails or leaves makes every other rank's next (or current) collective
//! return [`Error::Collective`](crate::Error::Collective).

mod data_parallel;
mod local;
#[cfg(feature = "mpi")]
mod mpi;
mod transport;

pub use data_parallel::{DataParallel, SyncStats};
pub use transport::ReduceOp;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::Tensor;
use crate::error::Result;
use crate::runtime::stages::StagedRead;
use transport::{CollectiveThread, Transport};

/// The collective timeout when `LAZYWGPU_COLLECTIVE_TIMEOUT` is unset.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The ranks that train together, seen from one of them.
///
/// Collectives are called by every rank in the same order; each blocks
/// until it is complete on this rank (or fails). They run on a thread of
/// the group's own, so a group can be used from any thread.
pub struct ProcessGroup {
    thread: CollectiveThread,
    timeout_ms: AtomicU64,
}

/// Joins the MPI job this process was started in (`mpirun -np N`): rank
/// and world size come from MPI. A process not started by `mpirun` is a
/// group of one. May be called once per process: MPI cannot be initialised
/// again after the group is dropped.
///
/// After this call a panic on any thread of the process aborts the whole
/// job (after the usual panic message), so that the other ranks do not wait
/// for this one.
///
/// Needs the cargo feature `mpi`; without it this returns
/// [`Error::Collective`](crate::Error::Collective) saying so.
pub fn init() -> Result<ProcessGroup> {
    #[cfg(feature = "mpi")]
    {
        let thread = CollectiveThread::start("lazywgpu-mpi".into(), || {
            Ok(Box::new(mpi::MpiTransport::init()?) as Box<dyn Transport>)
        })?;
        Ok(ProcessGroup::on(thread))
    }
    #[cfg(not(feature = "mpi"))]
    Err(crate::Error::Collective {
        op: "init",
        rank: 0,
        message: "lazywgpu was built without the `mpi` feature (cargo build --features mpi; it needs an MPI library such as Debian's libopenmpi-dev, and libclang-dev)".into(),
    })
}

/// The timeout from `LAZYWGPU_COLLECTIVE_TIMEOUT` (seconds).
fn timeout_from_env() -> Duration {
    crate::config::ProcessConfig::get()
        .collective_timeout
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// The result of one all-reduce of host data, with when it ran.
pub(crate) struct Reduced {
    pub data: Vec<f32>,
    /// When the data was on the host (the device had produced it).
    pub ready: Instant,
    /// When the all-reduce completed.
    pub done: Instant,
}

impl ProcessGroup {
    fn on(thread: CollectiveThread) -> ProcessGroup {
        ProcessGroup {
            thread,
            timeout_ms: AtomicU64::new(timeout_from_env().as_millis() as u64),
        }
    }

    /// `world_size` ranks in this process, one per thread that will use
    /// them: hand element `r` to the thread of rank `r`, with a [`Device`]
    /// value of its own (one per adapter from [`Device::gpus`], or several
    /// made on one adapter: two ranks must not share a `Device` value,
    /// whose seed and pending work are one program's). Collectives meet in
    /// shared memory.
    ///
    /// [`Device`]: crate::Device
    /// [`Device::gpus`]: crate::Device::gpus
    ///
    /// # Panics
    /// If `world_size` is 0.
    #[track_caller]
    pub fn local(world_size: usize) -> Result<Vec<ProcessGroup>> {
        assert!(
            world_size > 0,
            "ProcessGroup::local: world_size must be at least 1"
        );
        let shared = local::Shared::new(world_size);
        (0..world_size)
            .map(|rank| {
                let shared = shared.clone();
                let thread = CollectiveThread::start(format!("lazywgpu-rank-{rank}"), move || {
                    Ok(Box::new(local::LocalTransport::new(shared, rank)) as Box<dyn Transport>)
                })?;
                Ok(ProcessGroup::on(thread))
            })
            .collect()
    }

    /// This rank's index, `0..world_size()`.
    pub fn rank(&self) -> usize {
        self.thread.rank()
    }

    /// The number of ranks in the group.
    pub fn world_size(&self) -> usize {
        self.thread.world_size()
    }

    /// How long a collective may wait for the other ranks.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Sets how long a collective may wait for the other ranks before it
    /// fails (MPI: aborts the job).
    pub fn set_timeout(&self, timeout: Duration) {
        self.timeout_ms
            .store(timeout.as_millis().max(1) as u64, Ordering::Relaxed);
    }

    /// Returns once every rank has called it.
    pub fn barrier(&self) -> Result<()> {
        let timeout = self.timeout();
        let done = self
            .thread
            .run(move |t: &mut dyn Transport| t.barrier(timeout));
        self.thread.wait(done, "barrier")
    }

    /// Replaces `tensor`'s value on every rank by its value on `root`
    /// (PyTorch's `dist.broadcast`). Any dtype; the tensor keeps its shape,
    /// dtype and gradient settings.
    ///
    /// # Panics
    /// If `root` is not a rank of the group.
    #[track_caller]
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<()> {
        assert!(
            root < self.world_size(),
            "broadcast: root {root} is not a rank of a group of {}",
            self.world_size()
        );
        let bits = pollster::block_on(tensor.device().read_bits(&tensor.node()))?;
        let bits = self.broadcast_words(bits, root)?;
        if self.rank() != root {
            let value = Tensor::from_bits(
                bits,
                tensor.shape().to_vec(),
                tensor.dtype(),
                "broadcast",
                tensor.device(),
            )?;
            crate::no_grad(|| tensor.copy_(&value));
        }
        Ok(())
    }

    /// `root`'s `words` on every rank (each rank passes as many words as
    /// `root`; host data, as `broadcast` sends a tensor's bits).
    pub(crate) fn broadcast_words(&self, mut words: Vec<u32>, root: usize) -> Result<Vec<u32>> {
        let timeout = self.timeout();
        let done = self.thread.run(move |t: &mut dyn Transport| {
            t.broadcast(&mut words, root, timeout).map(|_| words)
        });
        self.thread.wait(done, "broadcast")
    }

    /// Replaces `tensor`'s value on every rank by the element-wise
    /// reduction of its values on all ranks (PyTorch's `dist.all_reduce`).
    /// Every rank gets the same bits. The reduction runs in f32 for 16-bit
    /// floats.
    ///
    /// # Panics
    /// If `tensor` is not a float tensor.
    #[track_caller]
    pub fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<()> {
        assert!(
            tensor.dtype().is_float(),
            "all_reduce: tensor of shape {:?} is {}; only float tensors are reduced",
            tensor.shape(),
            tensor.dtype()
        );
        let data = tensor.to_f32_vec()?;
        let reduced = self.all_reduce_vec(data, op)?;
        let value = Tensor::from_vec(reduced, tensor.shape().to_vec(), tensor.device())?;
        crate::no_grad(|| tensor.copy_(&value));
        Ok(())
    }

    /// The element-wise reduction of `data` over all ranks, for host data.
    pub fn all_reduce_vec(&self, data: Vec<f32>, op: ReduceOp) -> Result<Vec<f32>> {
        let done = self.all_reduce_later(
            StagedRead::Host(data.into_iter().map(f32::to_bits).collect()),
            op,
        );
        Ok(self.wait(done)?.data)
    }

    /// Ends the group for every rank after an error on this one, then
    /// panics with `message` on this one. Under MPI the job is aborted
    /// (with `message` printed); in a local group the other ranks' next
    /// collective returns an error naming this rank.
    #[track_caller]
    pub fn abort(&self, message: &str) -> ! {
        let owned = message.to_string();
        let done = self.thread.run(move |t: &mut dyn Transport| t.fail(&owned));
        let _ = done.recv();
        panic!("rank {}: {message}", self.rank());
    }

    /// Queues the all-reduce of `source` (read on the collective thread,
    /// once the device has produced it) behind the collectives before it.
    pub(crate) fn all_reduce_later(
        &self,
        source: StagedRead,
        op: ReduceOp,
    ) -> Receiver<Result<Reduced>> {
        let timeout = self.timeout();
        let world = self.world_size() as f32;
        self.thread.run(move |t: &mut dyn Transport| {
            let words = source.wait()?;
            let ready = Instant::now();
            let mut data: Vec<f32> = words.into_iter().map(f32::from_bits).collect();
            t.all_reduce(&mut data, op, timeout)?;
            if op == ReduceOp::Mean {
                for v in &mut data {
                    *v /= world;
                }
            }
            Ok(Reduced {
                data,
                ready,
                done: Instant::now(),
            })
        })
    }

    /// The result of a job queued by `all_reduce_later`.
    pub(crate) fn wait(&self, done: Receiver<Result<Reduced>>) -> Result<Reduced> {
        self.thread.wait(done, "all_reduce")
    }
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ProcessGroup(rank {} of {})",
            self.rank(),
            self.world_size()
        )
    }
}
