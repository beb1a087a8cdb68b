//! Data-parallel training: one model replicated on every rank, gradients
//! averaged across ranks in buckets.
//!
//! How the all-reduce overlaps the backward pass. After `backward()` the
//! gradients are pending nodes of one graph. Buckets are filled with
//! parameters in reverse order (the last layers' gradients are the first
//! the backward pass produces), and the step is split into one submission
//! per bucket (`Device::realize_in_stages`): submission `k` computes what
//! bucket `k`'s gradients need that earlier ones did not, and copies the
//! bucket into a mapped buffer. The group's collective thread waits for
//! that buffer and all-reduces it while the device runs submission `k+1`,
//! so only the last bucket's all-reduce (and what did not fit behind the
//! device's work) is exposed. [`SyncStats`] measures how much was hidden.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{ProcessGroup, ReduceOp, Reduced};
use crate::error::{Error, Result};
use crate::graph::Node;
use crate::shape::{Layout, numel};
use crate::tune::pinned::KernelChoices;
use crate::{DType, Tensor};

/// The bucket size when none is given: large enough that an all-reduce
/// call's fixed cost is small against its transfer, small enough that a
/// model of a few million parameters has several buckets to overlap.
const DEFAULT_BUCKET_BYTES: usize = 1 << 20;

/// Parameters whose gradients are reduced together.
#[derive(Clone, Debug)]
struct Bucket {
    /// Indices into the wrapper's parameters.
    params: Vec<usize>,
    /// Elements over all of them.
    numel: usize,
}

/// Splits parameters (by element count) into buckets of at most
/// `bucket_bytes` of f32 each, from the last parameter to the first; a
/// parameter larger than that is a bucket of its own.
fn buckets_of(sizes: &[usize], bucket_bytes: usize) -> Vec<Bucket> {
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut current = Bucket {
        params: Vec::new(),
        numel: 0,
    };
    for i in (0..sizes.len()).rev() {
        if !current.params.is_empty() && (current.numel + sizes[i]) * 4 > bucket_bytes {
            let full = Bucket {
                params: Vec::new(),
                numel: 0,
            };
            buckets.push(std::mem::replace(&mut current, full));
        }
        current.params.push(i);
        current.numel += sizes[i];
    }
    if !current.params.is_empty() {
        buckets.push(current);
    }
    buckets
}

/// What one [`DataParallel::sync_gradients`] call did and how long it took.
#[derive(Clone, Debug, Default)]
pub struct SyncStats {
    /// Buckets all-reduced.
    pub buckets: usize,
    /// Bytes of gradients this rank contributed (f32).
    pub bytes: usize,
    /// Wall time of the call: the step's remaining device work, the
    /// readbacks and the all-reduces.
    pub wall: Duration,
    /// Time the collective thread spent in all-reduces (from the later of
    /// a bucket's arrival on the host and the previous bucket's
    /// completion, to its completion).
    pub communication: Duration,
    /// The part of `communication` that ran while the device was still
    /// producing later buckets.
    pub hidden: Duration,
}

impl SyncStats {
    /// `hidden / communication` (0 without communication).
    pub fn hidden_fraction(&self) -> f64 {
        if self.communication.is_zero() {
            0.0
        } else {
            self.hidden.as_secs_f64() / self.communication.as_secs_f64()
        }
    }

    /// Sums two calls' figures (for averages over steps).
    pub fn accumulate(&mut self, other: &SyncStats) {
        self.buckets += other.buckets;
        self.bytes += other.bytes;
        self.wall += other.wall;
        self.communication += other.communication;
        self.hidden += other.hidden;
    }
}

/// Splits the all-reduces' timeline into communication and its hidden
/// part: bucket `k` is reduced from `max(ready_k, done_{k-1})` to
/// `done_k`, and hidden while the device has not yet produced the last
/// bucket (`max ready`).
fn timeline(reduced: &[(Instant, Instant)]) -> (Duration, Duration) {
    let Some(device_done) = reduced.iter().map(|r| r.0).max() else {
        return (Duration::ZERO, Duration::ZERO);
    };
    let (mut communication, mut hidden) = (Duration::ZERO, Duration::ZERO);
    let mut previous_done: Option<Instant> = None;
    for &(ready, done) in reduced {
        let start = previous_done.map_or(ready, |p| p.max(ready));
        communication += done.saturating_duration_since(start);
        hidden += done.min(device_done).saturating_duration_since(start);
        previous_done = Some(done);
    }
    (communication, hidden)
}

/// A model's parameters replicated on every rank of a group, with
/// gradients averaged across ranks (PyTorch's `DistributedDataParallel`).
///
/// Each rank records the same forward and backward on its own shard of
/// the batch ([`DataParallel::shard`]), then calls
/// [`DataParallel::sync_gradients`] before the optimiser step. Every rank
/// then holds the gradient of the mean loss over the global batch (when
/// each rank's loss is the mean over its equal shard), so identical
/// optimisers keep identical parameters.
///
/// Buffers (BatchNorm's running statistics, registered with
/// [`DataParallel::with_buffers`]) are not averaged: as PyTorch's DDP does
/// by default (`broadcast_buffers=True`), rank 0's buffers are copied to
/// every rank at each synchronisation, so evaluation on any rank uses the
/// same statistics. Batch statistics in training stay per rank (there is
/// no `SyncBatchNorm`).
pub struct DataParallel {
    group: ProcessGroup,
    params: Vec<Tensor>,
    buffers: Vec<Tensor>,
    buckets: Vec<Bucket>,
}

impl DataParallel {
    /// Wraps `params` (all on one device, float) and makes them equal on
    /// every rank by broadcasting rank 0's values. Gradients are reduced
    /// in buckets of about 1 MiB.
    #[track_caller]
    pub fn new(group: ProcessGroup, params: Vec<Tensor>) -> Result<DataParallel> {
        DataParallel::with_bucket_bytes(group, params, DEFAULT_BUCKET_BYTES)
    }

    /// [`DataParallel::new`] with buckets of at most `bucket_bytes` of
    /// gradients each (a parameter is never split: a larger one is a
    /// bucket of its own).
    ///
    /// # Panics
    /// If `params` is empty, on several devices, or not all float.
    #[track_caller]
    pub fn with_bucket_bytes(
        group: ProcessGroup,
        params: Vec<Tensor>,
        bucket_bytes: usize,
    ) -> Result<DataParallel> {
        assert!(!params.is_empty(), "DataParallel: no parameters to train");
        let dev = params[0].device().clone();
        for p in &params {
            assert!(
                p.device() == &dev,
                "DataParallel: parameters on several devices ({} and {})",
                dev.name(),
                p.device().name()
            );
            assert!(
                p.dtype().is_float(),
                "DataParallel: a parameter of shape {:?} is {}; parameters must be floats",
                p.shape(),
                p.dtype()
            );
        }
        let sizes: Vec<usize> = params.iter().map(Tensor::numel).collect();
        let buckets = buckets_of(&sizes, bucket_bytes.max(1));
        let ddp = DataParallel {
            group,
            params,
            buffers: Vec::new(),
            buckets,
        };
        ddp.share_kernel_choices()?;
        ddp.broadcast_parameters()?;
        Ok(ddp)
    }

    /// Registers `buffers` (a module's [`named_buffers`](crate::nn::Module::named_buffers)),
    /// copies rank 0's values to every rank now, and again at each
    /// [`DataParallel::sync_gradients`] (builder style).
    pub fn with_buffers(mut self, buffers: Vec<Tensor>) -> Result<DataParallel> {
        self.buffers = buffers;
        self.broadcast_buffers()?;
        Ok(self)
    }

    /// Makes every rank's device generate rank 0's kernel choices: its
    /// matmul kernel, the rule by which reductions pick theirs, and the
    /// kernel of each class of matmul sizes it has tuned, each rebuilt
    /// for the rank's own adapter (`tune::pinned`). Ranks tuning for
    /// themselves could pick other kernels (another machine's timings,
    /// another tuning cache) and round their gradients differently. From
    /// then on no rank tunes a class of matmul sizes (a class met later
    /// generates with the device's matmul kernel on every rank). Where
    /// rank 0's device is the CPU reference, nothing is pinned.
    /// [`DataParallel::new`] calls it.
    fn share_kernel_choices(&self) -> Result<()> {
        if self.world_size() == 1 {
            return Ok(());
        }
        let dev = self.params[0].device();
        let mine = match self.rank() {
            0 => dev.kernel_choices().map(|c| c.text()).unwrap_or_default(),
            _ => String::new(),
        };
        let text = broadcast_text(&self.group, &mine)?;
        if text.is_empty() {
            return Ok(());
        }
        let choices = KernelChoices::parse(&text).ok_or_else(|| Error::Collective {
            op: "broadcast",
            rank: self.rank(),
            message: format!("rank 0's kernel choices did not arrive whole: {text:?}"),
        })?;
        dev.pin_kernel_choices(choices);
        Ok(())
    }

    /// Copies rank 0's buffers to every rank (one broadcast each: they
    /// are small, and of several dtypes).
    pub fn broadcast_buffers(&self) -> Result<()> {
        if self.world_size() == 1 {
            return Ok(());
        }
        for b in &self.buffers {
            self.group.broadcast(b, 0)?;
        }
        Ok(())
    }

    /// The group the wrapper reduces over.
    pub fn group(&self) -> &ProcessGroup {
        &self.group
    }

    /// This rank's index.
    pub fn rank(&self) -> usize {
        self.group.rank()
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.group.world_size()
    }

    /// The parameters, in the order given.
    pub fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    /// The number of gradient elements in each bucket, in the order they
    /// are reduced (the last parameters first).
    pub fn bucket_sizes(&self) -> Vec<usize> {
        self.buckets.iter().map(|b| b.numel).collect()
    }

    /// This rank's part of `len` items (rows of a global batch): ranks
    /// take consecutive equal parts, the first `len % world_size` ranks
    /// one item more.
    pub fn shard(&self, len: usize) -> Range<usize> {
        shard(len, self.rank(), self.world_size())
    }

    /// Copies rank 0's parameters to every rank (one broadcast of all of
    /// them). [`DataParallel::new`] calls it; call it again after loading
    /// a checkpoint on rank 0 only.
    pub fn broadcast_parameters(&self) -> Result<()> {
        if self.world_size() == 1 {
            return Ok(());
        }
        let flat_parts: Vec<Tensor> = self
            .params
            .iter()
            .map(|p| p.detach().float().flatten())
            .collect();
        let flat = Tensor::cat(&flat_parts.iter().collect::<Vec<_>>(), 0);
        self.group.broadcast(&flat, 0)?;
        if self.rank() != 0 {
            let mut offset = 0;
            for p in &self.params {
                let n = p.numel();
                let value = flat.narrow(0, offset, n).reshape(p.shape().to_vec());
                crate::no_grad(|| p.copy_(&value));
                offset += n;
            }
        }
        Ok(())
    }

    /// Replaces every parameter's gradient by its mean over the ranks
    /// (a parameter without a gradient counts as zeros and gets the mean
    /// too). Runs the rest of this step's pending work on the device, one
    /// submission per bucket, overlapping each bucket's all-reduce with the
    /// work after it; returns once every bucket is reduced and its mean is
    /// queued for upload. Then rank 0's buffers are copied to every rank.
    pub fn sync_gradients(&mut self) -> Result<SyncStats> {
        let start = Instant::now();
        let dev = self.params[0].device().clone();
        let grads: Vec<Tensor> = self
            .params
            .iter()
            .map(|p| {
                p.grad()
                    .unwrap_or_else(|| Tensor::zeros_dtype(p.shape().to_vec(), p.dtype(), &dev))
            })
            .collect();
        // Stage k computes bucket k's gradients and reads them back in one
        // copy. A gradient that is a view (a weight's gradient is often
        // the transpose of a product) is read through its base, the value
        // a step stores anyway, and its window gathered on the host:
        // stored views would be copies of their own. (A concatenation of
        // the gradients, read back instead, would fuse a whole bucket's
        // elementwise work into one kernel.) A gradient that is not f32 is
        // read through an f32 copy.
        let mut windows: Vec<Vec<Window>> = Vec::with_capacity(self.buckets.len());
        let mut stages: Vec<Vec<Arc<Node>>> = Vec::with_capacity(self.buckets.len());
        for bucket in &self.buckets {
            let (mut reads, mut parts) = (Vec::new(), Vec::new());
            for &i in &bucket.params {
                let g = grads[i].float();
                let base = g.h.base_window().filter(|(b, _)| b.dtype == DType::F32);
                let (node, layout) = match base {
                    Some((base, layout)) => (base, Some(layout)),
                    None => (g.node(), None),
                };
                parts.push(Window {
                    read_len: numel(&node.shape),
                    shape: g.shape().to_vec(),
                    layout,
                });
                reads.push(node);
            }
            windows.push(parts);
            stages.push(reads);
        }
        let replaced: Vec<Arc<Node>> = grads
            .iter()
            .map(Tensor::node)
            .chain(stages.iter().flatten().cloned())
            .collect();
        let mut pending = Vec::with_capacity(stages.len());
        dev.realize_in_stages(&stages, &replaced, |read| {
            pending.push(self.group.all_reduce_later(read, ReduceOp::Mean));
        })?;
        drop((stages, replaced));
        let mut timeline_points = Vec::with_capacity(pending.len());
        for ((bucket, parts), done) in self.buckets.iter().zip(&windows).zip(pending) {
            let Reduced { data, ready, done } = self.group.wait(done)?;
            timeline_points.push((ready, done));
            // One upload per gradient: each is a stored value of its own,
            // as after a plain backward step.
            for (&i, values) in bucket.params.iter().zip(gather_windows(&data, parts)) {
                let p = &self.params[i];
                let mut g = Tensor::from_vec(values, p.shape().to_vec(), &dev)?;
                if grads[i].dtype() != DType::F32 {
                    g = g.cast(grads[i].dtype());
                }
                p.set_grad(Some(g));
            }
        }
        let (communication, hidden) = timeline(&timeline_points);
        self.broadcast_buffers()?;
        Ok(SyncStats {
            buckets: self.buckets.len(),
            bytes: self.buckets.iter().map(|b| b.numel * 4).sum(),
            wall: start.elapsed(),
            communication,
            hidden,
        })
    }
}

/// How one gradient was read back: `read_len` elements of the value read
/// (its base, or itself), and the window of them that is the gradient.
struct Window {
    read_len: usize,
    shape: Vec<usize>,
    /// `None`: the value read is the gradient, row-major.
    layout: Option<Layout>,
}

/// Each gradient's row-major elements, from the values read back one
/// after another.
fn gather_windows(data: &[f32], parts: &[Window]) -> Vec<Vec<f32>> {
    let mut grads = Vec::with_capacity(parts.len());
    let mut start = 0;
    for w in parts {
        let read = &data[start..start + w.read_len];
        match &w.layout {
            None => grads.push(read.to_vec()),
            Some(layout) => {
                let mut out = Vec::with_capacity(numel(&w.shape));
                // Walk the window's indices in row-major order.
                let mut index = vec![0usize; w.shape.len()];
                for _ in 0..numel(&w.shape) {
                    let at: usize = layout.offset
                        + index
                            .iter()
                            .zip(&layout.strides)
                            .map(|(i, s)| i * s)
                            .sum::<usize>();
                    out.push(read[at]);
                    for d in (0..index.len()).rev() {
                        index[d] += 1;
                        if index[d] < w.shape[d] {
                            break;
                        }
                        index[d] = 0;
                    }
                }
                grads.push(out);
            }
        }
        start += w.read_len;
    }
    grads
}

/// Rank `rank`'s part of `len` items split over `world` ranks.
fn shard(len: usize, rank: usize, world: usize) -> Range<usize> {
    let (base, extra) = (len / world, len % world);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

/// Rank 0's `text` on every rank (the others pass their own, ignored):
/// its length, then its bytes, a word each.
fn broadcast_text(group: &ProcessGroup, text: &str) -> Result<String> {
    let root = group.rank() == 0;
    let len = group.broadcast_words(vec![text.len() as u32], 0)?[0] as usize;
    let bytes: Vec<u32> = match root {
        true => text.bytes().map(u32::from).collect(),
        false => vec![0; len],
    };
    let bytes = group.broadcast_words(bytes, 0)?;
    String::from_utf8(bytes.iter().map(|&b| b as u8).collect()).map_err(|e| Error::Collective {
        op: "broadcast",
        rank: group.rank(),
        message: format!("rank 0's text is not UTF-8: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fill_from_the_last_parameter_and_never_split_one() {
        // 1000 bytes hold 250 f32 elements.
        let buckets = buckets_of(&[100, 300, 50, 50, 10], 1000);
        let params: Vec<Vec<usize>> = buckets.iter().map(|b| b.params.clone()).collect();
        assert_eq!(params, vec![vec![4, 3, 2], vec![1], vec![0]]);
        assert_eq!(buckets[0].numel, 110);
        assert_eq!(buckets_of(&[5], 1 << 20).len(), 1);
    }

    #[test]
    fn windows_gather_a_transpose_and_a_slice_from_their_bases() {
        // A 2x3 base read as its 3x2 transpose, then a plain 2-vector, then
        // elements 1..3 of a 4-vector.
        let data = [
            0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0,
        ];
        let parts = [
            Window {
                read_len: 6,
                shape: vec![3, 2],
                layout: Some(Layout {
                    strides: vec![1, 3],
                    offset: 0,
                }),
            },
            Window {
                read_len: 2,
                shape: vec![2],
                layout: None,
            },
            Window {
                read_len: 4,
                shape: vec![2],
                layout: Some(Layout {
                    strides: vec![1],
                    offset: 1,
                }),
            },
        ];
        assert_eq!(
            gather_windows(&data, &parts),
            vec![
                vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0],
                vec![10.0, 11.0],
                vec![21.0, 22.0]
            ]
        );
    }

    #[test]
    fn shards_cover_the_batch_once_in_rank_order() {
        for len in [0, 1, 7, 64, 65] {
            for world in 1..5 {
                let mut next = 0;
                for rank in 0..world {
                    let r = shard(len, rank, world);
                    assert_eq!(r.start, next);
                    assert!(r.len() == len / world || r.len() == len / world + 1);
                    next = r.end;
                }
                assert_eq!(next, len);
            }
        }
    }

    #[test]
    fn hidden_time_is_what_ran_before_the_device_finished() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        // Bucket 0 arrives at 0 and reduces until 10; bucket 1 arrives at 5
        // (the device's last), waits for bucket 0, reduces until 20.
        let (communication, hidden) = timeline(&[(ms(0), ms(10)), (ms(5), ms(20))]);
        assert_eq!(communication, Duration::from_millis(20));
        assert_eq!(hidden, Duration::from_millis(5));
    }
}
