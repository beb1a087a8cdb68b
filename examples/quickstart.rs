//! Build an expression lazily, print it (which runs it as one fused
//! kernel), and print the device's metrics.
//!
//! `cargo run --release --example quickstart` (`-- --device cpu` for the
//! CPU reference backend).

#[path = "support/cli.rs"]
mod cli;

use clap::Parser;
use lazywgpu::Tensor;

/// Builds an expression lazily, prints it (one fused kernel) and the
/// device's metrics.
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    device: cli::DeviceArg,
}

fn main() -> lazywgpu::Result<()> {
    let args: Args = cli::parse();
    let dev = args.device.open()?;
    println!("device: {}", dev.name());

    let x = Tensor::from_vec(vec![-2.0f32, -1.0, 0.0, 1.0, 2.0, 3.0], [2, 3], &dev)?;
    let bias = Tensor::from_vec(vec![0.5f32, 0.0, -0.5], [3], &dev)?;
    // Nothing runs yet: these lines only record a graph.
    let y = ((&x * 2.0 + 1.0).tanh() - &x).sigmoid() * &x + 0.5;
    let z = (&y + &bias).relu().transpose(0, 1);

    println!("y = {y}");
    println!("z = {z}");
    println!("{}", dev.metrics());
    Ok(())
}
