//! A small DDPM (Ho et al., 2020) on MNIST digits: a U-Net predicts the
//! noise added to an image at a random timestep of a linear beta schedule,
//! trained with MSE and AdamW, one `mark_step()` per step; an exponential
//! moving average of the weights then samples a grid of digits from pure
//! noise (DDPM's ancestral sampler on a shortened schedule, or DDIM's
//! deterministic one with `--eta 0`).
//!
//! ```sh
//! cargo run --release --example diffusion                         # the shipped 8,000 digits
//! cargo run --release --example diffusion -- --steps 3000         # longer, better digits
//! cargo run --release --example diffusion -- --data ~/mnist       # the full 60,000 digits
//! cargo run --release --example diffusion -- --dataset cifar10 --data ~/cifar-10-batches-bin
//! cargo run --release --example diffusion -- --device cpu         # the CPU reference backend
//! ```
//!
//! `--help` lists the options. The samples go to
//! `target/lazywgpu-out/diffusion-samples.png` and the loss curve to
//! `diffusion-loss.svg` beside it (or `--out DIR`, or `--samples FILE`
//! and `--plot FILE`); `--save FILE` keeps the averaged weights.
//!
//! Noise is drawn on the device from its seeded generator
//! (`Tensor::randn`), and so are the timesteps: `floor(rand * T)` cast to
//! `i32`, which gathers each sample's `sqrt(alpha_bar)` and
//! `sqrt(1 - alpha_bar)` with `index_select`.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/ddpm.rs"]
mod ddpm;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/png.rs"]
mod png;
#[path = "support/unet.rs"]
mod unet;

use cli::{DeviceArg, OutDir, at_least_one};
use ddpm::{Schedule, diffusion_loss};
use plot::{Curve, line_chart};
use unet::{UNet, UNetConfig};

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use lazywgpu::data::{Cifar10, DataLoader, Dataset, Mnist};
use lazywgpu::nn::{self, Parameters};
use lazywgpu::optim::{AdamW, Ema, Optimizer};
use lazywgpu::{Device, Tensor, no_grad};
use plotters::style::BLUE;

/// The images trained on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DatasetChoice {
    /// MNIST's 28x28 digits (the shipped 8,000, or `--data DIR`)
    Mnist,
    /// CIFAR-10's 32x32 colour images from the binary files in `--data DIR`
    /// (`data_batch_1.bin` ...; nothing is downloaded)
    Cifar10,
}

/// A small DDPM on MNIST: a U-Net trained to predict noise (MSE, AdamW,
/// one `mark_step()` per step), an EMA of its weights, then a grid of
/// digits sampled from noise, written as a PNG.
#[derive(Parser, Debug)]
#[command(after_help = "Examples:
  cargo run --release --example diffusion                     # 100 steps on the shipped digits, about 4 minutes on 2 cores
  cargo run --release --example diffusion -- --steps 3000     # longer, better digits
  cargo run --release --example diffusion -- --data ~/mnist   # the full 60,000 digits
  cargo run --release --example diffusion -- --dataset cifar10 --data ~/cifar-10-batches-bin
  cargo run --release --example diffusion -- --eta 0          # DDIM's deterministic sampler
  cargo run --release --example diffusion -- --device cpu     # the CPU reference backend")]
struct Args {
    /// Training steps (batches)
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = at_least_one())]
    steps: usize,
    /// Images per batch
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = at_least_one())]
    batch_size: usize,
    /// The U-Net's channels at full resolution (twice as many below)
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = at_least_one())]
    width: usize,
    /// AdamW's learning rate
    #[arg(long, default_value_t = 2e-3)]
    lr: f32,
    /// The EMA's decay (warmed up as min(decay, (1 + n) / (10 + n)) after
    /// n updates)
    #[arg(long, default_value_t = 0.995)]
    ema_decay: f32,
    /// Diffusion timesteps T of the linear beta schedule (1e-4 to 0.02)
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = at_least_one())]
    timesteps: usize,
    /// Sampling steps, evenly spaced over the T timesteps
    #[arg(long, value_name = "N", default_value_t = 25, value_parser = at_least_one())]
    sample_steps: usize,
    /// Sampler noise: 1 is DDPM's ancestral sampler on the shortened
    /// schedule, 0 DDIM's deterministic one
    #[arg(long, default_value_t = 1.0)]
    eta: f32,
    /// Samples in the grid: its side (8 gives 8x8 images)
    #[arg(long, value_name = "N", default_value_t = 6, value_parser = at_least_one())]
    grid: usize,
    /// The images
    #[arg(long, value_enum, default_value_t = DatasetChoice::Mnist)]
    dataset: DatasetChoice,
    /// Directory of the dataset's files: MNIST's IDX files, gzipped or
    /// not (the full 60,000 digits work), or CIFAR-10's binary files
    /// [default for MNIST: the 8,000 digits in examples/data/mnist-10k]
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Seed of the initial weights, batch order, noise and timesteps
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Steps between loss reads (each read waits for the device)
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = at_least_one())]
    log_interval: usize,
    /// The sampled grid, PNG [default: diffusion-samples.png in the output
    /// directory]
    #[arg(long, value_name = "FILE")]
    samples: Option<PathBuf>,
    /// The loss curve, SVG [default: diffusion-loss.svg in the output
    /// directory]
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Save the averaged (EMA) weights sampled with (safetensors)
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

/// The training images as a dataset, with the name printed and the
/// image channels.
fn load_dataset(args: &Args) -> Result<(Arc<dyn Dataset>, String, usize), String> {
    match args.dataset {
        DatasetChoice::Mnist => {
            let dir = args.data.clone().unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/mnist-10k")
            });
            let split = Mnist::load_split(&dir, true)
                .map_err(|e| format!("reading MNIST from {}: {e}", dir.display()))?;
            Ok((Arc::new(split), format!("MNIST from {}", dir.display()), 1))
        }
        DatasetChoice::Cifar10 => {
            let dir = args
                .data
                .clone()
                .ok_or("--dataset cifar10 needs --data DIR (CIFAR-10's binary files)")?;
            let data = Cifar10::load(&dir, true)
                .map_err(|e| format!("reading CIFAR-10 from {}: {e}", dir.display()))?;
            Ok((
                Arc::new(data),
                format!("CIFAR-10 from {}", dir.display()),
                3,
            ))
        }
    }
}

/// A `[1]` tensor holding `v` (uploaded, so a new value compiles nothing).
fn scalar(v: f64, dev: &Device) -> lazywgpu::Result<Tensor> {
    Tensor::from_vec(vec![v as f32], [1], dev)
}

/// `n` images `[n, C, H, W]` in `[-1, 1]`, sampled from noise in
/// `steps` steps evenly spaced over the schedule: DDIM's update with
/// noise `eta` (1: DDPM's ancestral sampler on the shortened schedule, 0:
/// deterministic), the predicted clean image clipped to `[-1, 1]`.
fn sample(
    model: &UNet,
    schedule: &Schedule,
    shape: [usize; 4],
    steps: usize,
    eta: f64,
    dev: &Device,
) -> lazywgpu::Result<Tensor> {
    let t_max = schedule.timesteps();
    let steps = steps.min(t_max);
    // Timesteps from T-1 down to 0, evenly spaced.
    let ts: Vec<usize> = (0..steps)
        .map(|i| ((steps - 1 - i) * (t_max - 1)) / (steps - 1).max(1))
        .collect();
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("sampling [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut x = Tensor::randn(shape, dev);
    dev.mark_step()?;
    for (i, &t) in ts.iter().enumerate() {
        let ab = schedule.alpha_bar[t];
        let ab_prev = if i + 1 < ts.len() {
            schedule.alpha_bar[ts[i + 1]]
        } else {
            1.0
        };
        let sigma = eta * ((1.0 - ab_prev) / (1.0 - ab) * (1.0 - ab / ab_prev)).sqrt();
        let dir = (1.0 - ab_prev - sigma * sigma).max(0.0).sqrt();
        x = no_grad(|| -> lazywgpu::Result<Tensor> {
            let t_in = Tensor::from_vec(vec![t as f32; shape[0]], [shape[0]], dev)?;
            let eps = model.forward(&x, &t_in);
            let x0 = ((&x - &eps * &scalar((1.0 - ab).sqrt(), dev)?)
                * &scalar(1.0 / ab.sqrt(), dev)?)
                .clamp(-1.0, 1.0);
            // The noise the clipped image implies.
            let eps =
                (&x - &x0 * &scalar(ab.sqrt(), dev)?) * &scalar(1.0 / (1.0 - ab).sqrt(), dev)?;
            let next = &x0 * &scalar(ab_prev.sqrt(), dev)? + &eps * &scalar(dir, dev)?;
            if sigma > 0.0 {
                Ok(next + Tensor::randn(shape, dev) * &scalar(sigma, dev)?)
            } else {
                Ok(next)
            }
        })?;
        dev.mark_step()?;
        bar.inc(1);
    }
    bar.finish();
    Ok(x)
}

/// Images `[n, C, H, W]` in `[-1, 1]` as one `side x side` grid of bytes
/// with a 2-pixel border: `(width, height, pixels)`, interleaved channels.
fn grid(images: &[f32], shape: [usize; 4], side: usize) -> (usize, usize, Vec<u8>) {
    let [n, c, h, w] = shape;
    let pad = 2;
    let gw = side * (w + pad) + pad;
    let gh = n.div_ceil(side) * (h + pad) + pad;
    let mut out = vec![0u8; gw * gh * c];
    for k in 0..n {
        let (oy, ox) = (pad + (k / side) * (h + pad), pad + (k % side) * (w + pad));
        for y in 0..h {
            for x in 0..w {
                for ch in 0..c {
                    let v = images[((k * c + ch) * h + y) * w + x];
                    let byte = ((v + 1.0) * 127.5).round().clamp(0.0, 255.0) as u8;
                    out[((oy + y) * gw + ox + x) * c + ch] = byte;
                }
            }
        }
    }
    (gw, gh, out)
}

/// The training losses read, `(step, loss)`.
type LossCurve = Vec<(f64, f64)>;

/// Trains `model` for `args.steps` steps of AdamW, one `mark_step()` per
/// step, with an EMA of its weights: the losses read `(step, loss)` and
/// the average.
fn train(
    args: &Args,
    model: &UNet,
    schedule: &Schedule,
    loader: &DataLoader,
    dev: &Device,
) -> Result<(LossCurve, Ema), Box<dyn Error>> {
    let mut opt = AdamW::new(model.params(), args.lr);
    let mut ema = Ema::new(&model.params(), args.ema_decay);
    let bar = ProgressBar::new(args.steps as u64);
    bar.set_style(
        ProgressStyle::with_template("train [{bar:30}] {pos}/{len} {per_sec} eta {eta} {msg}")?
            .progress_chars("=> "),
    );
    let mut losses = LossCurve::new();
    let mut pending: Vec<(usize, Tensor)> = Vec::new();
    let started = Instant::now();
    let mut step = 0;
    'train: for epoch in 0.. {
        for batch in loader.epoch(epoch) {
            let (images, _labels) = batch?;
            // [0, 1] -> [-1, 1].
            let x0 = images * 2.0f32 - 1.0f32;
            opt.zero_grad();
            let loss = diffusion_loss(model, schedule, &x0);
            loss.backward();
            opt.step();
            // The average's decay warms up over its first updates.
            let n = ema.updates() as f32;
            ema.set_decay(args.ema_decay.min((1.0 + n) / (10.0 + n)));
            ema.update(&model.params());
            dev.mark_step()?;
            pending.push((step, loss));
            step += 1;
            // Reading waits for the device: the losses of the last
            // interval are read together.
            if step % args.log_interval == 0 || step == args.steps {
                for (s, l) in pending.drain(..) {
                    losses.push((s as f64, l.item::<f32>()? as f64));
                }
                let last = losses.last().map_or(0.0, |p| p.1);
                bar.set_message(format!("loss {last:.4}"));
                if bar.is_hidden() {
                    println!(
                        "step {step}: loss {last:.4}, {:.1} s",
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            bar.inc(1);
            if step == args.steps {
                break 'train;
            }
        }
    }
    dev.wait()?;
    bar.finish();
    let train_secs = started.elapsed().as_secs_f64();
    // Everything live in training, parameters, AdamW's moments and the
    // average included, before sampling.
    let training_peak = dev.metrics().counter("peak_bytes_live");
    let training_report = dev.memory_report();
    let tail = &losses[losses.len().saturating_sub(50)..];
    let final_loss = tail.iter().map(|p| p.1).sum::<f64>() / tail.len().max(1) as f64;
    println!(
        "trained {} steps in {train_secs:.1} s ({:.2} steps/s); loss {final_loss:.4} (mean of the last {})",
        args.steps,
        args.steps as f64 / train_secs,
        tail.len()
    );
    println!(
        "peak device memory in training: {:.2} MB (batch {})",
        training_peak as f64 / 1e6,
        args.batch_size
    );
    if args.memory_report {
        match &training_report {
            Some(report) => print!("{report}"),
            None => println!("no memory report (the CPU backend keeps none)"),
        }
    }
    Ok((losses, ema))
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Args = cli::parse();
    let (dataset, what, channels) = load_dataset(&args)?;
    let dev = args
        .device
        .open()
        .map_err(|e| format!("opening the device: {e}"))?;
    dev.manual_seed(args.seed);
    let example = dataset.get(0)?;
    let (h, w) = (example.shape[1], example.shape[2]);
    if !h.is_multiple_of(4) || !w.is_multiple_of(4) {
        return Err(format!("images of {h}x{w}: the U-Net needs sides divisible by 4").into());
    }
    let groups = 8.min(args.width);
    if !args.width.is_multiple_of(groups) {
        return Err(format!(
            "--width {} must be a multiple of 8 (GroupNorm's groups)",
            args.width
        )
        .into());
    }
    let config = UNetConfig {
        channels,
        base: args.width,
        groups,
    };
    let model = UNet::new(config, &dev);
    println!(
        "lazywgpu diffusion: {} images of {channels}x{h}x{w} ({what}) on {}, U-Net of width {} ({} parameters), T = {}",
        dataset.len(),
        dev.name(),
        args.width,
        model.num_params(),
        args.timesteps,
    );
    let schedule = Schedule::linear(args.timesteps, &dev)?;
    let loader = DataLoader::new(dataset, args.batch_size, &dev)
        .shuffle(args.seed)
        .drop_last(true);
    if loader.is_empty() {
        return Err(format!("fewer images than one batch of {}", args.batch_size).into());
    }

    let started = Instant::now();
    let (losses, ema) = train(&args, &model, &schedule, &loader, &dev)?;

    // Sample with the averaged weights, copied into the trained model:
    // its own weights are not needed any more, and a second U-Net made
    // beforehand would hold its parameters through every training step.
    ema.copy_to(&model.params());
    let n = args.grid * args.grid;
    let shape = [n, channels, h, w];
    let t0 = Instant::now();
    let images = sample(
        &model,
        &schedule,
        shape,
        args.sample_steps,
        args.eta as f64,
        &dev,
    )?;
    let pixels = images.to_vec::<f32>()?;
    println!(
        "sampled {n} images in {} steps in {:.1} s",
        args.sample_steps.min(args.timesteps),
        t0.elapsed().as_secs_f64()
    );
    println!("{}", dev.metrics());
    // With LAZYWGPU_PROFILE=1: where the device time went, per kernel.
    if let Some(profile) = dev.kernel_profile() {
        println!("{profile}");
    }

    let (gw, gh, grid_bytes) = grid(&pixels, shape, args.grid);
    let png_path = args
        .out
        .file_or(args.samples.as_deref(), "diffusion-samples.png")
        .map_err(|e| format!("creating the output directory: {e}"))?;
    png::write(&png_path, gw, gh, channels, &grid_bytes)
        .map_err(|e| format!("writing {}: {e}", png_path.display()))?;
    println!("samples written to {}", png_path.display());
    let curve = Curve {
        label: "train",
        points: &losses,
        color: BLUE,
    };
    let plot_path = args
        .out
        .file_or(args.plot.as_deref(), "diffusion-loss.svg")
        .map_err(|e| format!("creating the output directory: {e}"))?;
    line_chart(
        &plot_path,
        &format!("lazywgpu DDPM, width {}, on {}", args.width, dev.name()),
        ("step", "training loss (noise MSE)"),
        &[curve],
    )
    .map_err(|e| format!("writing {}: {e}", plot_path.display()))?;
    println!("loss curve written to {}", plot_path.display());
    if let Some(path) = &args.save {
        nn::save_safetensors(&model, path)
            .map_err(|e| format!("saving to {}: {e}", path.display()))?;
        println!("averaged weights saved to {}", path.display());
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
