//! MNIST in the shape of PyTorch's lazy-tensor MNIST tutorial: forward,
//! backward and the optimiser step are traced into one graph per batch,
//! `mark_step()` runs it, and the loop compiles a handful of graphs once.
//!
//! ```sh
//! cargo run --release --example mnist                   # CNN, 8,000/2,000 digits shipped in examples/data
//! cargo run --release --example mnist -- --model mlp    # 784-128-10 MLP
//! cargo run --release --example mnist -- --data ~/mnist # the full 60,000/10,000 files (gzipped or not)
//! LAZYWGPU_DEVICE=cpu cargo run --release --example mnist   # the CPU reference backend
//! cargo build --release --features mpi --example mnist &&
//!   mpirun -np 2 --bind-to none target/release/examples/mnist --model mlp --data-parallel  # two ranks
//! ```
//!
//! `--help` lists the options. The loss curve goes to
//! `target/lazywgpu-out/mnist-loss.svg` (or `--out DIR`, or `--plot FILE`).

#[path = "support/cli.rs"]
mod cli;
#[path = "support/mnist_cnn.rs"]
mod mnist_cnn;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/ranks.rs"]
mod ranks;

use cli::{DataParallelArgs, DeviceArg, OutDir, Precision, at_least_one};
use mnist_cnn::cnn;
use plot::{Curve, line_chart};

use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use lazywgpu::amp::{AutocastGuard, GradScaler};
use lazywgpu::data::{Mnist, shuffled_batches};
use lazywgpu::distributed::{DataParallel, SyncStats};
use lazywgpu::nn::{self, Module, functional as F};
use lazywgpu::optim::{Adadelta, Optimizer, StepLr};
use lazywgpu::{DType, Device, Tensor, no_grad};
use plotters::style::BLUE;

/// The network trained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Model {
    /// PyTorch's MNIST example CNN (two convolutions, max-pool, dropout,
    /// two linear layers)
    Cnn,
    /// 784-128-10 with ReLU
    Mlp,
}

/// MNIST as PyTorch's lazy-tensor tutorial trains it: forward, backward
/// and the optimiser's step traced into one graph per batch, run by
/// `mark_step()`; test accuracy per epoch, the metrics report and a loss
/// curve.
#[derive(Parser, Debug)]
#[command(after_help = "Examples:
  cargo run --release --example mnist                      # CNN on the shipped digits
  cargo run --release --example mnist -- --model mlp       # 784-128-10 MLP
  cargo run --release --example mnist -- --data ~/mnist    # the full 60,000/10,000 files
  cargo run --release --example mnist -- --device cpu      # the CPU reference backend
  cargo build --release --features mpi --example mnist &&
    mpirun -np 2 --bind-to none target/release/examples/mnist --model mlp --data-parallel")]
struct Args {
    /// The network
    #[arg(long, value_enum, default_value_t = Model::Cnn)]
    model: Model,
    /// Epochs [default: 1 for the CNN, 3 for the MLP]
    #[arg(long, value_name = "N", value_parser = at_least_one())]
    epochs: Option<usize>,
    /// Digits per batch (per rank with --data-parallel)
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = at_least_one())]
    batch_size: usize,
    /// Adadelta's learning rate
    #[arg(long, default_value_t = 1.0)]
    lr: f32,
    /// StepLR's factor per epoch
    #[arg(long, default_value_t = 0.7)]
    gamma: f32,
    /// Batches between loss reads (each read waits for the device)
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = at_least_one())]
    log_interval: usize,
    /// Directory of MNIST's IDX files, gzipped or not (the full
    /// 60,000/10,000 files work) [default: the 8,000/2,000 digits in
    /// examples/data/mnist-10k]
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Seed of the initial weights, dropout and the batch order
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Batches per epoch at most, for a quick look [default: all]
    #[arg(long, value_name = "N")]
    max_batches: Option<usize>,
    /// The loss curve, SVG [default: mnist-loss.svg in the output
    /// directory]
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Save the trained parameters (safetensors)
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Batches in file order instead of a new seeded order each epoch
    /// (the tutorial's shuffle=True)
    #[arg(long)]
    no_shuffle: bool,
    /// Train on the first N training digits only
    #[arg(long, value_name = "N")]
    train_size: Option<usize>,
    /// Train on the last, shorter batch too (PyTorch's drop_last=False; a
    /// new batch size compiles another graph)
    #[arg(long)]
    keep_last: bool,
    /// Mixed precision: the forward pass under autocast to this dtype on
    /// f32 weights (f16 with dynamic loss scaling)
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    dtype: Precision,
    /// Print where the training step's peak device memory goes: the
    /// buffers live at it, largest first, with the source line of each
    #[arg(long)]
    memory_report: bool,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutDir,
    #[command(flatten)]
    parallel: DataParallelArgs,
}

impl Model {
    fn name(self) -> &'static str {
        match self {
            Model::Cnn => "cnn",
            Model::Mlp => "mlp",
        }
    }
}

impl Args {
    fn epochs(&self) -> usize {
        // One epoch of the CNN (95 % on the shipped digits) takes one to
        // three minutes on a 2-core machine with lavapipe; the MLP is much
        // faster.
        self.epochs.unwrap_or(match self.model {
            Model::Cnn => 1,
            Model::Mlp => 3,
        })
    }

    fn data_dir(&self) -> PathBuf {
        self.data.clone().unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/mnist-10k")
        })
    }
}

/// 784-128-10 with ReLU.
fn mlp(dev: &Device) -> nn::Sequential {
    nn::Sequential::new()
        .add(nn::Flatten)
        .add(nn::Linear::new(784, 128, dev))
        .add(nn::ReLU)
        .add(nn::Linear::new(128, 10, dev))
}

/// Test images per evaluation batch, as the tutorial's test loader (the
/// CNN's second activation of 1,000 images, 147 MB, is past the 128 MiB
/// storage-binding limit of lavapipe and many GPUs: kernels bind it in
/// parts).
const EVAL_BATCH: usize = 1000;

/// The model's output, the forward pass under autocast to `dtype` if set.
fn forward(model: &dyn Module, x: &Tensor, dtype: Option<DType>) -> Tensor {
    let _amp = AutocastGuard::new(dtype);
    model.forward(x)
}

/// Test loss and accuracy, in batches of [`EVAL_BATCH`].
fn evaluate(
    model: &dyn Module,
    data: &Mnist,
    dtype: Option<DType>,
    dev: &Device,
) -> lazywgpu::Result<(f64, f64)> {
    model.set_training(false);
    let n = data.test_labels.shape[0];
    let (mut loss_sum, mut correct) = (0.0f64, 0i64);
    let mut start = 0;
    while start < n {
        let len = EVAL_BATCH.min(n - start);
        let (x, y) = Mnist::batch(&data.test_images, &data.test_labels, start, len, dev)?;
        let (loss, hits) = no_grad(|| {
            let logp = forward(model, &x, dtype).log_softmax(1);
            let loss = F::nll_loss(&logp, &y) * len as f32;
            let hits = logp
                .argmax(1, false)
                .eq(&y)
                .cast(lazywgpu::DType::I32)
                .sum_all();
            (loss, hits)
        });
        loss_sum += loss.item::<f32>()? as f64;
        correct += hits.item::<i32>()? as i64;
        start += len;
    }
    model.set_training(true);
    Ok((loss_sum / n as f64, correct as f64 / n as f64))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Args = cli::parse();
    let data_dir = args.data_dir();
    let data = Mnist::load(&data_dir)?;
    let dev = args.device.open()?;
    dev.manual_seed(args.seed);
    let (group, rank, ranks) = args.parallel.join()?;
    let (epochs, dtype) = (args.epochs(), args.dtype.autocast());
    if rank == 0 {
        println!(
            "lazywgpu MNIST: {} model on {}, {} train / {} test digits from {}",
            args.model.name(),
            dev.name(),
            data.train_labels.shape[0],
            data.test_labels.shape[0],
            data_dir.display()
        );
    }
    let model = match args.model {
        Model::Cnn => cnn(&dev),
        Model::Mlp => mlp(&dev),
    };
    // Rank 0's initial parameters go to every rank; dropout then draws
    // differently on each.
    let mut ddp = match group {
        Some(g) => {
            let bytes = args.parallel.bucket_bytes();
            let ddp = DataParallel::with_bucket_bytes(g, model.parameters(), bytes)?;
            dev.manual_seed(args.seed + rank as u64);
            println!(
                "rank {rank} of {ranks} on {}: batch {} of each global batch of {}, gradient buckets {:?} elements",
                dev.name(),
                args.batch_size,
                args.batch_size * ranks,
                ddp.bucket_sizes()
            );
            Some(ddp)
        }
        None => None,
    };
    let global_batch = args.batch_size * ranks;
    let mut opt = Adadelta::new(model.parameters(), args.lr);
    let mut sched = StepLr::new(&opt, 1, args.gamma);
    // f16's range needs loss scaling; bf16 has f32's.
    let mut scaler = (dtype == Some(DType::F16)).then(GradScaler::new);

    let n_train = data.train_labels.shape[0].min(args.train_size.unwrap_or(usize::MAX));
    let per_epoch = if args.keep_last {
        n_train.div_ceil(global_batch)
    } else {
        n_train / global_batch
    };
    let batches = per_epoch.min(args.max_batches.unwrap_or(usize::MAX));
    let mut losses: Vec<(f64, f64)> = Vec::new();
    let mut step_rates = Vec::new();
    let started = Instant::now();
    let mut training_peak = 0;
    let mut training_report = None;
    for epoch in 1..=epochs {
        let mut sync = SyncStats::default();
        let bar = if rank == 0 {
            ProgressBar::new(batches as u64)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template(
                "epoch {prefix} [{bar:30}] {pos}/{len} {per_sec} eta {eta} {msg}",
            )?
            .progress_chars("=> "),
        );
        bar.set_prefix(epoch.to_string());
        let t0 = Instant::now();
        // A new order each epoch (seeded), as PyTorch's shuffle=True.
        let order = if !args.no_shuffle {
            shuffled_batches(
                n_train,
                global_batch,
                args.seed,
                epoch as u64,
                !args.keep_last,
            )
        } else {
            (0..per_epoch)
                .map(|b| (b * global_batch..((b + 1) * global_batch).min(n_train)).collect())
                .collect()
        };
        for (b, global_indices) in order.iter().take(batches).enumerate() {
            // This rank's part of the global batch (all of it alone).
            let indices = match &ddp {
                Some(d) => &global_indices[d.shard(global_indices.len())],
                None => &global_indices[..],
            };
            let (x, y) = Mnist::batch_at(&data.train_images, &data.train_labels, indices, &dev)?;
            opt.zero_grad();
            let logp = forward(&model, &x, dtype).log_softmax(1);
            let loss = F::nll_loss(&logp, &y);
            ranks::backward(&loss, scaler.as_ref(), ddp.as_mut(), &mut sync)?;
            match &mut scaler {
                Some(scaler) => {
                    scaler.step(&mut opt)?;
                    scaler.update();
                }
                None => opt.step(),
            }
            dev.mark_step()?;
            // Reading the loss waits for the device, so only now and then.
            if b % args.log_interval == 0 || b + 1 == batches {
                let l = loss.item::<f32>()? as f64;
                losses.push(((epoch - 1) as f64 + b as f64 / batches as f64, l));
                bar.set_message(format!("loss {l:.4}"));
            }
            bar.inc(1);
        }
        dev.wait()?;
        let secs = t0.elapsed().as_secs_f64();
        bar.finish();
        step_rates.push(batches as f64 / secs);
        if ddp.is_some() {
            println!(
                "rank {rank}: epoch {epoch}: {:.1} steps/s, all-reduce {:.2} ms per step ({} buckets, {:.0} % hidden behind the device), gradient sync {:.2} ms per step",
                batches as f64 / secs,
                sync.communication.as_secs_f64() * 1e3 / batches.max(1) as f64,
                sync.buckets / batches.max(1),
                100.0 * sync.hidden_fraction(),
                sync.wall.as_secs_f64() * 1e3 / batches.max(1) as f64,
            );
        }
        if epoch == 1 {
            // Everything live, parameters and scratch textures included,
            // before any evaluation (tools/torch_memory.py measures
            // PyTorch's the same way).
            training_peak = dev.metrics().counter("peak_bytes_live");
            training_report = dev.memory_report();
        }
        // Every rank holds the same parameters: rank 0 evaluates.
        if rank == 0 {
            let (test_loss, acc) = evaluate(&model, &data, dtype, &dev)?;
            println!(
                "epoch {epoch}: test loss {test_loss:.4}, accuracy {:.2} %, {:.1} train steps/s, lr {}",
                acc * 100.0,
                batches as f64 / secs,
                opt.lr()
            );
        }
        sched.step(&mut opt);
    }
    if rank != 0 {
        return Ok(());
    }
    println!(
        "trained {} epochs in {:.1} s ({:.1} steps/s after the first epoch)",
        epochs,
        started.elapsed().as_secs_f64(),
        if step_rates.len() > 1 {
            step_rates[1..].iter().sum::<f64>() / (step_rates.len() - 1) as f64
        } else {
            step_rates[0]
        }
    );
    println!(
        "peak device memory: {:.2} MB in training (batch {}), {:.2} MB with evaluation (batch {EVAL_BATCH})",
        training_peak as f64 / 1e6,
        args.batch_size,
        dev.metrics().counter("peak_bytes_live") as f64 / 1e6,
    );
    if args.memory_report {
        match &training_report {
            Some(report) => print!("{report}"),
            None => println!("no memory report (the CPU backend keeps none)"),
        }
    }
    if let Some(scaler) = &scaler {
        println!(
            "f16 loss scale {} at the end, {} steps skipped",
            scaler.get_scale(),
            scaler.skipped_steps()
        );
    }
    println!("{}", dev.metrics());
    // With LAZYWGPU_PROFILE=1: where the device time went, per kernel.
    if let Some(profile) = dev.kernel_profile() {
        println!("{profile}");
    }
    let curve = Curve {
        label: "train",
        points: &losses,
        color: BLUE,
    };
    let plot_path = args.out.file_or(args.plot.as_deref(), "mnist-loss.svg")?;
    line_chart(
        &plot_path,
        &format!("lazywgpu MNIST {} on {}", args.model.name(), dev.name()),
        ("epoch", "training loss (nll)"),
        &[curve],
    )?;
    println!("loss curve written to {}", plot_path.display());
    if let Some(path) = &args.save {
        nn::save_safetensors(&model, path)?;
        println!("parameters saved to {}", path.display());
    }
    Ok(())
}
