//! `w -= 0.01 * g` in a loop on a large parameter, printing device memory
//! as it goes: after warm-up the update writes into `w`'s own buffer
//! (donation), so live bytes stay flat and nothing is allocated.
//!
//! `cargo run --release --example inplace_update -- [elements] [steps]`
//! (default 25,000,000 elements, 1,000 steps).

#[path = "support/cli.rs"]
mod cli;

use std::time::Instant;

use clap::Parser;
use lazywgpu::Tensor;

/// `w -= 0.01 * g` in a loop, printing device memory as it goes: after
/// warm-up the update writes into `w`'s own buffer (donation).
#[derive(Parser, Debug)]
struct Args {
    /// Elements of `w` and `g` (f32 each)
    #[arg(default_value_t = 25_000_000)]
    elements: usize,
    /// Updates
    #[arg(default_value_t = 1000, value_parser = cli::at_least_one())]
    steps: usize,
    #[command(flatten)]
    device: cli::DeviceArg,
}

fn main() -> lazywgpu::Result<()> {
    let args: Args = cli::parse();
    let (n, steps) = (args.elements, args.steps);
    let dev = args.device.open()?;
    println!(
        "device: {}; w and g of {n} f32 ({} MB each); {steps} steps",
        dev.name(),
        n * 4 / 1_000_000
    );

    let w = Tensor::randn([n], &dev);
    let g = Tensor::randn([n], &dev);
    let mut w_ref = w.clone();
    dev.mark_step()?;
    let start = Instant::now();
    for step in 1..=steps {
        w_ref -= &g * 0.01;
        dev.mark_step()?;
        if step == 3 {
            dev.wait()?;
            dev.reset_metrics();
        }
        if step == 3 || step % (steps / 5).max(1) == 0 {
            dev.wait()?;
            let m = dev.metrics();
            println!(
                "step {step:>5}: bytes_live {:>11}  peak {:>11}  buffers_allocated {:>3}  buffers_donated {:>5}",
                m.counter("bytes_live"),
                m.counter("peak_bytes_live"),
                m.counter("buffers_allocated"),
                m.counter("buffers_donated")
            );
        }
    }
    dev.wait()?;
    let elapsed = start.elapsed();
    println!(
        "{:.2} ms per step",
        elapsed.as_secs_f64() * 1e3 / steps as f64
    );
    println!("{}", dev.metrics());
    Ok(())
}
