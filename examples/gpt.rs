//! A character-level GPT on Shakespeare: nanoGPT's "baby GPT" recipe
//! (4 layers, 4 heads, width 128, context 64; AdamW with warm-up and
//! cosine decay, gradient clipping at 1.0), trained end to end on the GPU
//! (lavapipe where there is none), then 200 characters sampled.
//!
//! ```sh
//! cargo run --release --example gpt                        # 2,000 iterations
//! cargo run --release --example gpt -- --iters 200 --log-interval 1
//! cargo run --release --example gpt -- --device cpu        # the CPU reference
//! cargo build --release --features mpi --example gpt &&
//!   mpirun -np 2 --bind-to none target/release/examples/gpt --iters 200 --data-parallel  # two ranks
//! ```
//!
//! `--help` lists the options. The checkpoint and the loss curves go to
//! `target/lazywgpu-out/` (or `--out DIR`, or `--save FILE` and `--plot
//! FILE`).

#[path = "support/cli.rs"]
mod cli;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/ranks.rs"]
mod ranks;

use cli::{DataParallelArgs, DeviceArg, OutDir, Precision, at_least_one};
use plot::{Curve, line_chart};

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use lazywgpu::amp::{AutocastGuard, GradScaler};
use lazywgpu::data::{CharDataset, Split, SplitMix64};
use lazywgpu::distributed::{DataParallel, SyncStats};
use lazywgpu::nn::{self, Gpt, GptConfig, Parameters};
use lazywgpu::optim::{Optimizer, clip_grad_norm_};
use lazywgpu::{DType, Device, Tensor, no_grad};
use plotters::style::{BLUE, RED};

const BATCH: usize = 12;
const BLOCK: usize = 64;
const VAL_BATCHES: usize = 20;

/// nanoGPT's "baby GPT" (4 layers, 4 heads, width 128, context 64)
/// trained on the Shakespeare shipped in examples/data with nanoGPT's
/// recipe (AdamW with warm-up and cosine decay, clipping at 1.0), then
/// characters sampled from it.
#[derive(Parser, Debug)]
#[command(after_help = "Examples:
  cargo run --release --example gpt                          # 2,000 iterations
  cargo run --release --example gpt -- --iters 200 --log-interval 1
  cargo run --release --example gpt -- --device cpu          # the CPU reference backend
  cargo build --release --features mpi --example gpt &&
    mpirun -np 2 --bind-to none target/release/examples/gpt --iters 200 --data-parallel")]
struct Args {
    /// Training iterations
    #[arg(long, value_name = "N", default_value_t = 2000)]
    iters: usize,
    /// Iterations between loss reads; each read waits for the device and
    /// prints `iter N loss L`
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = at_least_one())]
    log_interval: usize,
    /// Iterations between validation losses
    #[arg(long, value_name = "N", default_value_t = 250, value_parser = at_least_one())]
    eval_interval: usize,
    /// Start from these weights (safetensors) instead of the random init
    #[arg(long, value_name = "FILE")]
    init: Option<PathBuf>,
    /// Go on from a checkpoint written by an earlier run (--save)
    #[arg(long, value_name = "FILE")]
    resume: Option<PathBuf>,
    /// The checkpoint written at the end: parameters, AdamW's moments, the
    /// iteration and the sampler's state [default:
    /// gpt-checkpoint.safetensors in the output directory]
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// The loss curves, SVG [default: gpt-loss.svg in the output
    /// directory]
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Seed of the initial weights
    #[arg(long, default_value_t = 1337)]
    seed: u64,
    /// Characters sampled at the end
    #[arg(long, value_name = "N", default_value_t = 200)]
    sample_len: usize,
    /// Sampling temperature; 0 takes the most likely character
    #[arg(long, default_value_t = 0.8)]
    temperature: f32,
    /// Mixed precision: the loss under autocast to this dtype on f32
    /// weights (f16 with dynamic loss scaling)
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    dtype: Precision,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutDir,
    #[command(flatten)]
    parallel: DataParallelArgs,
}

/// Mean loss over the fixed validation batches.
fn val_loss(
    model: &Gpt,
    data: &CharDataset,
    batches: &[Vec<usize>],
    dev: &Device,
) -> lazywgpu::Result<f64> {
    let mut sum = 0.0;
    for offsets in batches {
        let (x, y) = data.batch(Split::Val, offsets, BLOCK, dev)?;
        sum += no_grad(|| model.loss(&x, &y)).item::<f32>()? as f64;
    }
    Ok(sum / batches.len() as f64)
}

/// `len` characters sampled after a newline. The model always sees a
/// full block (the context, then padding that the causal mask hides from
/// it), so every step runs the same graph and nothing recompiles.
fn generate(
    model: &Gpt,
    data: &CharDataset,
    len: usize,
    temperature: f32,
    dev: &Device,
) -> lazywgpu::Result<String> {
    let mut ids: Vec<u32> = data.encode("\n");
    for _ in 0..len {
        let start = ids.len().saturating_sub(BLOCK);
        let context = &ids[start..];
        let mut window: Vec<i32> = context.iter().map(|&t| t as i32).collect();
        window.resize(BLOCK, 0);
        let x = Tensor::from_vec(window, [1, BLOCK], dev)?;
        let next = no_grad(|| {
            let logits = model.forward(&x).select(0, 0).select(0, context.len() - 1);
            if temperature == 0.0 {
                logits.argmax(0, false)
            } else {
                (logits / temperature).softmax(0).multinomial()
            }
        });
        ids.push(next.item::<i32>()? as u32);
    }
    Ok(data.decode(&ids[1..]))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Args = cli::parse();
    let dtype = args.dtype.autocast();
    let dev = args.device.open()?;
    dev.manual_seed(args.seed);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/data/shakespeare-char/input.txt.gz");
    let data = CharDataset::from_file(&path)?;
    let model = Gpt::new(GptConfig::baby(data.vocab_size()), &dev);
    if let Some(init) = &args.init {
        nn::load_safetensors(&model, init)?;
    }
    let (group, rank, ranks) = args.parallel.join()?;
    println!(
        "lazywgpu GPT on {}: {} parameters, {} characters ({} distinct), {} iterations",
        dev.name(),
        model.num_params(),
        data.tokens.len(),
        data.vocab_size(),
        args.iters
    );

    // AdamW with decay on matrices only, nanoGPT's schedule.
    let (mut opt, mut sched) = model.nanogpt_optimizer();
    let mut rng = SplitMix64::new(1337);
    let mut first_iter = 0;
    if let Some(resume) = &args.resume {
        let meta = nn::load_checkpoint(resume, &model, &mut opt)?;
        first_iter = meta.get("iter").and_then(|v| v.parse().ok()).unwrap_or(0);
        rng.state = meta
            .get("rng")
            .and_then(|v| v.parse().ok())
            .unwrap_or(rng.state);
        sched.set_step(&mut opt, first_iter);
        println!(
            "resumed from {} at iteration {first_iter}",
            resume.display()
        );
    }
    let mut vrng = SplitMix64::new(4242);
    let val_batches: Vec<Vec<usize>> = (0..VAL_BATCHES)
        .map(|_| data.offsets(Split::Val, &mut vrng, BATCH, BLOCK))
        .collect();

    let params = model.params();
    // Rank 0's parameters go to every rank.
    let mut ddp = match group {
        Some(g) => {
            let ddp =
                DataParallel::with_bucket_bytes(g, params.clone(), args.parallel.bucket_bytes())?;
            println!(
                "rank {rank} of {ranks}: {BATCH} sequences of each global batch of {}, gradient buckets {:?} elements",
                BATCH * ranks,
                ddp.bucket_sizes()
            );
            Some(ddp)
        }
        None => None,
    };
    let mut sync = SyncStats::default();
    // f16's range needs loss scaling; bf16 has f32's.
    let mut scaler = (dtype == Some(DType::F16)).then(GradScaler::new);
    let (mut train_curve, mut val_curve) = (Vec::new(), Vec::new());
    let bar = if rank == 0 {
        ProgressBar::new(args.iters as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} {per_sec} eta {eta} {msg}")?
            .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut train_secs = 0.0;
    let end = first_iter + args.iters;
    for it in first_iter..=end {
        // Every rank holds the same parameters: rank 0 evaluates.
        if rank == 0 && (it % args.eval_interval == 0 || it == end) {
            let v = val_loss(&model, &data, &val_batches, &dev)?;
            val_curve.push((it as f64, v));
            bar.suspend(|| println!("iter {it}: val loss {v:.4}"));
        }
        if it == end {
            break;
        }
        let t0 = Instant::now();
        // Every rank draws the global batch (the same stream) and keeps
        // its part.
        let offsets = data.offsets(Split::Train, &mut rng, BATCH * ranks, BLOCK);
        let mine = &offsets[rank * BATCH..(rank + 1) * BATCH];
        let (x, y) = data.batch(Split::Train, mine, BLOCK, &dev)?;
        let loss = {
            let _amp = AutocastGuard::new(dtype);
            model.loss(&x, &y)
        };
        ranks::backward(&loss, scaler.as_ref(), ddp.as_mut(), &mut sync)?;
        match &mut scaler {
            Some(scaler) => {
                // Unscaled before clipping, as PyTorch's recipe.
                scaler.unscale_(&opt)?;
                clip_grad_norm_(&params, 1.0);
                scaler.step(&mut opt)?;
                scaler.update();
            }
            None => {
                clip_grad_norm_(&params, 1.0);
                opt.step();
            }
        }
        opt.zero_grad();
        sched.step(&mut opt);
        dev.mark_step()?;
        // Reading the loss waits for the device, so only now and then.
        if it % args.log_interval == 0 || it + 1 == end {
            let l = loss.item::<f32>()?;
            train_curve.push((it as f64, l as f64));
            bar.suspend(|| println!("iter {it} loss {l:.4}"));
            bar.set_message(format!("loss {l:.4}"));
        }
        // The first iteration compiles the step's graphs: left out of the rate.
        if it > first_iter {
            train_secs += t0.elapsed().as_secs_f64();
        }
        bar.inc(1);
    }
    dev.wait()?;
    bar.finish_and_clear();
    let steps_per_sec = args.iters.saturating_sub(1) as f64 / train_secs.max(1e-9);
    if ddp.is_some() {
        let iters = args.iters.max(1) as f64;
        println!(
            "rank {rank}: {steps_per_sec:.2} steps/s, all-reduce {:.2} ms per step ({} buckets, {:.0} % hidden behind the device), gradient sync {:.2} ms per step",
            sync.communication.as_secs_f64() * 1e3 / iters,
            sync.buckets / args.iters.max(1),
            100.0 * sync.hidden_fraction(),
            sync.wall.as_secs_f64() * 1e3 / iters,
        );
    }
    if rank != 0 {
        return Ok(());
    }
    let m = dev.metrics();
    println!(
        "trained {} iterations in {:.1} s ({:.2} steps/s after the first); {} graphs compiled; final val loss {:.4}",
        args.iters,
        started.elapsed().as_secs_f64(),
        steps_per_sec,
        m.counter("graphs_compiled"),
        val_curve.last().map_or(f64::NAN, |v| v.1)
    );
    println!("{m}");
    // With LAZYWGPU_PROFILE=1: where the device time went, per kernel.
    if let Some(profile) = dev.kernel_profile() {
        println!("{profile}");
    }
    let meta = HashMap::from([
        ("iter".to_string(), end.to_string()),
        ("rng".to_string(), rng.state.to_string()),
    ]);
    let save_path = args
        .out
        .file_or(args.save.as_deref(), "gpt-checkpoint.safetensors")?;
    nn::save_checkpoint(&save_path, &model, &opt, &meta)?;
    println!("checkpoint written to {}", save_path.display());
    let curves = [
        Curve {
            label: "train",
            points: &train_curve,
            color: BLUE,
        },
        Curve {
            label: "validation",
            points: &val_curve,
            color: RED,
        },
    ];
    let plot_path = args.out.file_or(args.plot.as_deref(), "gpt-loss.svg")?;
    line_chart(
        &plot_path,
        &format!("lazywgpu baby GPT on {}", dev.name()),
        ("iteration", "cross-entropy"),
        &curves,
    )?;
    println!("loss curves written to {}", plot_path.display());
    println!(
        "--- {} characters sampled at temperature {} ---",
        args.sample_len, args.temperature
    );
    println!(
        "{}",
        generate(&model, &data, args.sample_len, args.temperature, &dev)?
    );
    Ok(())
}
