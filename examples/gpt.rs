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
//! Options: `--iters N` (2000), `--log-interval N` (iterations between
//! loss reads; each read prints `iter N loss L`), `--eval-interval N`
//! (250), `--init FILE.safetensors` (start from these weights instead of
//! the random init), `--resume FILE` (a checkpoint from `--save`),
//! `--save FILE` (gpt-checkpoint.safetensors), `--plot FILE`
//! (gpt-loss.svg), `--device gpu|cpu`, `--seed N` (init seed, 1337),
//! `--sample-len N` (200), `--temperature F` (0.8; 0 takes the argmax),
//! `--dtype f32|f16|bf16` (mixed precision: the loss under autocast to
//! that dtype on f32 weights, f16 with dynamic loss scaling),
//! `--data-parallel` (under `mpirun`, built with the feature `mpi`: each
//! rank trains on 12 sequences of every global batch of `12 x ranks`,
//! gradients averaged across ranks; each rank reports its steps/s and
//! all-reduce time per step), `--bucket-kb N` (gradient bucket size, 1024).

#[path = "support/dtype_arg.rs"]
mod dtype_arg;
#[path = "support/plot.rs"]
mod plot;
#[path = "support/ranks.rs"]
mod ranks;

use dtype_arg::autocast_dtype;

use plot::{Curve, line_chart};

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

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

struct Args {
    iters: usize,
    log_interval: usize,
    eval_interval: usize,
    init: Option<PathBuf>,
    resume: Option<PathBuf>,
    save: PathBuf,
    plot: PathBuf,
    device: String,
    seed: u64,
    sample_len: usize,
    temperature: f32,
    /// Autocast dtype of the forward pass (`None`: all f32).
    dtype: Option<DType>,
    /// Train as one rank of an MPI job.
    data_parallel: bool,
    bucket_kb: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        iters: 2000,
        log_interval: 10,
        eval_interval: 250,
        init: None,
        resume: None,
        save: PathBuf::from("gpt-checkpoint.safetensors"),
        plot: PathBuf::from("gpt-loss.svg"),
        device: "gpu".into(),
        seed: 1337,
        sample_len: 200,
        temperature: 0.8,
        dtype: None,
        data_parallel: false,
        bucket_kb: 1024,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<f64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--iters" => a.iters = num(value()?)? as usize,
            "--log-interval" => a.log_interval = (num(value()?)? as usize).max(1),
            "--eval-interval" => a.eval_interval = (num(value()?)? as usize).max(1),
            "--init" => a.init = Some(PathBuf::from(value()?)),
            "--resume" => a.resume = Some(PathBuf::from(value()?)),
            "--save" => a.save = PathBuf::from(value()?),
            "--plot" => a.plot = PathBuf::from(value()?),
            "--device" => a.device = value()?,
            "--seed" => a.seed = num(value()?)? as u64,
            "--sample-len" => a.sample_len = num(value()?)? as usize,
            "--temperature" => a.temperature = num(value()?)? as f32,
            "--dtype" => a.dtype = autocast_dtype(&value()?)?,
            "--data-parallel" => a.data_parallel = true,
            "--bucket-kb" => a.bucket_kb = (num(value()?)? as usize).max(1),
            "-h" | "--help" => {
                let doc = include_str!("gpt.rs").lines().take(27);
                println!("{}", doc.collect::<Vec<_>>().join("\n"));
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other} (try --help)")),
        }
    }
    if a.device != "gpu" && a.device != "cpu" {
        return Err(format!("--device must be gpu or cpu, got {}", a.device));
    }
    Ok(a)
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
    env_logger::init();
    let args = parse_args()?;
    let dev = if args.device == "cpu" {
        Device::cpu()
    } else {
        Device::default()
    };
    dev.manual_seed(args.seed);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/data/shakespeare-char/input.txt.gz");
    let data = CharDataset::from_file(&path)?;
    let model = Gpt::new(GptConfig::baby(data.vocab_size()), &dev);
    if let Some(init) = &args.init {
        nn::load_safetensors(&model, init)?;
    }
    let (group, rank, ranks) = ranks::join(args.data_parallel)?;
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
            let ddp = DataParallel::with_bucket_bytes(g, params.clone(), args.bucket_kb << 10)?;
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
    let mut scaler = (args.dtype == Some(DType::F16)).then(GradScaler::new);
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
            let _amp = AutocastGuard::new(args.dtype);
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
    nn::save_checkpoint(&args.save, &model, &opt, &meta)?;
    println!("checkpoint written to {}", args.save.display());
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
    line_chart(
        &args.plot,
        &format!("lazywgpu baby GPT on {}", dev.name()),
        ("iteration", "cross-entropy"),
        &curves,
    )?;
    println!("loss curves written to {}", args.plot.display());
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
