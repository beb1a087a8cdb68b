//! Where a GPT training step's time goes on this machine's adapter: the
//! baby GPT of `examples/gpt.rs` (batch 12 x 64, AdamW, clipping): the
//! first step's time and the tuning in it, 20 steps back to back after 3
//! of warm-up, then 10 more with the device
//! idle before each (the host's own time), and the metrics report. With
//! `LAZYWGPU_PROFILE=1` it also prints the dearest kernels, each run
//! alone and timed by the device's timestamps on a GPU or by the wall
//! clock on a CPU adapter (profiling waits after each kernel, so the
//! step times are then not the ones to quote).
//!
//! ```sh
//! cargo run --release --example gpt_step_profile
//! LAZYWGPU_PROFILE=1 cargo run --release --example gpt_step_profile
//! ```

use std::time::Instant;

#[path = "support/gpt_step.rs"]
mod gpt_step;

use lazywgpu::Device;

fn main() -> lazywgpu::Result<()> {
    let dev = Device::gpu()?;
    match dev.adapter() {
        Some(report) => println!("{report}"),
        None => println!("{}", dev.name()),
    }
    let mut step = gpt_step::trainer(&dev)?;
    // The first step compiles every graph (and, with tuning on, times the
    // matmul classes it meets that the tuning cache lacks).
    let tuned_secs = |dev: &Device| {
        dev.metrics()
            .timer("autotune")
            .map_or(0.0, |t| t.total.as_secs_f64())
    };
    let at_creation = tuned_secs(&dev);
    let first = Instant::now();
    step()?;
    dev.wait()?;
    println!(
        "tuning at device creation: {at_creation:.2} s; first step: {:.2} s, of which {:.2} s timing matmul classes",
        first.elapsed().as_secs_f64(),
        tuned_secs(&dev) - at_creation
    );
    if let Some(report) = dev.adapter() {
        for t in &report.matmul_class_tunings {
            println!("tuned {t}");
        }
    }
    for _ in 0..2 {
        step()?;
    }
    dev.wait()?;
    dev.reset_metrics();
    let t = Instant::now();
    for _ in 0..20 {
        step()?;
    }
    dev.wait()?;
    println!("20 steps back to back: {:?} a step", t.elapsed() / 20);
    let mut host = Vec::new();
    for _ in 0..10 {
        dev.wait()?;
        let t = Instant::now();
        step()?;
        host.push(t.elapsed());
    }
    dev.wait()?;
    host.sort();
    println!(
        "host time of a step, the device idle: median {:?}",
        host[host.len() / 2]
    );
    println!("{}", dev.metrics());
    if let Some(profile) = dev.kernel_profile() {
        for line in profile.lines().take(25) {
            println!("{line}");
        }
    }
    Ok(())
}
