//! Where a GPT training step's time goes on this machine's adapter: the
//! baby GPT of `examples/gpt.rs` (batch 12 x 64, AdamW, clipping), 20
//! steps back to back after 3 of warm-up, then 10 more with the device
//! idle before each (the host's own time), and the metrics report. With
//! `LAZYWGPU_PROFILE=1` it also prints the dearest kernels by their
//! device timestamps (profiling waits after each graph, so the step
//! times are then not the ones to quote).
//!
//! ```sh
//! cargo run --release --example gpt_step_profile
//! LAZYWGPU_PROFILE=1 cargo run --release --example gpt_step_profile
//! ```

use std::time::Instant;

use lazywgpu::Device;
use lazywgpu::data::{CharDataset, Split, SplitMix64};
use lazywgpu::nn::{Gpt, GptConfig, Parameters};
use lazywgpu::optim::{Optimizer, clip_grad_norm_};

fn main() -> lazywgpu::Result<()> {
    let dev = Device::gpu()?;
    match dev.adapter() {
        Some(report) => println!("{report}"),
        None => println!("{}", dev.name()),
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/data/shakespeare-char/input.txt.gz"
    );
    let data = CharDataset::from_file(path)?;
    let model = Gpt::new(GptConfig::baby(data.vocab_size()), &dev);
    let params = model.params();
    let (mut opt, _) = model.nanogpt_optimizer();
    let mut rng = SplitMix64::new(1337);
    let mut step = || -> lazywgpu::Result<()> {
        let offsets = data.offsets(Split::Train, &mut rng, 12, 64);
        let (x, y) = data.batch(Split::Train, &offsets, 64, &dev)?;
        let loss = model.loss(&x, &y);
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        opt.step();
        opt.zero_grad();
        dev.mark_step()
    };
    for _ in 0..3 {
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
