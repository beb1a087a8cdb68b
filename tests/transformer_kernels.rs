//! Kernel counts of the transformer's fused ops on the GPU: layer norm is
//! one kernel forward (weight in its epilogue) and two backward (the
//! input's gradient, the weight's reduction); attention is three (scores
//! with scale and mask, softmax, the product with v).

mod common;

use lazywgpu::nn::functional::{layer_norm, scaled_dot_product_attention};
use lazywgpu::{Device, Tensor};

fn launches(dev: &Device) -> u64 {
    dev.metrics().counter("kernel_launches")
}

#[test]
fn layer_norm_is_one_kernel_forward_and_two_backward() {
    let Some(dev) = common::gpu() else { return };
    let x = Tensor::randn([12, 64, 128], &dev);
    x.requires_grad_(true);
    let w = Tensor::ones([128], &dev);
    w.requires_grad_(true);
    let r = Tensor::randn([12, 64, 128], &dev);
    dev.mark_step().unwrap();
    let before = launches(&dev);
    let y = layer_norm(&x, &[128], Some(&w), None, 1e-5);
    y.to_vec::<f32>().unwrap();
    assert_eq!(launches(&dev) - before, 1, "layer_norm forward");
    let before = launches(&dev);
    (&y * &r).sum_all().backward();
    let gx = x.grad().unwrap();
    let gw = w.grad().unwrap();
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    // The loss's sum is a reduction of its own.
    assert_eq!(
        launches(&dev) - before,
        3,
        "layer_norm backward and the loss"
    );
    assert_eq!(gx.shape(), x.shape());
    assert_eq!(gw.shape(), w.shape());
}

#[test]
fn causal_attention_is_three_kernels() {
    let Some(dev) = common::gpu() else { return };
    let q = Tensor::randn([12, 4, 64, 32], &dev);
    dev.mark_step().unwrap();
    let before = launches(&dev);
    let a = scaled_dot_product_attention(&q, &q, &q, None, true);
    a.to_vec::<f32>().unwrap();
    let kernels = launches(&dev) - before;
    assert_eq!(kernels, 3, "attention");
}
