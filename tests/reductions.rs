//! Reductions, softmax and matmul: GPU against the CPU reference and both
//! against f64 loops written here, over random shapes, axes, views and
//! prologues; plus kernel counts for the fusion patterns.
//!
//! Tolerances (f32): sums and matmuls rtol 1e-4 / atol 1e-4·√n (the GPU
//! adds in f32 in another order than the f64 oracle); max/min/argmax are
//! exact; softmax rtol 1e-4.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, devices, gpu};
use lazywgpu::{Device, Tensor};
use proptest::prelude::*;

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(2862933555777941757)
        .wrapping_add(3037000493);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(2862933555777941757).wrapping_add(3037000493);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// f64 reduction over `axes` of row-major `x` (`shape`); results in
/// row-major order of the kept dims, each from the list of its elements.
fn oracle(x: &[f32], shape: &[usize], axes: &[usize], f: &dyn Fn(&[f64]) -> f64) -> Vec<f64> {
    let rank = shape.len();
    let kept: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let out_n: usize = kept.iter().map(|&d| shape[d]).product();
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); out_n];
    let n: usize = shape.iter().product();
    for (lin, &v) in x.iter().enumerate().take(n) {
        let mut rem = lin;
        let mut coords = vec![0; rank];
        for d in (0..rank).rev() {
            coords[d] = rem % shape[d];
            rem /= shape[d];
        }
        let mut o = 0;
        for &d in &kept {
            o = o * shape[d] + coords[d];
        }
        groups[o].push(v as f64);
    }
    groups.iter().map(|g| f(g)).collect()
}

fn shape_and_axes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, bool)> {
    prop::collection::vec(prop_oneof![Just(1usize), 2usize..7, Just(300usize)], 1..=4)
        .prop_flat_map(|shape| {
            let rank = shape.len();
            (
                Just(shape),
                prop::collection::vec(any::<bool>(), rank),
                any::<bool>(),
            )
                .prop_map(|(shape, pick, keep)| {
                    let mut axes: Vec<usize> = (0..shape.len()).filter(|&d| pick[d]).collect();
                    if axes.is_empty() {
                        axes.push(shape.len() - 1);
                    }
                    // Keep tensors small enough for quick cases.
                    let mut shape = shape;
                    while shape.iter().product::<usize>() > 40_000 {
                        let big = shape.iter().position(|&d| d == 300).unwrap_or(0);
                        shape[big] = 7;
                    }
                    (shape, axes, keep)
                })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn reductions_match_f64((shape, axes, keepdim) in shape_and_axes(), op in 0usize..7, transposed in any::<bool>()) {
        let n: usize = shape.iter().product();
        let x = data(n, n as u64 + op as u64);
        let sqrt_n = (n as f32).sqrt();
        let dims: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
        type F = fn(&[f64]) -> f64;
        let (f, rtol, atol): (F, f32, f32) = match op {
            0 => (|g| g.iter().map(|v| (v * 0.5).tanh()).sum(), 1e-4, 1e-4 * sqrt_n),
            1 => (|g| g.iter().cloned().fold(f64::NEG_INFINITY, f64::max), 0.0, 0.0),
            2 => (|g| g.iter().cloned().fold(f64::INFINITY, f64::min), 0.0, 0.0),
            3 => (|g| g.iter().sum::<f64>() / g.len() as f64, 1e-4, 1e-4),
            4 => (|g| { let m = g.iter().sum::<f64>() / g.len() as f64; g.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (g.len() as f64 - 1.0) }, 1e-3, 1e-4),
            5 => (|g| { let m = g.iter().cloned().fold(f64::NEG_INFINITY, f64::max); m + g.iter().map(|v| (v - m).exp()).sum::<f64>().ln() }, 1e-4, 1e-4),
            _ => (|g| g.iter().map(|v| 1.0 + v * 0.01).product(), 1e-4, 1e-5),
        };
        let reduced: usize = axes.iter().map(|&a| shape[a]).product();
        if op == 4 && reduced < 2 {
            return Ok(());
        }
        let expected: Vec<f32> = oracle(&x, &shape, &axes, &f).into_iter().map(|v| v as f32).collect();
        for dev in devices() {
            // The input is optionally a transposed view of stored data.
            let t = if transposed && shape.len() >= 2 {
                let r = shape.len();
                let mut stored = shape.clone();
                stored.swap(r - 1, r - 2);
                let mut sx = vec![0.0; n];
                let inner = shape[r - 1];
                let rows = shape[r - 2];
                for (lin, slot) in sx.iter_mut().enumerate() {
                    // stored [.., inner, rows] row-major; value = x at [.., row, col]
                    let col = lin / rows % inner;
                    let row = lin % rows;
                    let outer = lin / (rows * inner);
                    *slot = x[(outer * rows + row) * inner + col];
                }
                Tensor::from_vec(sx, stored, &dev).unwrap().transpose(-1, -2)
            } else {
                Tensor::from_vec(x.clone(), shape.clone(), &dev).unwrap()
            };
            let out = match op {
                0 => (&t * 0.5).tanh().sum(dims.clone(), keepdim),
                1 => t.max(dims.clone(), keepdim),
                2 => t.min(dims.clone(), keepdim),
                3 => t.mean(dims.clone(), keepdim),
                4 => t.var(dims.clone(), 1, keepdim),
                5 => t.logsumexp(dims.clone(), keepdim),
                _ => (&t * 0.01 + 1.0).prod(dims.clone(), keepdim),
            };
            let expected_shape: Vec<usize> = shape.iter().enumerate()
                .filter_map(|(d, &s)| if axes.contains(&d) { keepdim.then_some(1) } else { Some(s) })
                .collect();
            prop_assert_eq!(out.shape(), &expected_shape[..]);
            let got = out.to_vec::<f32>().unwrap();
            assert_close(&got, &expected, rtol, atol, &format!("op {op} shape {shape:?} axes {axes:?} on {dev:?}"));
        }
    }

    #[test]
    fn argmax_argmin_match_f64(shape in prop::collection::vec(1usize..6, 1..=3), axis_pick in 0usize..3) {
        let n: usize = shape.iter().product();
        // Few distinct values, so ties occur and the first index must win.
        let x: Vec<f32> = data(n, 7).iter().map(|v| (v * 2.0).round()).collect();
        let axis = axis_pick % shape.len();
        let first = |g: &[f64], better: &dyn Fn(f64, f64) -> bool| {
            let mut best = 0;
            for (i, &v) in g.iter().enumerate() {
                if better(v, g[best]) { best = i; }
            }
            best as i32
        };
        let emax: Vec<i32> = oracle(&x, &shape, &[axis], &|g| first(g, &|a, b| a > b) as f64).into_iter().map(|v| v as i32).collect();
        let emin: Vec<i32> = oracle(&x, &shape, &[axis], &|g| first(g, &|a, b| a < b) as f64).into_iter().map(|v| v as i32).collect();
        for dev in devices() {
            let t = Tensor::from_vec(x.clone(), shape.clone(), &dev).unwrap();
            prop_assert_eq!(t.argmax(axis as isize, false).to_vec::<i32>().unwrap(), emax.clone());
            prop_assert_eq!(t.argmin(axis as isize, false).to_vec::<i32>().unwrap(), emin.clone());
        }
    }

    #[test]
    fn softmax_matches_f64(shape in prop::collection::vec(1usize..40, 1..=3), axis_pick in 0usize..3, log in any::<bool>()) {
        let n: usize = shape.iter().product();
        let x: Vec<f32> = data(n, 11).iter().map(|v| v * 5.0).collect();
        let axis = axis_pick % shape.len();
        let rank = shape.len();
        let inner: usize = shape[axis + 1..].iter().product();
        let len = shape[axis];
        let mut expected = vec![0.0f32; n];
        for (i, slot) in expected.iter_mut().enumerate() {
            let k = i / inner % len;
            let base = i - k * inner;
            let row: Vec<f64> = (0..len).map(|j| x[base + j * inner] as f64).collect();
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
            *slot = if log { ((row[k] - m) - s.ln()) as f32 } else { ((row[k] - m).exp() / s) as f32 };
        }
        let _ = rank;
        for dev in devices() {
            let t = Tensor::from_vec(x.clone(), shape.clone(), &dev).unwrap();
            let y = if log { t.log_softmax(axis as isize) } else { t.softmax(axis as isize) };
            assert_close(&y.to_vec::<f32>().unwrap(), &expected, 1e-4, 1e-6, &format!("softmax {shape:?} axis {axis} log {log} on {dev:?}"));
        }
    }

    #[test]
    fn matmul_matches_f64(m in 1usize..70, k in 1usize..40, n in 1usize..300, batch in 0usize..3, a_t in any::<bool>(), b_t in any::<bool>()) {
        let bsz = [1usize, 2, 3][batch];
        let a = data(bsz * m * k, 1);
        let b = data(k * n, 2); // shared by every batch: broadcast
        let expected = common::matmul_f64(&a, &b, (bsz, m, k, n));
        let transpose_data = |x: &[f32], rows: usize, cols: usize, batches: usize| {
            let mut t = vec![0.0; x.len()];
            for bi in 0..batches {
                for r in 0..rows {
                    for c in 0..cols {
                        t[bi * rows * cols + c * rows + r] = x[bi * rows * cols + r * cols + c];
                    }
                }
            }
            t
        };
        for dev in devices() {
            // Operands optionally stored transposed and read through a view.
            let ta = if a_t {
                Tensor::from_vec(transpose_data(&a, m, k, bsz), [bsz, k, m], &dev).unwrap().transpose(-1, -2)
            } else {
                Tensor::from_vec(a.clone(), [bsz, m, k], &dev).unwrap()
            };
            let tb = if b_t {
                Tensor::from_vec(transpose_data(&b, k, n, 1), [n, k], &dev).unwrap().t()
            } else {
                Tensor::from_vec(b.clone(), [k, n], &dev).unwrap()
            };
            let y = ta.matmul(&tb);
            prop_assert_eq!(y.shape(), &[bsz, m, n][..]);
            let atol = 1e-5 * (k as f32).sqrt() * 4.0;
            assert_close(&y.to_vec::<f32>().unwrap(), &expected, 1e-4, atol, &format!("matmul {bsz}x{m}x{k}x{n} on {dev:?}"));
        }
    }
}

#[test]
fn matmul_vector_cases_follow_pytorch() {
    for dev in devices() {
        let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev).unwrap();
        let m =
            Tensor::from_vec((0..6).map(|x| x as f32).collect::<Vec<_>>(), [3, 2], &dev).unwrap();
        let dot = v.matmul(&v);
        assert_eq!(dot.shape(), &[] as &[usize]);
        assert_eq!(dot.item::<f32>().unwrap(), 14.0);
        let vm = v.matmul(&m); // [2]
        assert_eq!(vm.to_vec::<f32>().unwrap(), vec![16.0, 22.0]);
        let mv = m.t().matmul(&v); // [2]
        assert_eq!(mv.to_vec::<f32>().unwrap(), vec![16.0, 22.0]);
    }
}

#[test]
fn huge_sum_is_exact_and_two_stage() {
    let Some(dev) = gpu() else { return };
    // 2^24 + 4097 ones: past the split threshold and past 2^24 elements.
    let n = (1 << 24) + 4097;
    let x = Tensor::ones([n], &dev);
    dev.reset_metrics();
    let s = x.sum_all().item::<f32>().unwrap();
    assert_eq!(s, n as f32);
    let m = dev.metrics();
    // Lavapipe splits once (131,072 partial sums, then their sum); GPUs
    // split the partial sums again, to four stages (131,072, 4,096, 128).
    let stages = if common::gpu_schedules(&dev) { 4 } else { 2 };
    assert_eq!(
        m.counter("kernel_launches"),
        stages,
        "partial sums, then their sum: {m}"
    );
    // Integers sum exactly in i32 (two-stage too: 2^16 elements).
    let i = Tensor::arange(0, 1 << 16, 1, &dev);
    let total: i64 = (0..(1i64 << 16)).sum();
    assert_eq!(i.sum_all().item::<i32>().unwrap() as i64, total);
}

#[test]
fn empty_and_size_one_reductions() {
    for dev in devices() {
        let e = Tensor::zeros([0, 3], &dev);
        assert_eq!(e.sum([0], false).to_vec::<f32>().unwrap(), vec![0.0; 3]);
        assert_eq!(e.prod([0], false).to_vec::<f32>().unwrap(), vec![1.0; 3]);
        let one = Tensor::from_vec(vec![5.0f32], [1, 1], &dev).unwrap();
        assert_eq!(one.max([0, 1], false).item::<f32>().unwrap(), 5.0);
        let b = Tensor::from_vec(vec![true, false, true], [3], &dev).unwrap();
        assert_eq!(b.sum_all().item::<i32>().unwrap(), 2);
    }
}

#[test]
fn mse_is_one_kernel() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(data(10_000, 1), [100, 100], &dev).unwrap();
    let y = Tensor::from_vec(data(10_000, 2), [100, 100], &dev).unwrap();
    dev.reset_metrics();
    let d = &x - &y;
    let loss = (&d * &d).mean_all();
    let got = loss.item::<f32>().unwrap();
    // One kernel on lavapipe; GPUs split a sum of 10,000 in two stages.
    let kernels = if common::gpu_schedules(&dev) { 2 } else { 1 };
    assert_eq!(
        dev.metrics().counter("kernel_launches"),
        kernels,
        "{}",
        dev.metrics()
    );
    let (xs, ys) = (data(10_000, 1), data(10_000, 2));
    let expected: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(a, b)| ((a - b) as f64).powi(2))
        .sum::<f64>()
        / 10_000.0;
    assert!(
        (got as f64 - expected).abs() < 1e-4 * expected,
        "{got} vs {expected}"
    );
    // Unfused: sub, mul, sum, scale as four kernels (five where the sum
    // of 10,000 takes two stages), same value.
    dev.set_fusion(false);
    dev.reset_metrics();
    let d = &x - &y;
    let unfused = (&d * &d).mean_all().item::<f32>().unwrap();
    assert_eq!(
        dev.metrics().counter("kernel_launches"),
        kernels + 3,
        "{}",
        dev.metrics()
    );
    assert!((unfused - got).abs() <= 1e-6 * got.abs());
}

#[test]
fn linear_relu_is_one_kernel() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(data(64 * 784, 3), [64, 784], &dev).unwrap();
    let w = Tensor::from_vec(data(128 * 784, 4), [128, 784], &dev).unwrap();
    let b = Tensor::from_vec(data(128, 5), [128], &dev).unwrap();
    dev.reset_metrics();
    let h = (x.matmul(&w.t()) + &b).relu();
    let got = h.to_vec::<f32>().unwrap();
    assert_eq!(
        dev.metrics().counter("kernel_launches"),
        1,
        "{}",
        dev.metrics()
    );
    let c = Device::cpu();
    let xc = Tensor::from_vec(data(64 * 784, 3), [64, 784], &c).unwrap();
    let wc = Tensor::from_vec(data(128 * 784, 4), [128, 784], &c).unwrap();
    let bc = Tensor::from_vec(data(128, 5), [128], &c).unwrap();
    let expected = (xc.matmul(&wc.t()) + &bc).relu().to_vec::<f32>().unwrap();
    assert_close(&got, &expected, 1e-4, 1e-4, "linear+relu vs CPU");
}

#[test]
fn softmax_is_one_kernel() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(data(64 * 1024, 6), [64, 1024], &dev).unwrap();
    dev.reset_metrics();
    let y = x.softmax(-1);
    let sums = y.sum([1], false).to_vec::<f32>().unwrap();
    assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-4));
    // softmax, then the check's row sums: two kernels in all.
    assert_eq!(
        dev.metrics().counter("kernel_launches"),
        2,
        "{}",
        dev.metrics()
    );
}

#[test]
fn softmax_with_many_rows_uses_one_invocation_per_row() {
    let Some(dev) = gpu() else { return };
    let cpu = Device::cpu();
    // Rows of 37 (read one element at a time) and of 36 (read as vec4s,
    // written as vec4s unless an epilogue is fused), log or not.
    for len in [37usize, 36] {
        let x: Vec<f32> = data(2048 * len, 9).iter().map(|v| v * 40.0).collect();
        for (log, epilogue) in [(false, false), (true, false), (false, true), (true, true)] {
            let run = |d: &Device| {
                let t = Tensor::from_vec(x.clone(), [2048, len], d).unwrap();
                let y = if log { t.log_softmax(1) } else { t.softmax(1) };
                let y = if epilogue { y * 3.0 + 1.0 } else { y };
                y.to_vec::<f32>().unwrap()
            };
            let want: Vec<f32> = x
                .chunks(len)
                .flat_map(|row| {
                    let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
                    let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
                    row.iter()
                        .map(move |&v| {
                            let y = if log {
                                v as f64 - m - s.ln()
                            } else {
                                (v as f64 - m).exp() / s
                            };
                            (if epilogue { y * 3.0 + 1.0 } else { y }) as f32
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let what = format!("softmax rows of {len}, log={log}, epilogue={epilogue}");
            assert_close(&run(&dev), &want, 1e-4, 1e-5, &what);
            assert_close(&run(&cpu), &want, 1e-4, 1e-5, &what);
        }
    }
}

/// The adapter's default matmul kernel (on CPU adapters the texture-packed
/// lane kernel) over odd shapes, and over matrices larger than one texture
/// side (16,384 on lavapipe): taller (A cut into row blocks), wider (B cut
/// into column blocks), a B whose packed texture (49 MB) is created per
/// run rather than kept with the compiled graph (run twice), and a K too
/// long for any block (the lane kernel falls back to the workgroup-memory
/// one), each against f64 loops.
#[test]
fn default_matmul_kernel_past_texture_limits_matches_f64() {
    let Some(dev) = gpu() else { return };
    common::check_matmul_shapes(&dev, "default matmul");
    for (m, k, n) in [
        (16_400, 3, 5),
        (3, 5, 70_001),
        (2, 16_400, 3),
        (40, 7, 66_000),
        (8, 1024, 12_000),
        (8, 1024, 12_000),
    ] {
        let a = common::data(m * k, 3);
        let b = common::data(k * n, 4);
        let expected = common::matmul_f64(&a, &b, (1, m, k, n));
        let y = Tensor::from_vec(a, [m, k], &dev)
            .unwrap()
            .matmul(&Tensor::from_vec(b, [k, n], &dev).unwrap());
        let atol = 1e-5 * (k as f32).sqrt() * 4.0;
        assert_close(
            &y.to_vec::<f32>().unwrap(),
            &expected,
            1e-4,
            atol,
            &format!("matmul {m}x{k}x{n}"),
        );
    }
}

/// Split (two-stage) sums take each part's elements in groups of four:
/// read as one `vec4` where the input allows (contiguous, reduced dims
/// trailing, length a multiple of four) and one element at a time where it
/// does not (a strided view, a ragged length, reduced dims not trailing).
/// Every path against f64 sums, on the GPU and the CPU reference.
#[test]
fn split_sums_match_f64_on_every_read_path() {
    for dev in devices() {
        for &(rows, len, step) in &[
            (1usize, 1usize << 20, 1usize), // vec4 reads
            (3, 300_000, 1),                // vec4 reads, several outputs
            (1, (1 << 20) + 3, 1),          // ragged: guarded scalar reads
            (2, 1 << 19, 2),                // strided view: scalar reads
        ] {
            let full = data(rows * len * step, 7);
            let x = Tensor::from_vec(full.clone(), [rows, len * step], &dev).unwrap();
            let x = if step == 1 {
                x
            } else {
                x.slice(1, 0, len * step, step)
            };
            let got = x.sum([1], false).to_vec::<f32>().unwrap();
            let want: Vec<f32> = (0..rows)
                .map(|r| {
                    (0..len)
                        .map(|i| full[r * len * step + i * step] as f64)
                        .sum::<f64>() as f32
                })
                .collect();
            let atol = 1e-5 * (len as f32).sqrt() * 4.0;
            assert_close(
                &got,
                &want,
                1e-4,
                atol,
                &format!("sum of {rows}x{len} step {step} on {dev:?}"),
            );
        }
        // Reduced dims not trailing: the sum over dim 0 of [300000, 2].
        let full = data(600_000, 8);
        let x = Tensor::from_vec(full.clone(), [300_000, 2], &dev).unwrap();
        let got = x.sum([0], false).to_vec::<f32>().unwrap();
        let want: Vec<f32> = (0..2)
            .map(|c| (0..300_000).map(|i| full[i * 2 + c] as f64).sum::<f64>() as f32)
            .collect();
        assert_close(&got, &want, 1e-4, 1e-2, &format!("column sums on {dev:?}"));
        // Integers sum exactly through the vec4 path too.
        let ints: Vec<i32> = (0..1 << 18).map(|i| (i % 1000) - 500).collect();
        let want: i64 = ints.iter().map(|&v| v as i64).sum();
        let t = Tensor::from_vec(ints, [1 << 18], &dev).unwrap();
        assert_eq!(
            t.sum_all().item::<i32>().unwrap() as i64,
            want,
            "i32 sum on {dev:?}"
        );
    }
}

/// Every reduction kernel forced in turn (`DeviceConfig::reduce`), so
/// that each variant meets the f64 oracle whatever the built-in choice
/// would take: results of 10 elements (built-in: one invocation each),
/// of 1,000 (a workgroup tree), of 70,000 (split into parts: by fours
/// where it is a sum), and over a leading dim, with NaN, infinities and
/// both signs of zero in the data. The dumped plans show that the forced
/// kernel ran wherever it is valid. Tolerances as above; NaN and
/// infinities exact.
#[test]
fn every_reduction_kernel_matches_f64_when_forced() {
    let Some(_) = gpu() else { return };
    let shapes: [(&[usize], usize); 4] = [
        (&[64, 10], 1),
        (&[16, 1000], 1),
        (&[3, 70_000], 1),
        (&[1000, 16], 0),
    ];
    for choice in lazywgpu::ReduceChoice::ALL {
        let dump = std::env::temp_dir().join(format!(
            "lazywgpu-forced-{}-{}",
            choice.name(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dump);
        let config = lazywgpu::DeviceConfig {
            reduce: Some(choice),
            dump_dir: Some(dump.clone()),
            ..lazywgpu::DeviceConfig::default()
        };
        let dev = Device::gpu_with(config).unwrap();
        for (shape, axis) in shapes {
            let n: usize = shape.iter().product();
            let mut x = data(n, n as u64);
            // Specials in the first result's elements only, so that the
            // others check the arithmetic.
            let first: Vec<usize> = (0..shape[axis])
                .map(|i| if axis == 1 { i } else { i * shape[1] })
                .collect();
            x[first[1]] = f32::INFINITY;
            x[first[2]] = -0.0;
            let mut with_nan = x.clone();
            with_nan[first[3]] = f32::NAN;
            let t = Tensor::from_vec(x.clone(), shape.to_vec(), &dev).unwrap();
            let tn = Tensor::from_vec(with_nan.clone(), shape.to_vec(), &dev).unwrap();
            let reduced = shape[axis] as f32;
            let nan_max = |g: &[f64]| {
                g.iter().fold(f64::NEG_INFINITY, |a, &v| {
                    if a.is_nan() || v.is_nan() {
                        f64::NAN
                    } else {
                        a.max(v)
                    }
                })
            };
            let nan_min = |g: &[f64]| {
                g.iter().fold(f64::INFINITY, |a, &v| {
                    if a.is_nan() || v.is_nan() {
                        f64::NAN
                    } else {
                        a.min(v)
                    }
                })
            };
            let sum = |g: &[f64]| g.iter().sum::<f64>();
            let mean = |g: &[f64]| g.iter().sum::<f64>() / g.len() as f64;
            type Case<'a> = (&'a str, Tensor, &'a [f32], &'a dyn Fn(&[f64]) -> f64, f32);
            let cases: [Case; 6] = [
                (
                    "sum",
                    t.sum([axis as isize], false),
                    &x,
                    &sum,
                    1e-4 * reduced.sqrt(),
                ),
                (
                    "sum with NaN",
                    tn.sum([axis as isize], false),
                    &with_nan,
                    &sum,
                    1e-4 * reduced.sqrt(),
                ),
                ("mean", t.mean([axis as isize], false), &x, &mean, 1e-4),
                (
                    "max",
                    tn.max([axis as isize], false),
                    &with_nan,
                    &nan_max,
                    0.0,
                ),
                ("min", t.min([axis as isize], false), &x, &nan_min, 0.0),
                (
                    "min with NaN",
                    tn.min([axis as isize], false),
                    &with_nan,
                    &nan_min,
                    0.0,
                ),
            ];
            for (what, out, input, f, atol) in cases {
                let want: Vec<f32> = oracle(input, shape, &[axis], f)
                    .into_iter()
                    .map(|v| v as f32)
                    .collect();
                let got = out.to_vec::<f32>().unwrap();
                assert_close(
                    &got,
                    &want,
                    1e-4,
                    atol,
                    &format!(
                        "{what} over dim {axis} of {shape:?}, forced {}",
                        choice.name()
                    ),
                );
            }
        }
        dev.wait().unwrap();
        // Which kernels ran: each forced one wherever it is valid.
        let plans: String = common::dumped_plans(&dump).concat();
        let used = |s: &str| plans.contains(&format!("strategy: Reduce({s})"));
        let forced = match choice {
            lazywgpu::ReduceChoice::PerInvocation => "PerInvocation",
            lazywgpu::ReduceChoice::ByFours => "SumByFours",
            lazywgpu::ReduceChoice::WorkgroupTree => "WorkgroupTree",
        };
        assert!(used(forced), "forced {}: no kernel took it", choice.name());
        // Each reduction's plan lists the kernels that could compute it:
        // by fours is no candidate for a max.
        assert!(
            plans.contains("candidates: PerInvocation, SumByFours (not valid here), WorkgroupTree"),
            "{plans}"
        );
        if choice != lazywgpu::ReduceChoice::ByFours {
            // Both are valid for every reduction here (one invocation per
            // part of the split 70,000-element one): nothing else ran.
            for other in ["PerInvocation", "SumByFours", "WorkgroupTree"] {
                assert!(
                    other == forced || !used(other),
                    "forced {}: {other} ran too",
                    choice.name()
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dump);
    }
}

/// Sums over every dim but a middle one (a convolution's bias gradient,
/// a batch norm's statistics: `[N, C, H, W]` over N, H and W), over the
/// last dims, and over all, read four elements a load where the last
/// dim's length is a multiple of four (`codegen::reduce_ir::sums_in_fours`)
/// and one a load elsewhere, in both kernels that take plain sums (one
/// invocation per result, a workgroup per result), from a stored input
/// and from one computed in the kernel, with an infinity and a NaN in
/// one channel; against f64 sums.
#[test]
fn channel_sums_match_f64_in_every_kernel() {
    let Some(_) = gpu() else { return };
    let shapes: [&[usize]; 5] = [
        &[64, 8, 24, 24],
        &[3, 5, 7, 4],
        &[2, 3, 5, 5],
        &[1, 2, 1, 8],
        &[5, 3, 2, 12],
    ];
    let choices = [
        None,
        Some(lazywgpu::ReduceChoice::PerInvocation),
        Some(lazywgpu::ReduceChoice::WorkgroupTree),
    ];
    for reduce in choices {
        let config = lazywgpu::DeviceConfig {
            reduce,
            ..lazywgpu::DeviceConfig::default()
        };
        let dev = Device::gpu_with(config).unwrap();
        for shape in shapes {
            let n: usize = shape.iter().product();
            let mut x = data(n, n as u64 + 7);
            // Channel 1 of the first sample: an infinity; channel 2: a NaN.
            let plane: usize = shape[2] * shape[3];
            x[plane + 1] = f32::INFINITY;
            if shape[1] > 2 {
                x[2 * plane + plane - 1] = f32::NAN;
            }
            let t = Tensor::from_vec(x.clone(), shape.to_vec(), &dev).unwrap();
            let computed: Vec<f32> = x.iter().map(|v| v * 2.0 + 1.0).collect();
            let inputs = [(t.clone(), &x), (&t * 2.0 + 1.0, &computed)];
            for (input, values) in inputs {
                for axes in [&[0usize, 2, 3][..], &[2, 3], &[3], &[0, 1, 2, 3]] {
                    let got = input.sum(axes.to_vec(), false).to_vec::<f32>().unwrap();
                    let want = oracle(values, shape, axes, &|g| g.iter().sum::<f64>());
                    let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
                    let per = (n / want.len()) as f32;
                    assert_close(
                        &got,
                        &want,
                        1e-4,
                        1e-4 * per.sqrt() * 4.0,
                        &format!("sum over {axes:?} of {shape:?} ({reduce:?})"),
                    );
                }
            }
        }
    }
}
