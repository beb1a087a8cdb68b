//! Times an RNG-heavy step: dropout on a `[4096, 4096]` activation
//! (`Tensor::rand` + `ge` + `where_cond`), then reads the sum. Prints each
//! step's time and the median after warm-up.
//!
//! `cargo run --release --example dropout_rng` (`-- --device cpu` for the
//! CPU reference backend, `--size`, `--steps` to change the run).

#[path = "support/cli.rs"]
mod cli;

use std::time::Instant;

use clap::Parser;
use lazywgpu::Tensor;

/// Times dropout steps on a square activation.
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    device: cli::DeviceArg,
    /// Side of the square activation
    #[arg(long, default_value_t = 4096)]
    size: usize,
    /// Timed steps (after three warm-up steps)
    #[arg(long, default_value_t = 10)]
    steps: usize,
}

/// The drop probability, as in PyTorch's default `Dropout`.
const P: f32 = 0.5;

fn main() -> lazywgpu::Result<()> {
    let args: Args = cli::parse();
    let dev = args.device.open()?;
    println!("device: {}", dev.name());
    dev.manual_seed(0);
    let x = Tensor::randn([args.size, args.size], &dev);
    // Stored before the loop, so that each step's graph is the dropout alone.
    dev.mark_step()?;
    let mut times = Vec::new();
    for step in 0..3 + args.steps {
        let start = Instant::now();
        let keep = Tensor::rand([args.size, args.size], &dev).ge(P);
        let y = keep.where_cond(&x * (1.0 / (1.0 - P)), 0.0);
        let sum: f32 = y.sum_all().item()?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        println!("step {step}: {ms:.1} ms (sum {sum:.1})");
        if step >= 3 {
            times.push(ms);
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "median {:.1} ms over {} steps",
        times[times.len() / 2],
        times.len()
    );
    Ok(())
}
