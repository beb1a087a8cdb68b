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
//! Options: `--model cnn|mlp`, `--epochs N`, `--batch-size N`, `--lr F`,
//! `--gamma F`, `--log-interval N` (batches between loss reads),
//! `--data DIR`, `--seed N`, `--max-batches N` (per epoch, for a quick
//! look), `--plot FILE` (loss curve, SVG), `--save FILE` (safetensors),
//! `--no-shuffle` (batches in file order instead of a new seeded order
//! each epoch, as the tutorial's `shuffle=True`), `--train-size N` (the
//! first N training digits), `--keep-last` (train on the last, shorter
//! batch too, as PyTorch's `drop_last=False`; a new batch size compiles
//! another graph), `--dtype f32|f16|bf16` (mixed precision: the forward
//! pass under autocast to that dtype on f32 weights, f16 with dynamic
//! loss scaling), `--data-parallel` (under `mpirun`, built with the
//! feature `mpi`: each rank trains on `--batch-size` digits of every
//! global batch of `batch-size x ranks`, gradients averaged across ranks;
//! each rank reports its steps/s and all-reduce time per step),
//! `--bucket-kb N` (gradient bucket size for `--data-parallel`, 1024).

#[path = "support/dtype_arg.rs"]
mod dtype_arg;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/ranks.rs"]
mod ranks;

use dtype_arg::autocast_dtype;

use plot::{Curve, line_chart};

use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use lazywgpu::amp::{AutocastGuard, GradScaler};
use lazywgpu::data::{Mnist, shuffled_batches};
use lazywgpu::distributed::{DataParallel, SyncStats};
use lazywgpu::nn::{self, Module, functional as F};
use lazywgpu::optim::{Adadelta, Optimizer, StepLr};
use lazywgpu::{DType, Device, Tensor, no_grad};
use plotters::style::BLUE;

struct Args {
    model: String,
    epochs: usize,
    batch_size: usize,
    lr: f32,
    gamma: f32,
    log_interval: usize,
    data: PathBuf,
    seed: u64,
    max_batches: usize,
    plot: PathBuf,
    save: Option<PathBuf>,
    shuffle: bool,
    train_size: usize,
    keep_last: bool,
    /// Autocast dtype of the forward pass (`None`: all f32).
    dtype: Option<DType>,
    /// Train as one rank of an MPI job.
    data_parallel: bool,
    bucket_kb: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        model: "cnn".into(),
        epochs: 0,
        batch_size: 64,
        lr: 1.0,
        gamma: 0.7,
        log_interval: 10,
        data: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/mnist-10k"),
        seed: 0,
        max_batches: usize::MAX,
        plot: PathBuf::from("mnist-loss.svg"),
        save: None,
        shuffle: true,
        train_size: usize::MAX,
        keep_last: false,
        dtype: None,
        data_parallel: false,
        bucket_kb: 1024,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<f64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--model" => a.model = value()?,
            "--epochs" => a.epochs = num(value()?)? as usize,
            "--batch-size" => a.batch_size = num(value()?)? as usize,
            "--lr" => a.lr = num(value()?)? as f32,
            "--gamma" => a.gamma = num(value()?)? as f32,
            "--log-interval" => a.log_interval = (num(value()?)? as usize).max(1),
            "--data" => a.data = PathBuf::from(value()?),
            "--seed" => a.seed = num(value()?)? as u64,
            "--max-batches" => a.max_batches = num(value()?)? as usize,
            "--plot" => a.plot = PathBuf::from(value()?),
            "--save" => a.save = Some(PathBuf::from(value()?)),
            "--no-shuffle" => a.shuffle = false,
            "--train-size" => a.train_size = num(value()?)? as usize,
            "--keep-last" => a.keep_last = true,
            "--dtype" => a.dtype = autocast_dtype(&value()?)?,
            "--data-parallel" => a.data_parallel = true,
            "--bucket-kb" => a.bucket_kb = (num(value()?)? as usize).max(1),
            "-h" | "--help" => {
                println!(
                    "{}",
                    include_str!("mnist.rs")
                        .lines()
                        .take(32)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other} (try --help)")),
        }
    }
    if a.model != "cnn" && a.model != "mlp" {
        return Err(format!("--model must be cnn or mlp, got {}", a.model));
    }
    if a.epochs == 0 {
        // One epoch of the CNN (95 % on the shipped digits) takes about two
        // minutes on a 2-core machine with lavapipe; the MLP is much faster.
        a.epochs = if a.model == "cnn" { 1 } else { 3 };
    }
    Ok(a)
}

/// PyTorch's MNIST example network (without its final log_softmax).
fn cnn(dev: &Device) -> nn::Sequential {
    nn::Sequential::new()
        .add(nn::Conv2d::new(1, 32, 3, dev))
        .add(nn::ReLU)
        .add(nn::Conv2d::new(32, 64, 3, dev))
        .add(nn::ReLU)
        .add(nn::MaxPool2d::new(2))
        .add(nn::Dropout::new(0.25))
        .add(nn::Flatten)
        .add(nn::Linear::new(9216, 128, dev))
        .add(nn::ReLU)
        .add(nn::Dropout::new(0.5))
        .add(nn::Linear::new(128, 10, dev))
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
    env_logger::init();
    let args = parse_args()?;
    let data = Mnist::load(&args.data)?;
    let dev = Device::default();
    dev.manual_seed(args.seed);
    let (group, rank, ranks) = ranks::join(args.data_parallel)?;
    if rank == 0 {
        println!(
            "lazywgpu MNIST: {} model on {}, {} train / {} test digits from {}",
            args.model,
            dev.name(),
            data.train_labels.shape[0],
            data.test_labels.shape[0],
            args.data.display()
        );
    }
    let model = if args.model == "cnn" {
        cnn(&dev)
    } else {
        mlp(&dev)
    };
    // Rank 0's initial parameters go to every rank; dropout then draws
    // differently on each.
    let mut ddp = match group {
        Some(g) => {
            let bytes = args.bucket_kb << 10;
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
    let mut scaler = (args.dtype == Some(DType::F16)).then(GradScaler::new);

    let n_train = data.train_labels.shape[0].min(args.train_size);
    let per_epoch = if args.keep_last {
        n_train.div_ceil(global_batch)
    } else {
        n_train / global_batch
    };
    let batches = per_epoch.min(args.max_batches);
    let mut losses: Vec<(f64, f64)> = Vec::new();
    let mut step_rates = Vec::new();
    let started = Instant::now();
    for epoch in 1..=args.epochs {
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
        let order = if args.shuffle {
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
            let logp = forward(&model, &x, args.dtype).log_softmax(1);
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
        // Every rank holds the same parameters: rank 0 evaluates.
        if rank == 0 {
            let (test_loss, acc) = evaluate(&model, &data, args.dtype, &dev)?;
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
        args.epochs,
        started.elapsed().as_secs_f64(),
        if step_rates.len() > 1 {
            step_rates[1..].iter().sum::<f64>() / (step_rates.len() - 1) as f64
        } else {
            step_rates[0]
        }
    );
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
    line_chart(
        &args.plot,
        &format!("lazywgpu MNIST {} on {}", args.model, dev.name()),
        ("epoch", "training loss (nll)"),
        &[curve],
    )?;
    println!("loss curve written to {}", args.plot.display());
    if let Some(path) = &args.save {
        nn::save_safetensors(&model, path)?;
        println!("parameters saved to {}", path.display());
    }
    Ok(())
}
