//! The in-process transport: ranks are threads of one process (one per
//! adapter, say) and a collective is a rendezvous in shared memory.
//!
//! Each rank deposits its data and waits; the last to arrive combines the
//! deposits in rank order (so every rank gets the same bits) and wakes the
//! others. A rank that leaves (drops its group, panics) or times out marks
//! the group failed, and every rank waiting or arriving later gets an
//! error at once instead of waiting for it.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::transport::{ReduceOp, Transport};
use crate::error::{Error, Result};

/// What a collective call asks for, to check that every rank called the
/// same one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    AllReduce(ReduceOp, usize),
    Broadcast(usize, usize),
    Barrier,
}

struct Round {
    /// Rounds completed so far.
    generation: u64,
    /// The call of the round in progress, set by its first rank.
    call: Option<Call>,
    deposits: Vec<Option<Vec<u32>>>,
    arrived: usize,
    /// The combined data of the last completed round.
    result: Arc<Vec<u32>>,
    /// Why the group cannot go on, once it cannot.
    failed: Option<String>,
}

/// The state the ranks of one in-process group share.
pub(crate) struct Shared {
    round: Mutex<Round>,
    wake: Condvar,
    world_size: usize,
}

impl Shared {
    pub fn new(world_size: usize) -> Arc<Shared> {
        Arc::new(Shared {
            round: Mutex::new(Round {
                generation: 0,
                call: None,
                deposits: vec![None; world_size],
                arrived: 0,
                result: Arc::new(Vec::new()),
                failed: None,
            }),
            wake: Condvar::new(),
            world_size,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Round> {
        // Every write under this lock is completed before a panic can
        // happen (the combine runs on owned data), so a poisoned lock is
        // still consistent.
        self.round.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One rank's end of an in-process group.
pub(crate) struct LocalTransport {
    shared: Arc<Shared>,
    rank: usize,
}

impl LocalTransport {
    pub fn new(shared: Arc<Shared>, rank: usize) -> LocalTransport {
        LocalTransport { shared, rank }
    }

    fn error(&self, op: &'static str, message: String) -> Error {
        Error::Collective {
            op,
            rank: self.rank,
            message,
        }
    }

    /// Deposits `data` for `call` and returns the round's combined data.
    fn rendezvous(
        &self,
        op: &'static str,
        call: Call,
        data: Vec<u32>,
        timeout: Duration,
    ) -> Result<Arc<Vec<u32>>> {
        let deadline = Instant::now() + timeout;
        let mut round = self.shared.lock();
        if let Some(why) = &round.failed {
            return Err(self.error(op, why.clone()));
        }
        match round.call {
            None => round.call = Some(call),
            Some(other) if other != call => {
                let why = format!(
                    "rank {} called {call:?} while another rank called {other:?}",
                    self.rank
                );
                round.failed = Some(why.clone());
                self.shared.wake.notify_all();
                return Err(self.error(op, why));
            }
            Some(_) => {}
        }
        round.deposits[self.rank] = Some(data);
        round.arrived += 1;
        let generation = round.generation;
        if round.arrived == self.shared.world_size {
            let deposits: Vec<Vec<u32>> =
                round.deposits.iter_mut().filter_map(Option::take).collect();
            round.result = Arc::new(combine(call, deposits));
            round.arrived = 0;
            round.call = None;
            round.generation += 1;
            self.shared.wake.notify_all();
            return Ok(round.result.clone());
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<usize> = (0..self.shared.world_size)
                    .filter(|&r| round.deposits[r].is_none())
                    .collect();
                let why = format!(
                    "timed out after {timeout:?} waiting for ranks {missing:?} to call {call:?}"
                );
                round.failed = Some(why.clone());
                self.shared.wake.notify_all();
                return Err(self.error(op, why));
            }
            round = self
                .shared
                .wake
                .wait_timeout(round, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if round.generation != generation {
                return Ok(round.result.clone());
            }
            if let Some(why) = &round.failed {
                return Err(self.error(op, why.clone()));
            }
        }
    }
}

/// The round's result from every rank's deposit, in rank order.
fn combine(call: Call, deposits: Vec<Vec<u32>>) -> Vec<u32> {
    match call {
        Call::AllReduce(op, _) => {
            let mut iter = deposits.into_iter();
            let mut acc: Vec<f32> = iter
                .next()
                .unwrap_or_default()
                .into_iter()
                .map(f32::from_bits)
                .collect();
            for deposit in iter {
                for (a, b) in acc.iter_mut().zip(deposit) {
                    *a = reduce_pair(op, *a, f32::from_bits(b));
                }
            }
            acc.into_iter().map(f32::to_bits).collect()
        }
        Call::Broadcast(root, _) => deposits.into_iter().nth(root).unwrap_or_default(),
        Call::Barrier => Vec::new(),
    }
}

/// One step of a reduction; `Max` and `Min` propagate NaN (PyTorch's and
/// MPI's `MPI_MAX` on IEEE hardware agree on numbers; NaN is kept here).
fn reduce_pair(op: ReduceOp, a: f32, b: f32) -> f32 {
    match op {
        ReduceOp::Sum | ReduceOp::Mean => a + b,
        ReduceOp::Max if a.is_nan() || b.is_nan() => f32::NAN,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min if a.is_nan() || b.is_nan() => f32::NAN,
        ReduceOp::Min => a.min(b),
    }
}

impl Transport for LocalTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.shared.world_size
    }

    fn all_reduce(&mut self, data: &mut [f32], op: ReduceOp, timeout: Duration) -> Result<()> {
        let bits = data.iter().map(|v| v.to_bits()).collect();
        let result =
            self.rendezvous("all_reduce", Call::AllReduce(op, data.len()), bits, timeout)?;
        for (d, &r) in data.iter_mut().zip(result.iter()) {
            *d = f32::from_bits(r);
        }
        Ok(())
    }

    fn broadcast(&mut self, data: &mut [u32], root: usize, timeout: Duration) -> Result<()> {
        let result = self.rendezvous(
            "broadcast",
            Call::Broadcast(root, data.len()),
            data.to_vec(),
            timeout,
        )?;
        data.copy_from_slice(&result);
        Ok(())
    }

    fn barrier(&mut self, timeout: Duration) -> Result<()> {
        self.rendezvous("barrier", Call::Barrier, Vec::new(), timeout)
            .map(|_| ())
    }

    fn fail(&mut self, message: &str) {
        let mut round = self.shared.lock();
        if round.failed.is_none() {
            round.failed = Some(format!("rank {} failed: {message}", self.rank));
        }
        self.shared.wake.notify_all();
    }
}

impl Drop for LocalTransport {
    /// A rank that leaves the group ends it: the others would otherwise
    /// wait for it until their timeout.
    fn drop(&mut self) {
        let mut round = self.shared.lock();
        if round.failed.is_none() {
            let why = if std::thread::panicking() {
                format!("rank {} panicked and left the group", self.rank)
            } else {
                format!("rank {} left the group", self.rank)
            };
            round.failed = Some(why);
        }
        self.shared.wake.notify_all();
    }
}
