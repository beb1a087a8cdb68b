//! `DataLoader`: mini-batches of a [`Dataset`] assembled and uploaded on a
//! background thread, a bounded number ahead of the training step, so the
//! next batch is on the device when the step asks for it.
//!
//! The thread only reads examples and uploads them (`Tensor::from_vec`,
//! which writes a buffer and records nothing lazy). Augmentation
//! ([`super::augment`]) records lazy ops, so the caller applies it on its
//! own thread, where `mark_step` cuts the trace it belongs to.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::dataset::{Dataset, Example};
use super::sampler::shuffled_batches;
use crate::error::{Error, Result};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// The device timer with the time the caller blocked waiting for each batch.
pub const WAIT_TIMER: &str = "data_wait";
/// The device timer with the time the loader's thread took to assemble and
/// upload each batch.
pub const LOAD_TIMER: &str = "data_load";

/// A batch as the loader yields it: images `[B, ...shape]` (`[B, C, H, W]`
/// for images) as `f32`, labels `[B]` as `i32`.
pub type Batch = (Tensor, Tensor);

/// How long batches took to load and how long the caller waited for them,
/// summed over every epoch of one [`DataLoader`] (see
/// [`DataLoader::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoaderStats {
    /// Batches the caller received.
    pub batches: u64,
    /// Time the caller spent blocked in `next()`.
    pub wait: Duration,
    /// Time the loader's thread spent reading examples, assembling and
    /// uploading batches.
    pub load: Duration,
}

impl LoaderStats {
    /// The share of the loading time the caller did not wait for (it ran
    /// while the caller worked): `1 - wait / load`, at least 0; `None`
    /// before any batch loaded.
    pub fn hidden_fraction(&self) -> Option<f64> {
        let load = self.load.as_secs_f64();
        (load > 0.0).then(|| (1.0 - self.wait.as_secs_f64() / load).max(0.0))
    }
}

/// The counters behind [`LoaderStats`], shared with the loading threads.
#[derive(Debug, Default)]
struct StatsCell {
    batches: AtomicU64,
    wait_ns: AtomicU64,
    load_ns: AtomicU64,
}

impl StatsCell {
    fn add(counter: &AtomicU64, elapsed: Duration) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        counter.fetch_add(ns, Ordering::Relaxed);
    }

    fn snapshot(&self) -> LoaderStats {
        LoaderStats {
            batches: self.batches.load(Ordering::Relaxed),
            wait: Duration::from_nanos(self.wait_ns.load(Ordering::Relaxed)),
            load: Duration::from_nanos(self.load_ns.load(Ordering::Relaxed)),
        }
    }

    fn reset(&self) {
        for c in [&self.batches, &self.wait_ns, &self.load_ns] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// Mini-batches of a [`Dataset`], like PyTorch's `DataLoader` with one
/// worker and `pin_memory`: each epoch's batches are read, assembled and
/// uploaded to the device on a background thread, up to
/// [`prefetch`](DataLoader::prefetch) batches ahead of the caller.
///
/// The order of an epoch is [`shuffled_batches`]'s for the seed given to
/// [`shuffle`](DataLoader::shuffle) (so a Python script can reproduce
/// it), or `0..len` in order without one. Examples of bytes are scaled to
/// `[0, 1]`; normalise them on the device with
/// [`augment::Normalize`](super::augment::Normalize).
///
/// Timing: [`DataLoader::stats`] sums the time the caller waited for
/// batches and the time the thread took to load them; the device's
/// metrics keep the same per batch as the timers `data_wait`
/// ([`WAIT_TIMER`]) and `data_load` ([`LOAD_TIMER`]). A wait much smaller
/// than the load means the loading was hidden behind the steps.
///
/// ```
/// use lazywgpu::data::{DataLoader, Dataset, Example};
/// use lazywgpu::Device;
/// # fn main() -> lazywgpu::Result<()> {
/// struct Ramp;
/// impl Dataset for Ramp {
///     fn len(&self) -> usize { 10 }
///     fn get(&self, i: usize) -> lazywgpu::Result<Example> {
///         Ok(Example::u8(vec![i as u8; 4], [1, 2, 2], i as i32 % 3))
///     }
/// }
///
/// let dev = Device::cpu();
/// let loader = DataLoader::new(Ramp, 4, &dev).shuffle(7).drop_last(true);
/// assert_eq!(loader.len(), 2);
/// for epoch in 0..2 {
///     for batch in loader.epoch(epoch) {
///         let (images, labels) = batch?;
///         assert_eq!(images.shape(), &[4, 1, 2, 2]);
///         assert_eq!(labels.shape(), &[4]);
///     }
/// }
/// assert_eq!(loader.stats().batches, 4);
/// # Ok(()) }
/// ```
pub struct DataLoader {
    dataset: Arc<dyn Dataset>,
    device: Device,
    batch_size: usize,
    seed: Option<u64>,
    drop_last: bool,
    prefetch: usize,
    stats: Arc<StatsCell>,
}

impl DataLoader {
    /// A loader of `dataset` in batches of `batch_size` onto `device`: in
    /// order, the last batch shorter, two batches prefetched.
    ///
    /// Panics if `batch_size` is 0.
    #[track_caller]
    pub fn new(dataset: impl Dataset + 'static, batch_size: usize, device: &Device) -> DataLoader {
        assert!(
            batch_size > 0,
            "DataLoader::new: batch_size must be positive"
        );
        DataLoader {
            dataset: Arc::new(dataset),
            device: device.clone(),
            batch_size,
            seed: None,
            drop_last: false,
            prefetch: 2,
            stats: Arc::default(),
        }
    }

    /// Shuffles each epoch: epoch `e`'s batches are
    /// `shuffled_batches(len, batch_size, seed, e, drop_last)`.
    pub fn shuffle(mut self, seed: u64) -> DataLoader {
        self.seed = Some(seed);
        self
    }

    /// Whether to drop the last batch of an epoch when it is shorter than
    /// `batch_size` (PyTorch's `drop_last`).
    pub fn drop_last(mut self, drop_last: bool) -> DataLoader {
        self.drop_last = drop_last;
        self
    }

    /// How many batches the thread may have ready ahead of the caller
    /// (default 2). More hides slower, uneven loading at the cost of
    /// device memory for the waiting batches.
    ///
    /// Panics if `batches` is 0.
    #[track_caller]
    pub fn prefetch(mut self, batches: usize) -> DataLoader {
        assert!(
            batches > 0,
            "DataLoader::prefetch: at least one batch must be prefetched"
        );
        self.prefetch = batches;
        self
    }

    /// Batches per epoch.
    pub fn len(&self) -> usize {
        let n = self.dataset.len();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// Whether an epoch has no batches.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dataset's indices in each batch of `epoch`, in order.
    pub fn batch_indices(&self, epoch: u64) -> Vec<Vec<usize>> {
        let n = self.dataset.len();
        match self.seed {
            Some(seed) => shuffled_batches(n, self.batch_size, seed, epoch, self.drop_last),
            None => in_order(n, self.batch_size, self.drop_last),
        }
    }

    /// The batches of `epoch`, loaded on a thread started now. Dropping
    /// the iterator before the end stops the thread (after the example
    /// it is reading) and waits for it.
    pub fn epoch(&self, epoch: u64) -> Batches {
        let order = self.batch_indices(epoch);
        let total = order.len();
        // The thread holds the batch it is sending besides those queued:
        // a channel of `prefetch - 1` keeps `prefetch` ready, not one more
        // (each a batch's device memory).
        let (tx, rx) = sync_channel(self.prefetch - 1);
        let stop = Arc::new(AtomicBool::new(false));
        let job = Job {
            dataset: self.dataset.clone(),
            device: self.device.clone(),
            order,
            stop: stop.clone(),
            stats: self.stats.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("lazywgpu-data-loader".into())
            .spawn(move || job.run(tx));
        let (rx, thread, failed) = match thread {
            Ok(handle) => (Some(rx), Some(handle), None),
            Err(e) => (
                None,
                None,
                Some(Error::Data {
                    op: "DataLoader",
                    message: format!("could not start the loading thread: {e}"),
                }),
            ),
        };
        Batches {
            rx,
            thread,
            stop,
            failed,
            remaining: total,
            received: 0,
            device: self.device.clone(),
            stats: self.stats.clone(),
        }
    }

    /// Wait and load times summed over every epoch so far.
    pub fn stats(&self) -> LoaderStats {
        self.stats.snapshot()
    }

    /// Zeroes [`DataLoader::stats`] (not the device's timers).
    pub fn reset_stats(&self) {
        self.stats.reset();
    }
}

/// `0..n` cut into batches of `batch_size`.
fn in_order(n: usize, batch_size: usize, drop_last: bool) -> Vec<Vec<usize>> {
    (0..n)
        .collect::<Vec<_>>()
        .chunks(batch_size)
        .filter(|c| !drop_last || c.len() == batch_size)
        .map(<[usize]>::to_vec)
        .collect()
}

/// What the loading thread of one epoch owns.
struct Job {
    dataset: Arc<dyn Dataset>,
    device: Device,
    order: Vec<Vec<usize>>,
    stop: Arc<AtomicBool>,
    stats: Arc<StatsCell>,
}

impl Job {
    /// Loads the batches in order until all are sent, one fails (the
    /// error is sent, then the thread ends), or the receiver is gone.
    fn run(self, tx: SyncSender<Result<Batch>>) {
        for indices in &self.order {
            let start = Instant::now();
            // A panicking dataset must reach the caller as an error, not
            // as a channel that closes without a word.
            let loaded = catch_unwind(AssertUnwindSafe(|| self.load(indices)))
                .unwrap_or_else(|payload| Err(panic_error(payload.as_ref())));
            let loaded = match loaded.transpose() {
                Some(loaded) => loaded,
                None => return, // stopped mid-batch
            };
            let elapsed = start.elapsed();
            StatsCell::add(&self.stats.load_ns, elapsed);
            self.device.record_timer(LOAD_TIMER, elapsed);
            let failed = loaded.is_err();
            if tx.send(loaded).is_err() || failed {
                return;
            }
        }
    }

    /// The batch of `indices`, uploaded; `None` when asked to stop.
    fn load(&self, indices: &[usize]) -> Result<Option<Batch>> {
        let mut examples = Vec::with_capacity(indices.len());
        for &i in indices {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let example = self.dataset.get(i)?;
            example.check(i)?;
            examples.push((i, example));
        }
        assemble(&examples, &self.device).map(Some)
    }
}

/// Stacks examples (all of one shape) into an `f32` image tensor and an
/// `i32` label tensor on `device`.
fn assemble(examples: &[(usize, Example)], device: &Device) -> Result<Batch> {
    let Some((first, head)) = examples.first() else {
        return Err(Error::Data {
            op: "DataLoader",
            message: "an empty batch".into(),
        });
    };
    let per: usize = head.shape.iter().product();
    let mut pixels = Vec::with_capacity(per * examples.len());
    let mut labels = Vec::with_capacity(examples.len());
    for (i, example) in examples {
        if example.shape != head.shape {
            return Err(Error::Data {
                op: "DataLoader",
                message: format!(
                    "example {i} has shape {:?}, example {first} of the same batch {:?}",
                    example.shape, head.shape
                ),
            });
        }
        example.pixels.extend_f32(&mut pixels);
        labels.push(example.label);
    }
    let mut shape = vec![examples.len()];
    shape.extend_from_slice(&head.shape);
    Ok((
        Tensor::from_vec(pixels, shape, device)?,
        Tensor::from_vec(labels, [examples.len()], device)?,
    ))
}

/// The error a panic of the loading thread becomes, with its message.
fn panic_error(payload: &(dyn std::any::Any + Send)) -> Error {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    Error::Data {
        op: "DataLoader",
        message: format!("the loading thread panicked: {message}"),
    }
}

/// The batches of one epoch (see [`DataLoader::epoch`]): each item is a
/// batch already on the device, or the error that ended the epoch (after
/// which the iterator ends).
pub struct Batches {
    rx: Option<Receiver<Result<Batch>>>,
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// An error to yield before anything else (the thread did not start).
    failed: Option<Error>,
    remaining: usize,
    received: usize,
    device: Device,
    stats: Arc<StatsCell>,
}

impl Batches {
    /// Why the channel closed before the last batch: the thread's panic
    /// (if it escaped `catch_unwind`) or an early end.
    fn ended_early(&mut self) -> Error {
        let panicked = self.thread.take().map(JoinHandle::join);
        match panicked {
            Some(Err(payload)) => panic_error(payload.as_ref()),
            _ => Error::Data {
                op: "DataLoader",
                message: format!(
                    "the loading thread ended after {} of {} batches",
                    self.received,
                    self.received + self.remaining
                ),
            },
        }
    }

    /// Ends the iteration: nothing more is yielded.
    fn finish(&mut self) {
        self.remaining = 0;
    }
}

impl Iterator for Batches {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if let Some(e) = self.failed.take() {
            self.finish();
            return Some(Err(e));
        }
        if self.remaining == 0 {
            return None;
        }
        let rx = self.rx.as_ref()?;
        let start = Instant::now();
        let got = rx.recv();
        let waited = start.elapsed();
        StatsCell::add(&self.stats.wait_ns, waited);
        self.device.record_timer(WAIT_TIMER, waited);
        let item = match got {
            Ok(Ok(batch)) => {
                self.remaining -= 1;
                self.received += 1;
                self.stats.batches.fetch_add(1, Ordering::Relaxed);
                return Some(Ok(batch));
            }
            Ok(Err(e)) => e,
            Err(_) => self.ended_early(),
        };
        self.finish();
        Some(Err(item))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let errors = usize::from(self.failed.is_some());
        (0, Some(self.remaining + errors))
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Closing the channel first wakes a thread blocked on a full queue.
        drop(self.rx.take());
        if let Some(thread) = self.thread.take() {
            // A panic here was already reported, or nobody is listening.
            let _ = thread.join();
        }
    }
}
