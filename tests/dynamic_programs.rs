//! Random programs run at changing sizes on one device: each case is one
//! program (a chain of random steps over a batch of rows, its loss, the
//! gradients of its parameters and an in-place SGD update of them), run
//! at a random sequence of batch sizes (1, primes, multiples of four,
//! sizes past the strategy thresholds, now and then a batch past
//! lavapipe's 65,535-iteration loop limit). Every size goes through the
//! same trace sites, so the GPU device reuses, generalises and recompiles
//! its kernels as a training loop with a changing batch would; every
//! value read (the output, the loss, each gradient, each updated
//! parameter) is checked against the CPU reference device running the
//! same program from the same data, and the output also against the
//! program evaluated in f64 here (`oracle`). Argmax is not among the steps: rows
//! whose values are equal in exact arithmetic (as the test's data make
//! them) pick their index by rounding, on either device.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{data, gpu};
use lazywgpu::nn::functional as F;
use lazywgpu::{Device, Tensor};
use proptest::prelude::*;

/// One step of the program, applied to the running rows `h` ([batch, k]).
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A bounded elementwise op (relu, tanh, sigmoid, sin, abs, gelu, x/2).
    Unary(u8),
    /// `h + bias`, a parameter of shape [k].
    Bias,
    /// `h @ w`, a parameter of shape [k, width].
    Linear(usize),
    /// Softmax along the row.
    Softmax,
    /// Log-softmax along the row.
    LogSoftmax,
    /// `h - r(h)` with r a row reduction kept as a column (`reduce`).
    RowCenter(u8),
    /// `h - r(h)` with r a reduction over the batch kept as a row: the
    /// reduced dimension is the one that changes.
    BatchCenter(u8),
    /// `(h^T * 2)^T`: a transposed view through an elementwise op.
    Transposed,
    /// Every second column (a strided view), where there are two.
    EveryOtherColumn,
    /// `cat([h, h / 2], 1)`.
    CatHalf,
    /// Layer norm over the row.
    LayerNorm,
    /// Every second row (the batch halves, rounded up).
    EveryOtherRow,
    /// A running sum along the row (false) or down the batch (true),
    /// divided by its length.
    Cumsum(bool),
    /// The row sorted, descending or not.
    Sort(bool),
    /// The three largest of each row (fewer where the row is shorter).
    TopThree,
    /// The rows (false) or the batch (true) reversed, by `flip`.
    Flip(bool),
    /// The row's columns in reverse, picked by `index_select`.
    ReverseColumns,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..7).prop_map(Step::Unary),
        Just(Step::Bias),
        prop_oneof![Just(1usize), Just(3), Just(4), Just(8), Just(17)].prop_map(Step::Linear),
        Just(Step::Softmax),
        Just(Step::LogSoftmax),
        (0u8..4).prop_map(Step::RowCenter),
        (0u8..4).prop_map(Step::BatchCenter),
        Just(Step::Transposed),
        Just(Step::EveryOtherColumn),
        Just(Step::CatHalf),
        Just(Step::LayerNorm),
        Just(Step::EveryOtherRow),
        any::<bool>().prop_map(Step::Cumsum),
        any::<bool>().prop_map(Step::Sort),
        Just(Step::TopThree),
        any::<bool>().prop_map(Step::Flip),
        Just(Step::ReverseColumns),
    ]
}

/// Batch sizes: small ones, primes, multiples of four, and sizes either
/// side of thresholds (tiles of 32 and 64 rows, 256-wide workgroups).
fn batch() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => prop_oneof![
            Just(1usize), Just(2), Just(3), Just(4), Just(5), Just(7), Just(8), Just(13),
            Just(16), Just(17), Just(31), Just(32), Just(33), Just(50), Just(64), Just(65),
            Just(97), Just(128), Just(255), Just(257), Just(1000), Just(1031),
        ],
        1 => Just(70_001usize),
    ]
}

/// The parameters of a program of `steps` over rows of `width`, made on
/// `dev` from fixed data (so both devices start from the same values).
fn parameters(width: usize, steps: &[Step], dev: &Device) -> Vec<Tensor> {
    let mut k = width;
    let mut params = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let seed = 10 + i as u64;
        match *s {
            Step::Bias => params.push(Tensor::from_vec(data(k, seed), [k], dev).unwrap()),
            Step::Linear(out) => {
                let scaled: Vec<f32> = data(k * out, seed)
                    .iter()
                    .map(|v| v / (k as f32).sqrt())
                    .collect();
                params.push(Tensor::from_vec(scaled, [k, out], dev).unwrap());
                k = out;
            }
            Step::EveryOtherColumn if k >= 2 => k = k.div_ceil(2),
            Step::CatHalf => k *= 2,
            Step::TopThree => k = k.min(3),
            _ => {}
        }
    }
    for p in &params {
        p.requires_grad_(true);
    }
    params
}

/// The program's output for the rows `x`.
fn forward(x: &Tensor, steps: &[Step], params: &[Tensor]) -> Tensor {
    let mut h = x.clone();
    let mut next = params.iter();
    for s in steps {
        let k = h.shape()[1];
        h = match *s {
            Step::Unary(op) => match op {
                0 => h.relu(),
                1 => h.tanh(),
                2 => h.sigmoid(),
                3 => h.sin(),
                4 => h.abs(),
                5 => h.gelu(),
                _ => &h * 0.5,
            },
            Step::Bias => &h + next.next().expect("a bias"),
            Step::Linear(_) => h.matmul(next.next().expect("a weight")),
            Step::Softmax => h.softmax(1),
            Step::LogSoftmax => h.log_softmax(1),
            Step::RowCenter(r) => &h - &reduce(&h, 1, r),
            Step::BatchCenter(r) => &h - &reduce(&h, 0, r),
            Step::Transposed => (&h.t() * 2.0).t(),
            Step::EveryOtherColumn if k >= 2 => h.slice(1, 0, k, 2),
            Step::EveryOtherColumn => h,
            Step::CatHalf => Tensor::cat(&[&h, &(&h / 2.0)], 1),
            Step::LayerNorm => F::layer_norm(&h, &[k], None, None, 1e-5),
            Step::EveryOtherRow => {
                let b = h.shape()[0];
                h.slice(0, 0, b, 2)
            }
            Step::Cumsum(down) => {
                // Divided by the count, as `reduce` does, so that later
                // sums stay of the values' size.
                let axis = usize::from(!down);
                &h.cumsum(axis as isize) / h.shape()[axis] as f32
            }
            Step::Sort(descending) => h.sort(1, descending).0,
            Step::TopThree => h.topk(k.min(3), 1, true).0,
            Step::Flip(down) => h.flip([if down { 0 } else { 1 }]),
            Step::ReverseColumns => {
                let reversed: Vec<i32> = (0..k as i32).rev().collect();
                h.index_select(1, &Tensor::from_vec(reversed, [k], h.device()).unwrap())
            }
        };
    }
    h
}

/// A sum (divided by the count, so that centring by it does not cancel
/// away more digits than the f32 sum keeps), mean, max or logsumexp of
/// `h` along `axis`, kept as a dimension of one.
fn reduce(h: &Tensor, axis: isize, which: u8) -> Tensor {
    let count = h.shape()[axis as usize] as f32;
    match which {
        0 => &h.sum([axis], true) / count,
        1 => h.mean([axis], true),
        2 => h.max([axis], true),
        _ => h.logsumexp([axis], true),
    }
}

/// The input rows at one size: fixed data, other at each size.
fn input(batch: usize, width: usize) -> Vec<f32> {
    data(batch * width, (batch * 31 + width) as u64)
}

/// Everything one size reads back on `dev`: the output, the loss, each
/// parameter's gradient and each parameter after an SGD step taken in
/// place.
fn run_at(
    (batch, width, marked): (usize, usize, bool),
    steps: &[Step],
    params: &[Tensor],
    dev: &Device,
) -> Vec<(String, Vec<f32>)> {
    let mut x = Tensor::from_vec(input(batch, width), [batch, width], dev).unwrap();
    if marked {
        x = x.mark_dynamic(0);
    }
    let out = forward(&x, steps, params);
    let loss = (&out * &out).mean_all();
    loss.backward();
    let mut read = vec![
        ("output".to_string(), out.to_vec::<f32>().unwrap()),
        ("loss".to_string(), loss.to_vec::<f32>().unwrap()),
    ];
    for (i, p) in params.iter().enumerate() {
        let grad = p.grad().expect("every parameter is used");
        read.push((format!("gradient {i}"), grad.to_vec::<f32>().unwrap()));
        lazywgpu::no_grad(|| p.sub_(&(&grad * 0.01)));
        p.set_grad(None);
        read.push((format!("parameter {i}"), p.to_vec::<f32>().unwrap()));
    }
    dev.mark_step().unwrap();
    read
}

/// Runs the program (a bias, then `random_steps`) at each of `sizes`
/// (batch, width) on the GPU and on the CPU, with the batch marked
/// dynamic where `marked`, and compares everything read. Parameters are
/// kept (and updated) across sizes of one width, made again for another.
fn check(random_steps: &[Step], sizes: &[(usize, usize)], marked: bool) {
    let Some(gpu) = gpu() else { return };
    // A bias first, so that every program has a gradient to take.
    let steps: Vec<Step> = std::iter::once(Step::Bias)
        .chain(random_steps.iter().copied())
        .collect();
    let cpu = Device::cpu();
    let mut params: Option<(usize, Vec<Tensor>, Vec<Tensor>)> = None;
    for &(b, width) in sizes {
        if params.as_ref().is_none_or(|p| p.0 != width) {
            let made = |dev: &Device| parameters(width, &steps, dev);
            params = Some((width, made(&gpu), made(&cpu)));
        }
        let (_, gpu_params, cpu_params) = params.as_ref().expect("made above");
        // The f64 oracle of the output, from the CPU's parameters before
        // this size's update.
        let values: Vec<Vec<f32>> = cpu_params.iter().map(|p| p.to_vec().unwrap()).collect();
        let exact: Vec<f32> = oracle(&input(b, width), width, &steps, &values)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let got = run_at((b, width, marked), &steps, gpu_params, &gpu);
        let want = run_at((b, width, marked), &steps, cpu_params, &cpu);
        let compared = std::iter::once(("output against f64", &got[0].1, &exact))
            .chain((got.iter().zip(&want)).map(|((what, g), (_, w))| (what.as_str(), g, w)));
        for (what, g, w) in compared {
            // Sums over up to 70,001 rows in another order: a tolerance
            // relative to the largest value read.
            let scale = w.iter().fold(1.0f32, |m, v| m.max(v.abs()));
            common::assert_close(
                g,
                w,
                2e-3,
                2e-4 * scale,
                &format!(
                    "size {b} x {width} of {sizes:?} (marked: {marked}), {what}, steps {steps:?}"
                ),
            );
        }
    }
}

/// The program's output in f64, from the rows of `x` (`batch` rows of
/// `width`) and the parameters' values (`params`, row-major), written
/// here from the ops' definitions.
fn oracle(x: &[f32], width: usize, steps: &[Step], params: &[Vec<f32>]) -> Vec<f64> {
    let mut h: Vec<Vec<f64>> = x
        .chunks(width)
        .map(|r| r.iter().map(|&v| v as f64).collect())
        .collect();
    let mut next = params.iter();
    for s in steps {
        let k = h[0].len();
        let each_row = |h: &[Vec<f64>], f: &dyn Fn(&[f64]) -> Vec<f64>| -> Vec<Vec<f64>> {
            h.iter().map(|r| f(r)).collect()
        };
        h = match *s {
            Step::Unary(op) => each_row(&h, &|r| {
                r.iter()
                    .map(|&v| match op {
                        0 => v.max(0.0),
                        1 => v.tanh(),
                        2 => 1.0 / (1.0 + (-v).exp()),
                        3 => v.sin(),
                        4 => v.abs(),
                        5 => 0.5 * v * (1.0 + libm::erf(v / std::f64::consts::SQRT_2)),
                        _ => v * 0.5,
                    })
                    .collect()
            }),
            Step::Bias => {
                let b = next.next().expect("a bias");
                each_row(&h, &|r| {
                    r.iter().zip(b).map(|(v, &b)| v + b as f64).collect()
                })
            }
            Step::Linear(out) => {
                let w = next.next().expect("a weight");
                each_row(&h, &|r| {
                    (0..out)
                        .map(|j| (0..k).map(|i| r[i] * w[i * out + j] as f64).sum())
                        .collect()
                })
            }
            Step::Softmax | Step::LogSoftmax => {
                let log = matches!(s, Step::LogSoftmax);
                each_row(&h, &|r| {
                    let lse = row_reduce(r, 3);
                    r.iter()
                        .map(|v| if log { v - lse } else { (v - lse).exp() })
                        .collect()
                })
            }
            Step::RowCenter(which) => each_row(&h, &|r| {
                let c = row_reduce(r, which);
                r.iter().map(|v| v - c).collect()
            }),
            Step::BatchCenter(which) => {
                let c: Vec<f64> = (0..k)
                    .map(|j| row_reduce(&h.iter().map(|r| r[j]).collect::<Vec<_>>(), which))
                    .collect();
                each_row(&h, &|r| r.iter().zip(&c).map(|(v, c)| v - c).collect())
            }
            Step::Transposed => each_row(&h, &|r| r.iter().map(|v| v * 2.0).collect()),
            Step::EveryOtherColumn if k >= 2 => {
                each_row(&h, &|r| r.iter().step_by(2).copied().collect())
            }
            Step::EveryOtherColumn => h,
            Step::CatHalf => each_row(&h, &|r| {
                r.iter().copied().chain(r.iter().map(|v| v / 2.0)).collect()
            }),
            Step::LayerNorm => each_row(&h, &|r| {
                let mean = r.iter().sum::<f64>() / k as f64;
                let var = r.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / k as f64;
                r.iter().map(|v| (v - mean) / (var + 1e-5).sqrt()).collect()
            }),
            Step::EveryOtherRow => h.iter().step_by(2).cloned().collect(),
            Step::Cumsum(false) => each_row(&h, &|r| {
                r.iter()
                    .scan(0.0, |sum, v| {
                        *sum += v;
                        Some(*sum / k as f64)
                    })
                    .collect()
            }),
            Step::Cumsum(true) => {
                let b = h.len() as f64;
                let mut sum = vec![0.0; k];
                h.iter()
                    .map(|r| {
                        (sum.iter_mut().zip(r))
                            .map(|(s, v)| {
                                *s += v;
                                *s / b
                            })
                            .collect()
                    })
                    .collect()
            }
            Step::Sort(descending) => each_row(&h, &|r| {
                let mut sorted = r.to_vec();
                sorted.sort_by(|a, b| a.total_cmp(b));
                if descending {
                    sorted.reverse();
                }
                sorted
            }),
            Step::TopThree => each_row(&h, &|r| {
                let mut sorted = r.to_vec();
                sorted.sort_by(|a, b| b.total_cmp(a));
                sorted.truncate(3);
                sorted
            }),
            Step::Flip(true) => h.iter().rev().cloned().collect(),
            Step::Flip(false) | Step::ReverseColumns => {
                each_row(&h, &|r| r.iter().rev().copied().collect())
            }
        };
    }
    h.concat()
}

/// `reduce`'s f64 counterpart over one line of values.
fn row_reduce(r: &[f64], which: u8) -> f64 {
    let n = r.len() as f64;
    let max = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match which {
        0 | 1 => r.iter().sum::<f64>() / n,
        2 => max,
        _ => max + r.iter().map(|v| (v - max).exp()).sum::<f64>().ln(),
    }
}

/// Row lengths: the reduced dimension of row reductions, softmax and
/// layer norm, and the inner dimension of the first matmul.
fn width() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => prop_oneof![
            Just(1usize), Just(2), Just(3), Just(4), Just(5), Just(8), Just(13), Just(17),
            Just(64), Just(100), Just(257), Just(1031), Just(4099),
        ],
        1 => Just(70_001usize),
    ]
}

proptest! {
    // `PROPTEST_CASES` sets a longer run from a random seed.
    #![proptest_config(common::proptest_config(16))]

    #[test]
    fn random_programs_at_changing_batch_sizes_match_the_cpu(
        width in prop_oneof![Just(1usize), Just(3), Just(4), Just(8), Just(17)],
        steps in prop::collection::vec(step(), 1..=6),
        batches in prop::collection::vec(batch(), 3..=6),
        marked in any::<bool>(),
    ) {
        let sizes: Vec<(usize, usize)> = batches.iter().map(|&b| (b, width)).collect();
        check(&steps, &sizes, marked);
    }

    #[test]
    fn random_programs_at_changing_row_lengths_match_the_cpu(
        batch in prop_oneof![Just(1usize), Just(2), Just(5), Just(8)],
        steps in prop::collection::vec(step(), 1..=6),
        widths in prop::collection::vec(width(), 3..=5),
    ) {
        let sizes: Vec<(usize, usize)> = widths.iter().map(|&w| (batch, w)).collect();
        check(&steps, &sizes, false);
    }
}
