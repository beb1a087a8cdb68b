//! Random convolutional programs run at changing batch and image sizes on
//! one device: each case is one program (convolutions with their biases,
//! depthwise convolutions, pooling, batch and group norm, resizing,
//! residual sums), its loss and the gradients of its parameters, run at
//! a random sequence of sizes, so the GPU device reuses, generalises and
//! recompiles its kernels as a vision model fed images of changing sizes
//! would. Every value read is checked against the CPU reference device
//! running the same program from the same data.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{data, gpu};
use lazywgpu::nn::functional as F;
use lazywgpu::{Device, InterpolateMode, Tensor};
use proptest::prelude::*;

/// One step of the program, applied to the running images `h`
/// ([batch, channels, height, width]).
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A convolution to `out` channels with a bias: kernel 1 or 3,
    /// stride 1 or 2, padding 0 or 1.
    Conv {
        out: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
    },
    /// A depthwise 3x3 convolution (one group a channel), padding 1.
    Depthwise,
    /// Max pooling: 2x2 stride 2, or 3x3 stride 1 padding 1.
    MaxPool(bool),
    /// 2x2 average pooling, stride 2.
    AvgPool,
    /// Adaptive average pooling to 2x2.
    Adaptive,
    /// Batch norm over the batch and the image, with a weight and bias.
    BatchNorm,
    /// Group norm with one group or one group a channel.
    GroupNorm(bool),
    /// ReLU, SiLU or tanh.
    Activation(u8),
    /// Nearest (false) or bilinear (true) resizing to twice the size.
    Upsample(bool),
    /// `h + conv1x1(h)`, a residual branch with its own weight.
    Residual,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            prop_oneof![Just(1usize), Just(2), Just(4)],
            prop_oneof![Just(1usize), Just(3)],
            1usize..=2,
            0usize..=1
        )
            .prop_map(|(out, kernel, stride, padding)| Step::Conv {
                out,
                kernel,
                stride,
                padding
            }),
        Just(Step::Depthwise),
        any::<bool>().prop_map(Step::MaxPool),
        Just(Step::AvgPool),
        Just(Step::Adaptive),
        Just(Step::BatchNorm),
        any::<bool>().prop_map(Step::GroupNorm),
        (0u8..3).prop_map(Step::Activation),
        any::<bool>().prop_map(Step::Upsample),
        Just(Step::Residual),
    ]
}

/// Image sides: small ones, odd ones, and sides either side of 32.
fn side() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(1usize),
        Just(2),
        Just(3),
        Just(5),
        Just(8),
        Just(13),
        Just(16),
        Just(31),
        Just(33)
    ]
}

/// A parameter of `shape` from fixed data, scaled by `scale`, requiring
/// its gradient.
fn param(shape: &[usize], seed: u64, scale: f32, dev: &Device) -> Tensor {
    let n = shape.iter().product();
    let v: Vec<f32> = data(n, seed).iter().map(|v| v * scale).collect();
    let t = Tensor::from_vec(v, shape.to_vec(), dev).unwrap();
    t.requires_grad_(true);
    t
}

/// The parameters of `steps` on images of `channels`, made on `dev`.
fn parameters(channels: usize, steps: &[Step], dev: &Device) -> Vec<Tensor> {
    let mut c = channels;
    let mut params = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let seed = 20 + 3 * i as u64;
        match *s {
            Step::Conv { out, kernel, .. } => {
                let scale = 1.0 / ((c * kernel * kernel) as f32).sqrt();
                params.push(param(&[out, c, kernel, kernel], seed, scale, dev));
                params.push(param(&[out], seed + 1, 0.1, dev));
                c = out;
            }
            Step::Depthwise => params.push(param(&[c, 1, 3, 3], seed, 1.0 / 3.0, dev)),
            Step::BatchNorm => {
                params.push(param(&[c], seed, 1.0, dev));
                params.push(param(&[c], seed + 1, 0.5, dev));
            }
            Step::Residual => {
                let scale = 1.0 / (c as f32).sqrt();
                params.push(param(&[c, c, 1, 1], seed, scale, dev));
            }
            _ => {}
        }
    }
    params
}

/// The program's output for the images `x`. A convolution the images are
/// too small for (a kernel past the padded side) pads them more; a pool
/// they are too small for is left out.
fn forward(x: &Tensor, steps: &[Step], params: &[Tensor]) -> Tensor {
    let mut h = x.clone();
    let mut next = params.iter();
    for s in steps {
        let (c, side) = (h.shape()[1], h.shape()[2].min(h.shape()[3]));
        h = match *s {
            Step::Conv {
                kernel,
                stride,
                padding,
                ..
            } => {
                let (w, b) = (next.next().expect("a weight"), next.next().expect("a bias"));
                // Images too small for the kernel are padded to it: the
                // step maps its channels as its parameters were made for.
                let padding = padding.max(kernel.saturating_sub(side).div_ceil(2));
                let (st, pad) = ((stride, stride), (padding, padding));
                F::conv2d(&h, w, Some(b), st, pad, (1, 1), 1)
            }
            Step::Depthwise => {
                let w = next.next().expect("a weight");
                F::conv2d(&h, w, None, (1, 1), (1, 1), (1, 1), c)
            }
            Step::MaxPool(halve) if halve && side >= 2 => F::max_pool2d(&h, (2, 2), (2, 2), (0, 0)),
            Step::MaxPool(halve) if !halve => F::max_pool2d(&h, (3, 3), (1, 1), (1, 1)),
            Step::AvgPool if side >= 2 => F::avg_pool2d(&h, (2, 2), (2, 2), (0, 0)),
            Step::Adaptive => F::adaptive_avg_pool2d(&h, (2, 2)),
            Step::BatchNorm => {
                let (w, b) = (next.next().expect("a weight"), next.next().expect("a bias"));
                F::batch_norm(&h, None, None, Some(w), Some(b), true, 0.1, 1e-5)
            }
            Step::GroupNorm(one) => F::group_norm(&h, if one { 1 } else { c }, None, None, 1e-5),
            Step::Activation(a) => match a {
                0 => h.relu(),
                1 => h.silu(),
                _ => h.tanh(),
            },
            Step::Upsample(bilinear) if side <= 32 => {
                let mode = if bilinear {
                    InterpolateMode::Bilinear
                } else {
                    InterpolateMode::Nearest
                };
                F::interpolate(&h, None, Some((2.0, 2.0)), mode, false)
            }
            Step::Residual => {
                let w = next.next().expect("a weight");
                &h + &F::conv2d(&h, w, None, (1, 1), (0, 0), (1, 1), 1)
            }
            _ => continue,
        };
    }
    h
}

/// Everything one size reads back on `dev`: the output, the loss and
/// each parameter's gradient.
fn run_at(
    (batch, channels, height, width): (usize, usize, usize, usize),
    steps: &[Step],
    params: &[Tensor],
    dev: &Device,
) -> Vec<(String, Vec<f32>)> {
    let shape = [batch, channels, height, width];
    let n = shape.iter().product();
    let seed = (batch * 1000 + height * 31 + width) as u64;
    let x = Tensor::from_vec(data(n, seed), shape, dev).unwrap();
    let out = forward(&x, steps, params);
    let loss = (&out * &out).mean_all();
    let mut read = vec![
        ("output".to_string(), out.to_vec::<f32>().unwrap()),
        ("loss".to_string(), loss.to_vec::<f32>().unwrap()),
    ];
    loss.backward();
    for (i, p) in params.iter().enumerate() {
        // A parameter of a step left out at these sizes has no gradient.
        if let Some(grad) = p.grad() {
            read.push((format!("gradient {i}"), grad.to_vec::<f32>().unwrap()));
        }
        p.set_grad(None);
    }
    dev.mark_step().unwrap();
    read
}

/// Runs the program (a residual branch, then `random_steps`) at each of
/// `sizes` (batch, height, width) on the GPU and on the CPU and compares
/// everything read.
fn check(channels: usize, random_steps: &[Step], sizes: &[(usize, usize, usize)]) {
    let Some(gpu) = gpu() else { return };
    // A residual branch first, so that every program has a gradient.
    let steps: Vec<Step> = std::iter::once(Step::Residual)
        .chain(random_steps.iter().copied())
        .collect();
    let steps = &steps[..];
    let cpu = Device::cpu();
    let (gpu_params, cpu_params) = (
        parameters(channels, steps, &gpu),
        parameters(channels, steps, &cpu),
    );
    for &(b, height, width) in sizes {
        let size = (b, channels, height, width);
        let got = run_at(size, steps, &gpu_params, &gpu);
        let want = run_at(size, steps, &cpu_params, &cpu);
        assert_eq!(got.len(), want.len(), "{size:?}: gradients read");
        for ((what, g), (_, w)) in got.iter().zip(&want) {
            let scale = w.iter().fold(1.0f32, |m, v| m.max(v.abs()));
            common::assert_close(
                g,
                w,
                2e-3,
                2e-4 * scale,
                &format!("size {size:?} of {sizes:?}, {what}, steps {steps:?}"),
            );
        }
    }
}

proptest! {
    // `PROPTEST_CASES` sets a longer run from a random seed.
    #![proptest_config(common::proptest_config(10))]

    #[test]
    fn random_convolutional_programs_at_changing_sizes_match_the_cpu(
        channels in prop_oneof![Just(1usize), Just(3), Just(4)],
        steps in prop::collection::vec(step(), 1..=5),
        sizes in prop::collection::vec((1usize..=5, side(), side()), 2..=4),
    ) {
        check(channels, &steps, &sizes);
    }
}
