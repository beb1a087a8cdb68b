//! Sizes that change between steps (a training set's last, shorter batch;
//! an evaluation at another batch size) reuse the kernels compiled for
//! the first two sizes: each kernel is compiled once generic over the
//! literals that changed, and later sizes only bind new values.

mod common;

use lazywgpu::nn::{self, Module};
use lazywgpu::optim::{Optimizer, Sgd};
use lazywgpu::{DType, Device, Tensor};

/// Per step, the loss of an MLP (784-64-10, ReLU, cross-entropy, SGD)
/// trained on batches of `sizes`, with the same data on every device.
fn train(dev: &Device, sizes: &[usize]) -> Vec<f32> {
    dev.manual_seed(7);
    let model = nn::Sequential::new()
        .add(nn::Linear::new(784, 64, dev))
        .add(nn::ReLU)
        .add(nn::Linear::new(64, 10, dev));
    let mut opt = Sgd::new(model.parameters(), 0.05);
    let mut losses = Vec::new();
    for &batch in sizes {
        let pixels: Vec<f32> = (0..batch * 784)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
            .collect();
        let labels: Vec<i32> = (0..batch).map(|i| (i * 3 % 10) as i32).collect();
        let x = Tensor::from_vec(pixels, [batch, 784], dev).unwrap();
        let y = Tensor::from_vec(labels, [batch], dev).unwrap();
        assert_eq!(y.dtype(), DType::I32);
        opt.zero_grad();
        let loss = nn::functional::cross_entropy(&model.forward(&x), &y);
        loss.backward();
        opt.step();
        dev.mark_step().unwrap();
        losses.push(loss.item::<f32>().unwrap());
    }
    losses
}

/// Trains on `sizes` on the GPU and on the CPU reference, checks the
/// losses agree, and returns the GPU's metrics (`None` without an adapter).
fn train_checked(sizes: &[usize]) -> Option<lazywgpu::MetricsSnapshot> {
    let gpu = common::gpu()?;
    let got = train(&gpu, sizes);
    let want = train(&Device::cpu(), sizes);
    common::assert_close(&got, &want, 1e-3, 1e-4, "losses");
    Some(gpu.metrics())
}

#[test]
fn batch_sizes_after_the_second_compile_nothing_and_train_the_same() {
    // 64 twice (the first step computes the initial weights too: warm-up),
    // then 50 (the second distinct size: kernels generic over it), then
    // sizes that keep every kernel's strategy.
    let Some(m) = train_checked(&[64, 64, 50, 33, 40, 47, 64]) else {
        return;
    };
    assert_eq!(m.counter("graphs_compiled"), 3, "{m}");
    assert_eq!(m.counter("graphs_specialized"), 3, "33, 40 and 47: {m}");
    assert_eq!(m.counter("recompiles"), 1, "{m}");
}

#[test]
fn a_size_that_changes_a_kernel_strategy_compiles_and_stays_right() {
    // The loss sums 10 log-probabilities a row: below 256 elements (batch
    // 17: 170) one invocation replaces a workgroup tree, so 17 compiles that
    // kernel for its size; 33, back across the threshold, compiles it
    // again for its size (generic forms are made against the site's last
    // graph, 17, where that kernel differs), 40 compiles its generic form,
    // and 47 finds every kernel generic.
    let Some(m) = train_checked(&[64, 64, 50, 17, 33, 40, 47]) else {
        return;
    };
    assert_eq!(m.counter("graphs_compiled"), 6, "{m}");
    assert_eq!(m.counter("graphs_specialized"), 1, "{m}");
}
