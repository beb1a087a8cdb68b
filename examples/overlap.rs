//! Asynchronous steps, measured: a loop whose host tracing and device time
//! are similar, run with `mark_step()` alone (the host traces step k+1
//! while the device runs step k) and with a wait after every step. Also
//! W6 of the comparison suite (the host cost per traced op: 1,000 ops on
//! one element, see `PERFORMANCE.md`) and the host cost of a cache-hit
//! step beside its device time.
//!
//! `cargo run --release --example overlap`

#[path = "support/cli.rs"]
mod cli;

use std::time::{Duration, Instant};

use clap::Parser;
use lazywgpu::Tensor;

/// Times steps run asynchronously (`mark_step` alone) against steps that
/// wait each time, and the host's cost per traced op.
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    device: cli::DeviceArg,
}

/// Ops traced per step.
const OPS: usize = 200;

/// One step: a chain of `OPS` elementwise ops on `x`, stored back into `x`.
fn step(x: &Tensor) {
    let mut y = x * 1.0;
    for i in 0..OPS / 2 {
        y = (&y * 0.999 + 0.001 * (i % 3) as f32).sin();
    }
    x.copy_(&y);
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> lazywgpu::Result<()> {
    let args: Args = cli::parse();
    let dev = args.device.open()?;
    println!("device: {}", dev.name());

    // Size the tensor so one step's device time is close to its host time.
    let x = Tensor::ones([1 << 12], &dev);
    step(&x);
    dev.mark_step()?;
    dev.wait()?;
    let host = {
        let t = Instant::now();
        for _ in 0..20 {
            step(&x);
            dev.mark_step()?;
        }
        dev.wait()?;
        t.elapsed() / 20
    };
    let mut n = 1usize << 12;
    let x = loop {
        let x = Tensor::ones([n], &dev);
        step(&x);
        dev.mark_step()?;
        dev.wait()?;
        let t = Instant::now();
        for _ in 0..5 {
            step(&x);
            dev.mark_step()?;
            dev.wait()?;
        }
        let per_step = t.elapsed() / 5;
        if per_step > host * 2 || n >= 1 << 24 {
            break x;
        }
        n *= 2;
    };
    println!("elements per step: {n}");

    let steps = 50;
    let (mut async_runs, mut sync_runs, mut host_runs, mut device_runs) =
        (vec![], vec![], vec![], vec![]);
    for _ in 0..7 {
        // Interleaved, so drift in the machine's speed hits both alike.
        let t = Instant::now();
        for _ in 0..steps {
            step(&x);
            dev.mark_step()?;
        }
        dev.wait()?;
        async_runs.push(t.elapsed() / steps);

        let t = Instant::now();
        for _ in 0..steps {
            let h = Instant::now();
            step(&x);
            dev.mark_step()?;
            host_runs.push(h.elapsed());
            let d = Instant::now();
            dev.wait()?;
            device_runs.push(d.elapsed());
        }
        sync_runs.push(t.elapsed() / steps);
    }
    let (a, s) = (median(async_runs), median(sync_runs));
    let (h, d) = (median(host_runs), median(device_runs));

    // W6: x = x * 1.0001 + 0.0001, 500 times (1,000 ops) on one element.
    let one = Tensor::ones([1], &dev);
    let mut trace_only = vec![];
    let mut with_read = vec![];
    for _ in 0..30 {
        let t = Instant::now();
        let mut y = one.clone();
        for _ in 0..500 {
            y = y * 1.0001 + 0.0001;
        }
        trace_only.push(t.elapsed());
        y.item::<f32>()?;
        with_read.push(t.elapsed());
    }
    let (w6_trace, w6_all) = (median(trace_only), median(with_read));

    println!();
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| step, async `mark_step` (median of 7 runs of {steps}) | {:.3?} |",
        a
    );
    println!("| step, `mark_step` + `wait` each step | {:.3?} |", s);
    println!(
        "| speed-up from overlap | {:.2}x |",
        s.as_secs_f64() / a.as_secs_f64()
    );
    println!(
        "| host time of a cache-hit step ({OPS} ops traced + submit) | {:.3?} |",
        h
    );
    println!("| device wait after it | {:.3?} |", d);
    println!(
        "| host / device | {:.1} % |",
        100.0 * h.as_secs_f64() / d.as_secs_f64()
    );
    println!("| W6 tracing, per op | {:.3?} |", w6_trace / 1000);
    println!(
        "| W6 trace + run + read back, per op | {:.3?} |",
        w6_all / 1000
    );
    println!();
    println!("{}", dev.metrics());
    Ok(())
}
