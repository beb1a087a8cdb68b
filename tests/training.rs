#![allow(clippy::needless_borrows_for_generic_args)]
//! Training end to end: the MLP against PyTorch's losses step by step
//! (tools/golden_mlp.py), and the steady state of a training loop (nothing
//! compiles after step 2, device memory stays flat).

mod common;

use common::gpu;
use lazywgpu::data::Mnist;
use lazywgpu::nn::{self, Module, functional as F};
use lazywgpu::optim::{Adadelta, Optimizer, Sgd, StepLr};
use lazywgpu::{Device, Tensor};

fn batch(data: &Mnist, b: usize, dev: &Device) -> (Tensor, Tensor) {
    Mnist::batch(&data.train_images, &data.train_labels, b * 64, 64, dev).unwrap()
}

fn golden_on(dev: &Device) {
    let golden: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/mlp_sgd.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let expected: Vec<f64> = golden["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let data = common::mnist();
    let model = common::mnist_mlp(dev);
    nn::load_safetensors(
        &model,
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/mlp_init.safetensors"),
    )
    .unwrap();
    let mut opt = Sgd::new(model.parameters(), 0.05)
        .momentum(0.9)
        .weight_decay(1e-4);
    for (step, &want) in expected.iter().enumerate() {
        let (x, y) = batch(&data, step, dev);
        opt.zero_grad();
        let loss = F::nll_loss(&model.forward(&x).log_softmax(1), &y);
        loss.backward();
        opt.step();
        dev.mark_step().unwrap();
        let got = loss.item::<f32>().unwrap() as f64;
        assert!(
            (got - want).abs() <= 1e-4 * want.abs(),
            "{}: step {step}: loss {got}, PyTorch {want}",
            dev.name()
        );
    }
    for (name, p) in model.named_parameters() {
        let v: Vec<f32> = p.to_vec().unwrap();
        let sum: f64 = v.iter().map(|&x| x as f64).sum();
        let sum_sq: f64 = v.iter().map(|&x| x as f64 * x as f64).sum();
        let want = &golden["final"][&name];
        let (ws, wq) = (
            want["sum"].as_f64().unwrap(),
            want["sum_sq"].as_f64().unwrap(),
        );
        assert!(
            (sum - ws).abs() <= 1e-3 * (1.0 + ws.abs()),
            "{name}: sum {sum}, PyTorch {ws}"
        );
        assert!(
            (sum_sq - wq).abs() <= 1e-4 * wq.abs(),
            "{name}: sum of squares {sum_sq}, PyTorch {wq}"
        );
    }
}

#[test]
fn mlp_sgd_matches_pytorch_losses_on_cpu() {
    golden_on(&Device::cpu());
}

#[test]
fn mlp_sgd_matches_pytorch_losses_on_gpu() {
    if let Some(dev) = gpu() {
        golden_on(&dev);
    }
}

/// After step 2 a training loop compiles nothing and its live device bytes
/// stay the same, also when the learning rate changes.
fn steady_state_on(dev: &Device, cnn: bool) {
    let data = common::mnist();
    dev.manual_seed(1);
    let model: nn::Sequential = if cnn {
        nn::Sequential::new()
            .add(nn::Conv2d::new(1, 4, 3, dev))
            .add(nn::ReLU)
            .add(nn::MaxPool2d::new(2))
            .add(nn::Dropout::new(0.25))
            .add(nn::Flatten)
            .add(nn::Linear::new(4 * 13 * 13, 10, dev))
    } else {
        common::mnist_mlp(dev)
    };
    let mut opt = Adadelta::new(model.parameters(), 1.0);
    let mut sched = StepLr::new(&opt, 1, 0.7);
    let mut compiled_after_2 = 0;
    let mut live_after_2 = 0;
    let mut reuses_after_2 = 0;
    let mut losses = Vec::new();
    for step in 0..8 {
        let (x, y) = batch(&data, step, dev);
        opt.zero_grad();
        let loss = F::nll_loss(&model.forward(&x).log_softmax(1), &y);
        loss.backward();
        opt.step();
        dev.mark_step().unwrap();
        if step % 3 == 2 {
            sched.step(&mut opt); // a new learning rate: a runtime parameter
        }
        losses.push(loss.item::<f32>().unwrap());
        let m = dev.metrics();
        if step == 2 {
            compiled_after_2 = m.counter("graphs_compiled");
            live_after_2 = m.counter("bytes_live");
            reuses_after_2 = m.counter("bind_group_reuses");
        } else if step > 2 {
            assert_eq!(
                m.counter("graphs_compiled"),
                compiled_after_2,
                "{}: step {step} compiled a graph",
                dev.name()
            );
            assert_eq!(
                m.counter("bytes_live"),
                live_after_2,
                "{}: live bytes changed at step {step}",
                dev.name()
            );
        }
    }
    // Steps bind the same buffers (the pool hands them back in order), so
    // the GPU reuses its bind groups instead of creating them each step.
    let reused = dev.metrics().counter("bind_group_reuses") - reuses_after_2;
    assert!(
        !dev.is_gpu() || reused >= 5,
        "{}: {reused} bind groups reused in 5 steps",
        dev.name()
    );
    assert!(
        losses[7] < losses[0],
        "{}: training did not lower the loss: {losses:?}",
        dev.name()
    );
}

#[test]
fn training_loop_reaches_a_steady_state_cpu() {
    steady_state_on(&Device::cpu(), false);
    steady_state_on(&Device::cpu(), true);
}

#[test]
fn training_loop_reaches_a_steady_state_gpu() {
    if let Some(dev) = gpu() {
        steady_state_on(&dev, false);
        steady_state_on(&dev, true);
    }
}
