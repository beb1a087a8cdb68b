//! Random decoder programs run at changing batch sizes and sequence
//! lengths on one device: each case is one program (an embedding, then
//! random blocks of causal or full attention, a GELU MLP, layer and RMS
//! norms, residual sums, then logits and a cross-entropy loss) and the
//! gradients of its parameters, run at a random sequence of (batch,
//! length) pairs, the lengths marked dynamic or not, with the three-kernel
//! attention or the fused one. Every value read is checked against the
//! CPU reference device running the same program from the same data.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::data;
use lazywgpu::nn::functional as F;
use lazywgpu::{DType, Device, DeviceConfig, Tensor};
use proptest::prelude::*;

/// The model width, its heads and the vocabulary.
const WIDTH: usize = 8;
const HEADS: usize = 2;
const VOCAB: usize = 37;

/// One block of the program, applied to the running `h` ([batch,
/// length, WIDTH]).
#[derive(Clone, Copy, Debug)]
enum Block {
    /// `h + attention(norm(h))`, causal or not, its three projections
    /// parameters.
    Attention { causal: bool },
    /// `h + w2 gelu(w1 norm(h))`.
    Mlp,
    /// Layer norm (false) or RMS norm with a weight (true).
    Norm(bool),
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        any::<bool>().prop_map(|causal| Block::Attention { causal }),
        Just(Block::Mlp),
        any::<bool>().prop_map(Block::Norm),
    ]
}

/// A parameter of `shape` from fixed data, scaled by `scale`.
fn param(shape: &[usize], seed: u64, scale: f32, dev: &Device) -> Tensor {
    let n = shape.iter().product();
    let v: Vec<f32> = data(n, seed).iter().map(|v| v * scale).collect();
    let t = Tensor::from_vec(v, shape.to_vec(), dev).unwrap();
    t.requires_grad_(true);
    t
}

/// The embedding, each block's parameters in order, and the output
/// projection.
fn parameters(blocks: &[Block], dev: &Device) -> Vec<Tensor> {
    let scale = 1.0 / (WIDTH as f32).sqrt();
    let mut params = vec![param(&[VOCAB, WIDTH], 1, 1.0, dev)];
    for (i, b) in blocks.iter().enumerate() {
        let seed = 10 + 5 * i as u64;
        match b {
            Block::Attention { .. } => {
                for j in 0..3 {
                    params.push(param(&[WIDTH, WIDTH], seed + j, scale, dev));
                }
            }
            Block::Mlp => {
                params.push(param(&[WIDTH, 2 * WIDTH], seed, scale, dev));
                params.push(param(&[2 * WIDTH, WIDTH], seed + 1, scale / 2.0, dev));
            }
            Block::Norm(true) => params.push(param(&[WIDTH], seed, 1.0, dev)),
            Block::Norm(false) => {}
        }
    }
    params.push(param(&[WIDTH, VOCAB], 99, scale, dev));
    params
}

/// The heads of `x` ([b, t, WIDTH]) as [b, HEADS, t, WIDTH / HEADS].
fn heads(x: &Tensor) -> Tensor {
    let (b, t) = (x.shape()[0] as isize, x.shape()[1] as isize);
    x.reshape([b, t, HEADS as isize, (WIDTH / HEADS) as isize])
        .transpose(1, 2)
}

/// The program's loss and logits for the token ids `ids` ([b, t]) and
/// next tokens `targets` ([b * t]).
fn forward(
    ids: &Tensor,
    targets: &Tensor,
    blocks: &[Block],
    params: &[Tensor],
) -> (Tensor, Tensor) {
    let (b, t) = (ids.shape()[0] as isize, ids.shape()[1] as isize);
    let mut next = params.iter();
    let mut h = F::embedding(ids, next.next().expect("the embedding"));
    for block in blocks {
        h = match *block {
            Block::Attention { causal } => {
                let x = F::layer_norm(&h, &[WIDTH], None, None, 1e-5);
                let (q, k, v) = (
                    heads(&x.matmul(next.next().expect("wq"))),
                    heads(&x.matmul(next.next().expect("wk"))),
                    heads(&x.matmul(next.next().expect("wv"))),
                );
                let a = F::scaled_dot_product_attention(&q, &k, &v, None, causal);
                &h + &a.transpose(1, 2).reshape([b, t, WIDTH as isize])
            }
            Block::Mlp => {
                let x = F::layer_norm(&h, &[WIDTH], None, None, 1e-5);
                let up = x.matmul(next.next().expect("w1")).gelu();
                &h + &up.matmul(next.next().expect("w2"))
            }
            Block::Norm(false) => F::layer_norm(&h, &[WIDTH], None, None, 1e-5),
            Block::Norm(true) => {
                F::rms_norm(&h, &[WIDTH], Some(next.next().expect("a weight")), None)
            }
        };
    }
    let logits = h
        .matmul(next.next().expect("the output projection"))
        .reshape([b * t, VOCAB as isize]);
    (F::cross_entropy(&logits, targets), logits)
}

/// Everything one size reads back on `dev`.
fn run_at(
    (batch, length, marked): (usize, usize, bool),
    blocks: &[Block],
    params: &[Tensor],
    dev: &Device,
) -> Vec<(String, Vec<f32>)> {
    let n = batch * length;
    let token = |e: usize, shift: usize| ((e * 7 + shift + length) % VOCAB) as i32;
    let ids: Vec<i32> = (0..n).map(|e| token(e, 0)).collect();
    let targets: Vec<i32> = (0..n).map(|e| token(e, 1)).collect();
    let mut ids = Tensor::from_vec(ids, [batch, length], dev).unwrap();
    if marked {
        ids = ids.mark_dynamic(1);
    }
    let targets = Tensor::from_vec(targets, [n], dev)
        .unwrap()
        .cast(DType::I64);
    let (loss, logits) = forward(&ids, &targets, blocks, params);
    let mut read = vec![
        ("logits".to_string(), logits.to_vec::<f32>().unwrap()),
        ("loss".to_string(), loss.to_vec::<f32>().unwrap()),
    ];
    loss.backward();
    for (i, p) in params.iter().enumerate() {
        let grad = p.grad().expect("every parameter is used");
        read.push((format!("gradient {i}"), grad.to_vec::<f32>().unwrap()));
        p.set_grad(None);
    }
    dev.mark_step().unwrap();
    read
}

fn check(blocks: &[Block], sizes: &[(usize, usize)], marked: bool, fused: bool) {
    let config = DeviceConfig {
        fused_attention: fused,
        ..DeviceConfig::from_env()
    };
    let gpu = match Device::gpu_with(config) {
        Ok(dev) => dev,
        Err(e) => {
            let required = std::env::var("LAZYWGPU_REQUIRE_GPU").is_ok_and(|v| v == "1");
            assert!(!required, "LAZYWGPU_REQUIRE_GPU=1 but no GPU adapter: {e}");
            eprintln!("skipping GPU test: {e}");
            return;
        }
    };
    let cpu = Device::cpu();
    let (gpu_params, cpu_params) = (parameters(blocks, &gpu), parameters(blocks, &cpu));
    for &(b, t) in sizes {
        let got = run_at((b, t, marked), blocks, &gpu_params, &gpu);
        let want = run_at((b, t, marked), blocks, &cpu_params, &cpu);
        for ((what, g), (_, w)) in got.iter().zip(&want) {
            let scale = w.iter().fold(1.0f32, |m, v| m.max(v.abs()));
            common::assert_close(
                g,
                w,
                2e-3,
                2e-4 * scale,
                &format!(
                    "batch {b}, length {t} of {sizes:?} (marked {marked}, fused {fused}), {what}, blocks {blocks:?}"
                ),
            );
        }
    }
}

/// Sequence lengths: one, small primes, powers of two and one past them.
fn length() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(1usize),
        Just(2),
        Just(5),
        Just(8),
        Just(17),
        Just(32),
        Just(33),
        Just(64),
        Just(65),
        Just(130)
    ]
}

proptest! {
    // `PROPTEST_CASES` sets a longer run from a random seed.
    #![proptest_config(common::proptest_config(6))]

    #[test]
    fn random_decoders_at_changing_lengths_match_the_cpu(
        blocks in prop::collection::vec(block(), 1..=4),
        sizes in prop::collection::vec((1usize..=3, length()), 2..=5),
        marked in any::<bool>(),
        fused in any::<bool>(),
    ) {
        check(&blocks, &sizes, marked, fused);
    }
}
