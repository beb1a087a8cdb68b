//! Activation checkpointing: the same loss and gradients as without it
//! (a Llama-shaped model, every parameter), the recomputed forward kept
//! as nodes of its own (more kernels a step), less memory at the peak,
//! and dropout inside a checkpointed block replaying its mask.

mod common;

use std::sync::Arc;

use common::{assert_close, devices};
use lazywgpu::nn::{self, Llama, LlamaConfig, Module, Parameters};
use lazywgpu::{Device, Tensor};

fn config() -> LlamaConfig {
    LlamaConfig {
        hidden_size: 64,
        intermediate_size: 160,
        num_hidden_layers: 4,
        max_position_embeddings: 64,
        ..LlamaConfig::tiny(40)
    }
}

/// One training step's loss, every gradient, and the step's metrics
/// (kernel launches, peak live bytes).
fn step(dev: &Device, checkpointing: bool) -> (f32, Vec<Vec<f32>>, u64, u64) {
    dev.manual_seed(1);
    let m = Llama::new(config(), dev);
    m.set_gradient_checkpointing(checkpointing);
    let ids: Vec<i32> = (0..8 * 48).map(|i| i * 7 % 40).collect();
    let x = Tensor::from_vec(ids.clone(), [8, 48], dev).unwrap();
    let y = Tensor::from_vec(ids.iter().map(|v| (v + 1) % 40).collect(), [8, 48], dev).unwrap();
    dev.mark_step().unwrap();
    let before = dev.metrics().counter("kernel_launches");
    let loss = m.loss(&x, &y);
    loss.backward();
    let grads: Vec<Tensor> = m.params().iter().map(|p| p.grad().unwrap()).collect();
    dev.mark_step().unwrap();
    let launches = dev.metrics().counter("kernel_launches") - before;
    let peak = dev.metrics().counter("peak_bytes_live");
    let grads = grads.iter().map(|g| g.to_vec::<f32>().unwrap()).collect();
    (loss.item::<f32>().unwrap(), grads, launches, peak)
}

#[test]
fn checkpointed_blocks_give_the_same_gradients_for_less_memory() {
    for dev in devices() {
        let (l0, g0, k0, _) = step(&dev, false);
        let (l1, g1, k1, _) = step(&dev, true);
        assert!((l0 - l1).abs() <= 1e-6, "loss {l0} vs {l1}");
        for (i, (a, b)) in g0.iter().zip(&g1).enumerate() {
            assert_close(b, a, 1e-4, 1e-6, &format!("gradient {i} on {}", dev.name()));
        }
        eprintln!(
            "{}: {k0} kernels a step without checkpointing, {k1} with",
            dev.name()
        );
        if dev.is_gpu() {
            // The recomputed forward runs kernels of its own.
            assert!(k1 > k0, "kernels: {k0} without, {k1} with checkpointing");
        }
    }
    // Peak memory, each on a fresh device (the peak is per device).
    if let Some(a) = common::gpu() {
        let (_, _, _, without) = step(&a, false);
        let b = common::gpu().unwrap();
        let (_, _, _, with) = step(&b, true);
        eprintln!("peak live bytes: {without} without checkpointing, {with} with");
        assert!(
            with < without,
            "peak live bytes: {with} with checkpointing, {without} without"
        );
    }
}

/// Dropout inside a checkpointed block: the recomputation draws the same
/// mask, so the gradient is the forward's mask over 1 - p.
#[test]
fn dropout_in_a_checkpointed_block_replays_its_mask() {
    for dev in devices() {
        dev.manual_seed(3);
        let x = Tensor::from_vec(common::data(4096, 2), [64, 64], &dev).unwrap();
        x.requires_grad_(true);
        let lin = Arc::new(nn::Linear::new(64, 64, &dev));
        let drop = Arc::new(nn::Dropout::new(0.5));
        let (l, d) = (lin.clone(), drop.clone());
        let y = nn::checkpoint(&[&x], move |xs| d.forward(&l.forward(&xs[0])));
        // Draws after the block must not change what it replays.
        let _later = Tensor::rand([100], &dev);
        y.sum_all().backward();
        let gx = x.grad().unwrap().to_vec::<f32>().unwrap();
        // The kept outputs, from the forward's values, and the gradient
        // through them: dL/dx = (mask * 2) @ W.
        let kept: Vec<f32> = y
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&v| if v != 0.0 { 2.0 } else { 0.0 })
            .collect();
        let mask = Tensor::from_vec(kept, [64, 64], &dev).unwrap();
        let want = mask.matmul(&lin.weight).to_vec::<f32>().unwrap();
        assert_close(&gx, &want, 1e-4, 1e-5, &format!("on {}", dev.name()));
        assert!(lin.weight.grad().is_some());
    }
}

/// Under bf16 autocast, the recomputation inside backward (which runs
/// outside the autocast scope) still computes in bf16: the gradients
/// equal those without checkpointing.
#[test]
fn checkpointing_under_autocast_recomputes_in_the_same_dtype() {
    use lazywgpu::DType;
    use lazywgpu::amp::autocast;
    for dev in devices() {
        let run = |checkpointing: bool| {
            dev.manual_seed(2);
            let m = Llama::new(config(), &dev);
            m.set_gradient_checkpointing(checkpointing);
            let ids: Vec<i32> = (0..2 * 16).map(|i| i * 5 % 40).collect();
            let x = Tensor::from_vec(ids.clone(), [2, 16], &dev).unwrap();
            let y = Tensor::from_vec(ids.iter().map(|v| (v + 3) % 40).collect(), [2, 16], &dev)
                .unwrap();
            let logits = autocast(DType::BF16, || m.forward(&x));
            let loss = nn::functional::cross_entropy(
                &logits.cast(DType::F32).reshape([-1, 40]),
                &y.reshape([-1]),
            );
            loss.backward();
            m.params()
                .iter()
                .map(|p| p.grad().unwrap().to_vec::<f32>().unwrap())
                .collect::<Vec<_>>()
        };
        let (plain, ckpt) = (run(false), run(true));
        for (i, (a, b)) in plain.iter().zip(&ckpt).enumerate() {
            assert_close(b, a, 1e-5, 1e-7, &format!("gradient {i} on {}", dev.name()));
        }
    }
}
