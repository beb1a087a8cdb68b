//! The baby GPT recipe against PyTorch, and checkpoint resume.
//!
//! `tools/gpt_reference.py --golden` wrote the recipe's initial weights
//! (`tests/golden/gpt_init.safetensors`) and PyTorch's loss at each of the
//! first 20 iterations (`gpt_losses.json`); lazywgpu starts from the same
//! weights, draws the same batches (splitmix64) and must give the same
//! losses within 1e-3, on the CPU reference and on the GPU.

mod common;

use std::collections::HashMap;

use common::devices;
use lazywgpu::Device;
use lazywgpu::data::{CharDataset, Split, SplitMix64};
use lazywgpu::nn::{self, Gpt, GptConfig, Parameters};
use lazywgpu::optim::{AdamW, Optimizer, Scheduler, WarmupCosine, clip_grad_norm_};

const DATA: &str = "examples/data/shakespeare-char/input.txt.gz";
const BATCH: usize = 12;
const BLOCK: usize = 64;

/// Runs `iters` iterations from the current state; returns their losses.
fn train(
    model: &Gpt,
    data: &CharDataset,
    rng: &mut SplitMix64,
    (opt, sched): &mut (AdamW, Scheduler<WarmupCosine>),
    iters: usize,
    dev: &Device,
) -> Vec<f32> {
    let params = model.params();
    let mut losses = Vec::new();
    for _ in 0..iters {
        let offsets = data.offsets(Split::Train, rng, BATCH, BLOCK);
        let (x, y) = data.batch(Split::Train, &offsets, BLOCK, dev).unwrap();
        let loss = model.loss(&x, &y);
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        opt.step();
        opt.zero_grad();
        sched.step(opt);
        dev.mark_step().unwrap();
        losses.push(loss.item::<f32>().unwrap());
    }
    losses
}

fn golden_losses() -> Vec<f32> {
    let text = std::fs::read_to_string("tests/golden/gpt_losses.json").unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_f64().unwrap() as f32)
        .collect()
}

fn model_from_golden(data: &CharDataset, dev: &Device) -> Gpt {
    dev.manual_seed(0);
    let model = Gpt::new(GptConfig::baby(data.vocab_size()), dev);
    nn::load_safetensors(&model, "tests/golden/gpt_init.safetensors").unwrap();
    model
}

#[test]
fn first_20_losses_match_pytorch() {
    let data = CharDataset::from_file(DATA).unwrap();
    assert_eq!(data.tokens.len(), 1_134_316);
    assert_eq!(data.vocab_size(), 78);
    let want = golden_losses();
    for dev in devices() {
        let model = model_from_golden(&data, &dev);
        assert_eq!(model.num_params(), 805_760, "tied head counted once");
        let mut opt = model.nanogpt_optimizer();
        let mut rng = SplitMix64::new(1337);
        let got = train(&model, &data, &mut rng, &mut opt, want.len(), &dev);
        for (it, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-3,
                "{}: iteration {it}: loss {g}, PyTorch {w}\n got {got:?}\nwant {want:?}",
                dev.name()
            );
        }
    }
}

#[test]
fn resumed_run_equals_uninterrupted_run() {
    let data = CharDataset::from_file(DATA).unwrap();
    let dev = Device::cpu();
    let (first, second) = (6, 6);
    let path = std::env::temp_dir().join(format!(
        "lazywgpu-resume-{}.safetensors",
        std::process::id()
    ));

    // Uninterrupted.
    let model = model_from_golden(&data, &dev);
    let mut opt = model.nanogpt_optimizer();
    let mut rng = SplitMix64::new(1337);
    let all = train(&model, &data, &mut rng, &mut opt, first + second, &dev);

    // Stopped after `first`, saved...
    let model = model_from_golden(&data, &dev);
    let mut opt = model.nanogpt_optimizer();
    let mut rng = SplitMix64::new(1337);
    let before = train(&model, &data, &mut rng, &mut opt, first, &dev);
    let meta = HashMap::from([
        ("iter".to_string(), first.to_string()),
        ("rng".to_string(), rng.state.to_string()),
    ]);
    nn::save_checkpoint(&path, &model, &opt.0, &meta).unwrap();
    drop((model, opt));

    // ... and resumed into fresh objects with a different init.
    dev.manual_seed(99);
    let model = Gpt::new(GptConfig::baby(data.vocab_size()), &dev);
    let mut opt = model.nanogpt_optimizer();
    let meta = nn::load_checkpoint(&path, &model, &mut opt.0).unwrap();
    let iter: usize = meta["iter"].parse().unwrap();
    opt.1.set_step(&mut opt.0, iter);
    let mut rng = SplitMix64 {
        state: meta["rng"].parse().unwrap(),
    };
    let after = train(&model, &data, &mut rng, &mut opt, second, &dev);
    std::fs::remove_file(&path).ok();

    let resumed: Vec<f32> = before.into_iter().chain(after).collect();
    assert_eq!(
        resumed, all,
        "resumed losses differ from the uninterrupted run"
    );
    assert!(opt.0.lr() > 0.0);
}
