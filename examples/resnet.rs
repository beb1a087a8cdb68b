//! A ResNet-18-shaped network, narrowed, trained as torchvision's recipes
//! train it: torchvision's `BasicBlock` (conv3x3-BN-ReLU-conv3x3-BN plus
//! the identity or a 1x1 convolution and BN) in four stages, adaptive
//! average pooling and a linear layer; SGD with Nesterov momentum and
//! weight decay under a one-cycle rate, cross-entropy with label
//! smoothing, random crops on the device, batches loaded on a thread by a
//! `DataLoader`, and `train()`/`eval()` around each epoch's test pass.
//!
//! ```sh
//! cargo run --release --example resnet                        # MNIST, the 8,000/2,000 digits shipped in examples/data
//! cargo run --release --example resnet -- --epochs 4 --blocks 2,2,2,2   # longer, deeper
//! cargo run --release --example resnet -- --data ~/mnist      # the full 60,000/10,000 files (gzipped or not)
//! cargo run --release --example resnet -- --dataset cifar10 --data ~/cifar-10-batches-bin
//! cargo run --release --example resnet -- --device cpu        # the CPU reference backend
//! ```
//!
//! `--help` lists the options. The loss curve goes to
//! `target/lazywgpu-out/resnet-loss.svg` (or `--out DIR`, or `--plot
//! FILE`). Nothing is downloaded: CIFAR-10 is read from the binary
//! version's files (`data_batch_1.bin` to `data_batch_5.bin`,
//! `test_batch.bin`) in the directory `--data` names.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/resnet_model.rs"]
mod resnet_model;

use cli::{DeviceArg, OutDir, at_least_one};
use plot::{Curve, line_chart};
use resnet_model::{ResNet, ResNetConfig};

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use lazywgpu::data::augment::{Compose, Normalize, RandomCrop, RandomHorizontalFlip};
use lazywgpu::data::{Cifar10, DataLoader, Dataset, Mnist};
use lazywgpu::nn::functional::{self as F, CrossEntropyOptions};
use lazywgpu::nn::{self, Module};
use lazywgpu::optim::{OneCycleLr, Optimizer, Scheduler, Sgd};
use lazywgpu::{DType, Device, no_grad};
use plotters::style::{BLUE, RED};

/// The images trained on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DatasetArg {
    /// MNIST's IDX files: 28x28 digits, one channel
    Mnist,
    /// CIFAR-10's binary files: 32x32 photos, three channels (needs
    /// --data)
    Cifar10,
}

/// A narrowed ResNet-18 (torchvision's BasicBlock) trained with SGD
/// (Nesterov momentum 0.9, weight decay 5e-4) under a one-cycle rate,
/// cross-entropy with label smoothing 0.1, random crops on the device;
/// test accuracy per epoch, the metrics report and a loss curve.
#[derive(Parser, Debug)]
#[command(after_help = "Examples:
  cargo run --release --example resnet                                  # MNIST, the shipped digits
  cargo run --release --example resnet -- --epochs 4 --blocks 2,2,2,2   # longer, ResNet-18's depth
  cargo run --release --example resnet -- --data ~/mnist                # the full 60,000/10,000 files
  cargo run --release --example resnet -- --dataset cifar10 --data ~/cifar-10-batches-bin
  cargo run --release --example resnet -- --device cpu                  # the CPU reference backend")]
struct Args {
    /// The images
    #[arg(long, value_enum, default_value_t = DatasetArg::Mnist)]
    dataset: DatasetArg,
    /// Directory of the dataset's files: MNIST's IDX files, gzipped or
    /// not, or CIFAR-10's data_batch_*.bin and test_batch.bin [default for
    /// MNIST: the 8,000/2,000 digits in examples/data/mnist-10k]
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Epochs (the one-cycle schedule spans all of them; one takes about
    /// five to six minutes on a 2-core machine with lavapipe at batch 64)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = at_least_one())]
    epochs: usize,
    /// Images per training batch (the last, shorter batch is dropped)
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = at_least_one())]
    batch_size: usize,
    /// Channels of the first stage; the others double it (ResNet-18: 64)
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = at_least_one())]
    width: usize,
    /// Blocks in each of the four stages (ResNet-18: 2,2,2,2)
    #[arg(long, value_name = "N,N,N,N", value_delimiter = ',', default_value = "1,1,1,1",
          value_parser = at_least_one())]
    blocks: Vec<usize>,
    /// The one-cycle schedule's peak learning rate
    #[arg(long, default_value_t = 0.2)]
    lr: f32,
    /// Batches between loss reads (each read waits for the device)
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = at_least_one())]
    log_interval: usize,
    /// Seed of the initial weights, the batch order and the crops
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Batches per epoch at most, for a quick look [default: all]
    #[arg(long, value_name = "N", value_parser = at_least_one())]
    max_batches: Option<usize>,
    /// The loss curve, SVG [default: resnet-loss.svg in the output
    /// directory]
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Save the trained parameters and buffers (safetensors, PyTorch's
    /// state-dict names)
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Print where the training step's peak device memory goes: the
    /// buffers live at it, largest first, with the source line of each
    #[arg(long)]
    memory_report: bool,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutDir,
}

/// Test images per evaluation batch.
const EVAL_BATCH: usize = 500;

/// SGD's momentum (Nesterov) and weight decay, torchvision's recipe.
const MOMENTUM: f32 = 0.9;
const WEIGHT_DECAY: f32 = 5e-4;
/// Cross-entropy's label smoothing.
const LABEL_SMOOTHING: f32 = 0.1;

/// A dataset's two splits and how its images are prepared.
struct Data {
    name: &'static str,
    train: Arc<dyn Dataset>,
    test: Arc<dyn Dataset>,
    channels: usize,
    /// Training augmentation: random crops (and flips for photos), then
    /// normalisation.
    augment: Compose,
    /// The test images' normalisation alone.
    normalize: Compose,
}

impl Data {
    /// Reads the dataset `args` names, or says which files could not be
    /// read.
    fn load(args: &Args) -> Result<(Data, PathBuf), Box<dyn Error>> {
        match args.dataset {
            DatasetArg::Mnist => {
                let dir = args.data.clone().unwrap_or_else(|| {
                    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/mnist-10k")
                });
                let mnist = Mnist::load(&dir)
                    .map_err(|e| format!("reading MNIST from {}: {e}", dir.display()))?;
                // PyTorch's MNIST example's normalisation; digits are not
                // mirror images of each other, so crops but no flips.
                let norm = || Normalize {
                    mean: vec![0.1307],
                    std: vec![0.3081],
                };
                let data = Data {
                    name: "MNIST",
                    train: Arc::new(mnist.split(true)),
                    test: Arc::new(mnist.split(false)),
                    channels: 1,
                    augment: Compose::new(args.seed)
                        .then(RandomCrop {
                            size: 28,
                            padding: 2,
                        })
                        .then(norm()),
                    normalize: Compose::new(args.seed).then(norm()),
                };
                Ok((data, dir))
            }
            DatasetArg::Cifar10 => {
                let dir = args.data.clone().ok_or(
                    "--dataset cifar10 needs --data DIR, the folder of CIFAR-10's binary files \
                     (cifar-10-batches-bin); nothing is downloaded",
                )?;
                let read = |train| {
                    Cifar10::load(&dir, train)
                        .map_err(|e| format!("reading CIFAR-10 from {}: {e}", dir.display()))
                };
                let norm = || Normalize {
                    mean: Cifar10::MEAN.to_vec(),
                    std: Cifar10::STD.to_vec(),
                };
                let data = Data {
                    name: "CIFAR-10",
                    train: Arc::new(read(true)?),
                    test: Arc::new(read(false)?),
                    channels: 3,
                    augment: Compose::new(args.seed)
                        .then(RandomCrop {
                            size: 32,
                            padding: 4,
                        })
                        .then(RandomHorizontalFlip { p: 0.5 })
                        .then(norm()),
                    normalize: Compose::new(args.seed).then(norm()),
                };
                Ok((data, dir))
            }
        }
    }
}

/// Test loss (without smoothing) and accuracy, in eval mode (BatchNorm's
/// running statistics), then back to training mode.
fn evaluate(
    model: &dyn Module,
    loader: &DataLoader,
    normalize: &Compose,
) -> lazywgpu::Result<(f64, f64)> {
    model.eval();
    let (mut loss_sum, mut correct, mut n) = (0.0f64, 0i64, 0usize);
    for batch in loader.epoch(0) {
        let (x, y) = batch?;
        let len = y.shape()[0];
        let x = normalize.apply(&x, 0)?;
        let (loss, hits) = no_grad(|| {
            let logits = model.forward(&x);
            let loss = F::cross_entropy(&logits, &y) * len as f32;
            let hits = logits.argmax(1, false).eq(&y).cast(DType::I32).sum_all();
            (loss, hits)
        });
        loss_sum += loss.item::<f32>()? as f64;
        correct += hits.item::<i32>()? as i64;
        n += len;
    }
    model.train();
    Ok((loss_sum / n as f64, correct as f64 / n as f64))
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Args = cli::parse();
    let (data, data_dir) = Data::load(&args)?;
    let dev: Device = args
        .device
        .open()
        .map_err(|e| format!("opening the device: {e}"))?;
    dev.manual_seed(args.seed);
    let w = args.width;
    let config = ResNetConfig {
        in_channels: data.channels,
        widths: [w, 2 * w, 4 * w, 8 * w],
        blocks: args
            .blocks
            .as_slice()
            .try_into()
            .map_err(|_| format!("--blocks takes four counts, got {:?}", args.blocks))?,
        classes: 10,
    };
    let model = ResNet::new(config, &dev);
    let n_params: usize = model.parameters().iter().map(|p| p.numel()).sum();
    println!(
        "lazywgpu ResNet: widths {:?}, blocks {:?}, {n_params} parameters on {}; {} train / {} test {} images from {}",
        config.widths,
        config.blocks,
        dev.name(),
        data.train.len(),
        data.test.len(),
        data.name,
        data_dir.display()
    );

    // One batch ready ahead is enough to hide its loading (about a
    // millisecond against a step of a second here); each batch waiting
    // holds its images in device memory.
    let train_loader = DataLoader::new(data.train, args.batch_size, &dev)
        .shuffle(args.seed)
        .drop_last(true)
        .prefetch(1);
    let test_loader = DataLoader::new(data.test, EVAL_BATCH, &dev);
    let batches = train_loader
        .len()
        .min(args.max_batches.unwrap_or(usize::MAX));
    if batches == 0 {
        return Err(format!(
            "{} training images make no batch of {}",
            train_loader.len(),
            args.batch_size
        )
        .into());
    }
    let total_steps = args.epochs * batches;
    let mut opt = Sgd::new(model.parameters(), args.lr)
        .momentum(MOMENTUM)
        .nesterov(true)
        .weight_decay(WEIGHT_DECAY);
    // The rate follows the cycle; the momentum stays at 0.9.
    let mut sched = Scheduler::new(
        &mut opt,
        OneCycleLr::new(args.lr, total_steps).cycle_momentum(false),
    );
    let smoothing = CrossEntropyOptions {
        label_smoothing: LABEL_SMOOTHING,
        ..Default::default()
    };

    model.train();
    let mut losses: Vec<(f64, f64)> = Vec::new();
    let mut accuracies: Vec<(f64, f64)> = Vec::new();
    let mut step_secs = Vec::new();
    let mut step = 0u64;
    let mut training_peak = 0;
    let mut training_report = None;
    let started = Instant::now();
    for epoch in 1..=args.epochs {
        let bar = ProgressBar::new(batches as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "epoch {prefix} [{bar:30}] {pos}/{len} {per_sec} eta {eta} {msg}",
            )?
            .progress_chars("=> "),
        );
        bar.set_prefix(epoch.to_string());
        let t0 = Instant::now();
        // A new seeded order each epoch (the loader's shuffle); stopping
        // early drops the loader's thread cleanly.
        for (b, batch) in train_loader.epoch(epoch as u64).take(batches).enumerate() {
            let (x, y) = batch?;
            let x = data.augment.apply(&x, step)?;
            opt.zero_grad();
            let loss = F::cross_entropy_with(&model.forward(&x), &y, &smoothing);
            loss.backward();
            opt.step();
            sched.step(&mut opt);
            dev.mark_step()?;
            step += 1;
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
        step_secs.push(secs / batches as f64);
        if epoch == 1 {
            // Everything live, parameters and scratch included, before
            // any evaluation (tools/torch_memory.py measures PyTorch's).
            training_peak = dev.metrics().counter("peak_bytes_live");
            training_report = dev.memory_report();
        }
        let (test_loss, acc) = evaluate(&model, &test_loader, &data.normalize)?;
        accuracies.push((epoch as f64, 1.0 - acc));
        println!(
            "epoch {epoch}: test loss {test_loss:.4}, accuracy {:.2} %, {:.0} ms per train step, lr {:.4}",
            acc * 100.0,
            secs * 1e3 / batches as f64,
            opt.lr()
        );
    }
    // The first epoch compiles the step's kernels.
    let (steady, which) = if step_secs.len() > 1 {
        (&step_secs[1..], "after the first epoch")
    } else {
        (&step_secs[..], "compiling included")
    };
    println!(
        "trained {} epochs of {batches} steps in {:.1} s ({:.0} ms per step, {which})",
        args.epochs,
        started.elapsed().as_secs_f64(),
        steady.iter().sum::<f64>() / steady.len() as f64 * 1e3
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
    println!("{}", dev.metrics());
    // With LAZYWGPU_PROFILE=1: where the device time went, per kernel.
    if let Some(profile) = dev.kernel_profile() {
        println!("{profile}");
    }
    let plot_path = args
        .out
        .file_or(args.plot.as_deref(), "resnet-loss.svg")
        .map_err(|e| format!("creating the output directory: {e}"))?;
    line_chart(
        &plot_path,
        &format!("lazywgpu ResNet on {} ({})", data.name, dev.name()),
        ("epoch", "training loss (smoothed CE); test error"),
        &[
            Curve {
                label: "train loss",
                points: &losses,
                color: BLUE,
            },
            Curve {
                label: "test error",
                points: &accuracies,
                color: RED,
            },
        ],
    )
    .map_err(|e| format!("writing {}: {e}", plot_path.display()))?;
    println!("loss curve written to {}", plot_path.display());
    if let Some(path) = &args.save {
        nn::save_safetensors(&model, path)
            .map_err(|e| format!("saving to {}: {e}", path.display()))?;
        println!("parameters saved to {}", path.display());
    }
    Ok(())
}
