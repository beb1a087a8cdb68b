//! The diffusion example (examples/diffusion.rs) step for step like
//! PyTorch: its U-Net (examples/support/unet.rs) and loss
//! (examples/support/ddpm.rs) from the initial weights
//! `tools/diffusion_reference.py` exported, on the same batches (the
//! example's loader order for seed 0), with the same timesteps and noise
//! (drawn by [`Replay`], which the script implements too), under AdamW
//! at the example's rate: the first 20 losses against PyTorch's.

mod common;

#[path = "../examples/support/ddpm.rs"]
mod ddpm;
#[path = "../examples/support/unet.rs"]
mod unet;

use common::devices;
use ddpm::{Schedule, noise_prediction_loss};
use lazywgpu::data::DataLoader;
use lazywgpu::nn::Parameters;
use lazywgpu::optim::{AdamW, Optimizer};
use lazywgpu::{Device, Tensor};
use unet::{UNet, UNetConfig};

/// The example's default U-Net on MNIST.
const EXAMPLE: UNetConfig = UNetConfig {
    channels: 1,
    base: 16,
    groups: 8,
};
const BATCH: usize = 16;
const TIMESTEPS: usize = 1000;
const LR: f32 = 2e-3;

/// Timesteps and noise both sides can draw: SplitMix64 over a counter,
/// the `n`th draw of `stream` at `step` hashed from
/// `stream * 2^56 + step * 2^32 + n`. Uniforms are `((z >> 11) + 0.5) /
/// 2^53`, in (0, 1); a normal is Box-Muller's cosine of draws `2i` and
/// `2i + 1`, computed in f64.
struct Replay;

impl Replay {
    const TIMESTEPS: u64 = 1;
    const NOISE: u64 = 2;

    fn splitmix64(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(stream: u64, step: u64, n: u64) -> f64 {
        let z = Self::splitmix64((stream << 56) + (step << 32) + n);
        ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// `floor(U * T)`, as the example draws its timesteps.
    fn timesteps(step: u64, b: usize, t_max: usize) -> Vec<f32> {
        (0..b as u64)
            .map(|i| (Self::uniform(Self::TIMESTEPS, step, i) * t_max as f64).floor() as f32)
            .collect()
    }

    fn normals(step: u64, len: usize) -> Vec<f32> {
        (0..len as u64)
            .map(|i| {
                let u1 = Self::uniform(Self::NOISE, step, 2 * i);
                let u2 = Self::uniform(Self::NOISE, step, 2 * i + 1);
                ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
            })
            .collect()
    }
}

#[test]
fn the_replayed_draws_are_uniform_and_normal() {
    // The moments of 20,000 draws, against U(0, 1) and N(0, 1) with five
    // standard errors of room.
    let n = 20_000usize;
    let u: Vec<f64> = (0..n as u64).map(|i| Replay::uniform(9, 3, i)).collect();
    let mean = u.iter().sum::<f64>() / n as f64;
    assert!((mean - 0.5).abs() < 5.0 * (1.0f64 / 12.0 / n as f64).sqrt());
    assert!(u.iter().all(|&x| x > 0.0 && x < 1.0));
    let z = Replay::normals(4, n);
    let m = z.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    let var = z.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n as f64;
    assert!(m.abs() < 5.0 / (n as f64).sqrt(), "mean {m}");
    assert!(
        (var - 1.0).abs() < 5.0 * (2.0 / n as f64).sqrt(),
        "variance {var}"
    );
    let t = Replay::timesteps(0, 1000, TIMESTEPS);
    assert!(
        t.iter()
            .all(|&t| t >= 0.0 && t < TIMESTEPS as f32 && t.fract() == 0.0)
    );
}

/// The example's first `steps` losses from the exported weights.
fn example_losses(dev: &Device, steps: usize) -> Vec<f32> {
    let model = UNet::new(EXAMPLE, dev);
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/diffusion");
    lazywgpu::nn::load_safetensors(&model, golden.join("init.safetensors"))
        .expect("the initial weights load by the example's names");
    let schedule = Schedule::linear(TIMESTEPS, dev).expect("the schedule uploads");
    let loader = DataLoader::new(common::mnist().split(true), BATCH, dev)
        .shuffle(0)
        .drop_last(true);
    let mut opt = AdamW::new(model.params(), LR);
    let mut losses = Vec::new();
    for (step, batch) in loader.epoch(0).take(steps).enumerate() {
        let (images, _labels) = batch.expect("the batch loads");
        let x0 = images * 2.0f32 - 1.0f32;
        let shape = x0.shape().to_vec();
        let t = Tensor::from_vec(
            Replay::timesteps(step as u64, BATCH, TIMESTEPS),
            [BATCH],
            dev,
        )
        .expect("timesteps");
        let noise = Tensor::from_vec(
            Replay::normals(step as u64, shape.iter().product()),
            shape.as_slice(),
            dev,
        )
        .expect("noise");
        opt.zero_grad();
        let loss = noise_prediction_loss(&model, &schedule, &x0, &t, &noise);
        loss.backward();
        opt.step();
        dev.mark_step().expect("step");
        losses.push(loss.item::<f32>().expect("loss"));
    }
    losses
}

/// Step for step like PyTorch (tests/golden/diffusion, written by
/// tools/diffusion_reference.py): the first 20 losses within the
/// tolerance the script measured from PyTorch's own runs (recorded in
/// losses.json beside them and explained there); the CPU reference runs
/// the first 4 steps.
#[test]
fn the_examples_first_twenty_steps_follow_pytorch() {
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/diffusion/losses.json");
    let text = std::fs::read_to_string(&golden).expect("tests/golden/diffusion/losses.json");
    let golden: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let numbers = |key: &str| -> Vec<f64> {
        golden[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key} in losses.json"))
            .iter()
            .map(|v| v.as_f64().expect("a number"))
            .collect()
    };
    let want = numbers("losses");
    let tolerance = numbers("tolerance");
    assert_eq!(want.len(), tolerance.len());
    for dev in devices() {
        let steps = if dev.is_gpu() { want.len() } else { 4 };
        let started = std::time::Instant::now();
        let got = example_losses(&dev, steps);
        assert_eq!(got.len(), steps);
        common::assert_losses_follow(&dev, &got, &want, |step| tolerance[step], started);
    }
}

/// The names and shapes the export must carry, printed for the script's
/// author (`cargo test --test diffusion_example -- --nocapture names`).
#[test]
fn names_are_the_example_modules() {
    let model = UNet::new(EXAMPLE, &Device::cpu());
    let named = model.named_params();
    for (name, t) in &named {
        eprintln!("{name} {:?}", t.shape());
    }
    assert!(named.iter().any(|(n, _)| n == "mid_attn.qkv.weight"));
    assert_eq!(named.len(), model.params().len());
}
