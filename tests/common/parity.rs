//! Data-parallel parity: the same 20 SGD steps trained by one process on
//! a global batch, and by each rank of a group on its shard of it. Used by
//! the in-process tests (`tests/distributed.rs`) and the MPI ones
//! (`tests/distributed_mpi.rs`).

use lazywgpu::data::{CharDataset, Mnist, Split, SplitMix64};
use lazywgpu::distributed::{DataParallel, ProcessGroup, SyncStats};
use lazywgpu::nn::{self, Gpt, GptConfig, Module, Parameters};
use lazywgpu::optim::{Optimizer, Sgd};
use lazywgpu::{Device, Tensor};

/// SGD steps per run.
pub const STEPS: usize = 20;

/// The models the parity is shown for.
#[derive(Clone, Copy, Debug)]
pub enum Model {
    /// The 784-128-10 MNIST MLP, global batch 64, SGD with momentum.
    Mlp,
    /// A two-layer GPT on Shakespeare, global batch 64 of 16 tokens, SGD
    /// with momentum at 0.05 (at 0.1 the run turns unstable near step 13,
    /// and any two summation orders part ways there).
    Gpt,
}

impl Model {
    /// The global batch (each of two ranks trains on half).
    pub fn global_batch(self) -> usize {
        match self {
            Model::Mlp => 64,
            Model::Gpt => 64,
        }
    }
}

const GPT_BLOCK: usize = 16;

fn gpt_config(vocab_size: usize) -> GptConfig {
    GptConfig {
        vocab_size,
        block_size: GPT_BLOCK,
        n_layer: 2,
        n_head: 2,
        n_embd: 32,
    }
}

fn shakespeare() -> CharDataset {
    CharDataset::from_file(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/data/shakespeare-char/input.txt.gz"),
    )
    .expect("the Shakespeare text in examples/data")
}

/// What a run ends with.
pub struct Trained {
    /// Every parameter's final values, in the model's order.
    pub params: Vec<Vec<f32>>,
    /// The sums of every step's [`SyncStats`] (data-parallel runs).
    pub sync: SyncStats,
    /// The gradient elements of each bucket (data-parallel runs).
    pub buckets: Vec<usize>,
    /// The wrapper, with its group (data-parallel runs).
    pub ddp: Option<DataParallel>,
}

/// Trains `model` for [`STEPS`] steps on `dev`: alone on the global batch
/// (`group` `None`), or as one rank of `group` on its shard. The model is
/// initialised from seed 0 alone or on rank 0, and from another seed on
/// other ranks (the wrapper must broadcast rank 0's values).
pub fn train(model: Model, dev: &Device, group: Option<ProcessGroup>) -> Trained {
    let rank = group.as_ref().map_or(0, ProcessGroup::rank);
    dev.manual_seed(if rank == 0 { 0 } else { 100 + rank as u64 });
    match model {
        Model::Mlp => {
            let mlp = super::mnist_mlp(dev);
            let mnist = super::mnist();
            run(
                mlp.params(),
                dev,
                group,
                (Model::Mlp.global_batch(), 0.05),
                |rows, step| {
                    let start = step * Model::Mlp.global_batch() + rows.start;
                    let (x, y) = Mnist::batch(
                        &mnist.train_images,
                        &mnist.train_labels,
                        start,
                        rows.len(),
                        dev,
                    )
                    .unwrap();
                    nn::functional::cross_entropy(&mlp.forward(&x), &y)
                },
            )
        }
        Model::Gpt => {
            let data = shakespeare();
            let gpt = Gpt::new(gpt_config(data.vocab_size()), dev);
            let mut rng = SplitMix64::new(1337);
            run(
                gpt.params(),
                dev,
                group,
                (Model::Gpt.global_batch(), 0.02),
                |rows, _| {
                    // Every rank draws the whole global batch's offsets (the
                    // same stream) and keeps its shard.
                    let offsets =
                        data.offsets(Split::Train, &mut rng, Model::Gpt.global_batch(), GPT_BLOCK);
                    let (x, y) = data
                        .batch(Split::Train, &offsets[rows], GPT_BLOCK, dev)
                        .unwrap();
                    gpt.loss(&x, &y)
                },
            )
        }
    }
}

/// The training loop shared by both models: `loss(rows, step)` records the
/// loss of this rank's rows of step `step`'s global batch of `global`.
fn run(
    params: Vec<Tensor>,
    dev: &Device,
    group: Option<ProcessGroup>,
    (global, lr): (usize, f32),
    mut loss: impl FnMut(std::ops::Range<usize>, usize) -> Tensor,
) -> Trained {
    // Small buckets, so that the MLP's gradients make two and the overlap
    // path is exercised.
    let mut ddp =
        group.map(|g| DataParallel::with_bucket_bytes(g, params.clone(), 64 << 10).unwrap());
    let mut opt = Sgd::new(params.clone(), lr).momentum(0.9);
    let mut sync = SyncStats::default();
    for step in 0..STEPS {
        let rows = ddp.as_ref().map_or(0..global, |d| d.shard(global));
        loss(rows, step).backward();
        if let Some(d) = &mut ddp {
            sync.accumulate(&d.sync_gradients().unwrap());
        }
        opt.step();
        opt.zero_grad();
        dev.mark_step().unwrap();
    }
    Trained {
        params: params.iter().map(|p| p.to_vec::<f32>().unwrap()).collect(),
        sync,
        buckets: ddp.as_ref().map_or(Vec::new(), DataParallel::bucket_sizes),
        ddp,
    }
}

/// Every rank's parameters against the single process's, within the
/// tolerance of f32 sums taken in another order: the rank's gradient mean
/// is `(sum_a / 32 + sum_b / 32) / 2` where the single process takes
/// `sum_ab / 64`, a difference of a few ulps that 20 steps of SGD with
/// momentum carry. Measured per parameter tensor as `|got - want| /
/// |want|` (Euclidean norms), so that elements near zero are held to the
/// tensor's scale rather than their own: at most 1.4e-7 was measured for
/// both models (on lavapipe and the CPU reference); the bound is 1e-5,
/// where a gradient off by a factor (a sum for a mean) gives > 1e-2.
pub fn assert_parity(model: Model, single: &Trained, ranks: &[Trained]) {
    let mut worst = 0.0f64;
    for (rank, trained) in ranks.iter().enumerate() {
        for (i, (got, want)) in trained.params.iter().zip(&single.params).enumerate() {
            let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
            let diff = norm(&mut got.iter().zip(want).map(|(a, b)| (a - b) as f64));
            let scale = norm(&mut want.iter().map(|&b| b as f64));
            worst = worst.max(diff / scale);
            assert!(
                diff <= 1e-5 * scale,
                "{model:?} parameter {i} on rank {rank}: |got - want| = {diff:e}, |want| = {scale:e}"
            );
        }
    }
    eprintln!("{model:?}: largest |got - want| / |want| over the parameters: {worst:.2e}");
}
