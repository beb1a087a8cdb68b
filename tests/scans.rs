//! `cumsum` and `cumprod` against f64 running sums and products written
//! here (every axis of random shapes, lines past the 65,535-iteration loop
//! limit, NaN and infinities, integers, f16/bf16), their gradients against
//! brute-force f64 derivatives (zeros in cumprod's input included), and
//! the truth-value ops (`any`, `all`, `logical_*`), on both backends.

mod common;

use common::{assert_close, devices};
use lazywgpu::{DType, Tensor};

/// A small deterministic generator (xorshift), values in [-2, 2).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// Running sums (`prod`: products) of `x` of `shape` along `axis`, in f64.
fn scan_f64(x: &[f32], shape: &[usize], axis: usize, prod: bool) -> Vec<f64> {
    let inner: usize = shape[axis + 1..].iter().product();
    let len = shape[axis];
    let mut out: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    for i in 0..x.len() {
        let k = i / inner % len;
        if k > 0 {
            let prev = out[i - inner];
            out[i] = if prod { prev * out[i] } else { prev + out[i] };
        }
    }
    out
}

#[test]
fn cumsum_and_cumprod_match_f64_scans_on_random_shapes() {
    let shapes: [&[usize]; 6] = [
        &[1],
        &[7],
        &[3, 5, 4],
        &[2, 1, 9],
        &[4, 33, 2],
        &[5, 2, 3, 2],
    ];
    for (case, shape) in shapes.iter().enumerate() {
        let n: usize = shape.iter().product();
        let mut x = values(n, case as u64 + 1);
        if n > 8 {
            x[3] = f32::NAN;
            x[5] = f32::INFINITY;
            x[6] = 0.0;
        }
        // Products stay in range with factors near 1.
        let xp: Vec<f32> = x.iter().map(|v| 1.0 + v / 8.0).collect();
        for dev in devices() {
            for axis in 0..shape.len() {
                for (prod, data) in [(false, &x), (true, &xp)] {
                    let t = Tensor::from_vec(data.clone(), shape.to_vec(), &dev).unwrap();
                    let got = if prod {
                        t.cumprod(axis as isize)
                    } else {
                        t.cumsum(axis as isize)
                    };
                    let want: Vec<f32> = scan_f64(data, shape, axis, prod)
                        .into_iter()
                        .map(|v| v as f32)
                        .collect();
                    let what = format!("{shape:?} axis {axis} prod {prod} on {}", dev.name());
                    assert_close(&got.to_vec::<f32>().unwrap(), &want, 1e-5, 1e-5, &what);
                }
            }
            // A non-contiguous (transposed) input, scanned along its
            // first axis (the original's second), and a negative axis.
            if shape.len() >= 2 {
                let t = Tensor::from_vec(x.clone(), shape.to_vec(), &dev).unwrap();
                let got = t.transpose(0, 1).cumsum(0).transpose(0, 1);
                let want: Vec<f32> = scan_f64(&x, shape, 1, false)
                    .into_iter()
                    .map(|v| v as f32)
                    .collect();
                let got = got.to_vec::<f32>().unwrap();
                assert_close(&got, &want, 1e-5, 1e-5, "transposed cumsum");
                let last = shape.len() - 1;
                let got = t.cumsum(-1).to_vec::<f32>().unwrap();
                let want: Vec<f32> = scan_f64(&x, shape, last, false)
                    .into_iter()
                    .map(|v| v as f32)
                    .collect();
                assert_close(&got, &want, 1e-5, 1e-5, "cumsum(-1)");
            }
        }
    }
}

/// Lines longer than lavapipe's 65,535 loop iterations, along the last
/// axis and along the first (strided) axis.
#[test]
fn scans_past_the_loop_limit() {
    for dev in devices() {
        for (shape, axis) in [([2usize, 70_001usize], 1usize), ([70_003, 2], 0)] {
            let n = shape[0] * shape[1];
            let x: Vec<f32> = (0..n).map(|i| (i % 3) as f32 - 1.0).collect();
            let t = Tensor::from_vec(x.clone(), shape, &dev).unwrap();
            let got = t.cumsum(axis as isize).to_vec::<f32>().unwrap();
            let want: Vec<f32> = scan_f64(&x, &shape, axis, false)
                .into_iter()
                .map(|v| v as f32)
                .collect();
            assert_close(
                &got,
                &want,
                0.0,
                0.0,
                &format!("{shape:?} on {}", dev.name()),
            );
            let ints = t.cast(DType::I32).cumsum(axis as isize);
            assert_eq!(ints.dtype(), DType::I32);
            let got: Vec<i32> = ints.to_vec().unwrap();
            assert!(got.iter().zip(&want).all(|(&g, &w)| g as f32 == w));
        }
    }
}

/// Checks `got` against f64 running values `want` of `x` (`shape`,
/// `axis`): NaN and infinities exactly, finite values within `rtol` of
/// the value plus `atol` of the running sum of magnitudes up to there
/// (what rounding in any order of the same additions stays within).
fn check_scan(got: &[f32], want: &[f64], x: &[f32], (shape, axis): (&[usize], usize), rtol: f64) {
    let mags = scan_f64(
        &x.iter().map(|v| v.abs()).collect::<Vec<_>>(),
        shape,
        axis,
        false,
    );
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(g);
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || w.abs() > f64::from(f32::MAX) {
            g == w || (g.is_infinite() && g.signum() == w.signum())
        } else {
            (g - w).abs() <= rtol * w.abs() + 1e-6 * mags[i] + 1e-6
        };
        assert!(ok, "{shape:?} axis {axis}: element {i}: got {g}, want {w}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 10, .. Default::default() })]

    /// Long lines over few of them, which the GPU's lowering splits into
    /// chunks scanned in parallel (from 1,024 elements a line on GPUs;
    /// lavapipe splits from 65,536, and splits these under
    /// `LAZYWGPU_GPU_CHOICES=1`, as `.ci/run` runs them): every position
    /// of the long axis, sums and products, f32 with NaN and infinities
    /// at random places, i32 and f16, against f64 scans on both backends.
    #[test]
    fn long_scans_over_few_lines_match_f64(
        len in 900usize..40_000,
        pre in 1usize..4,
        post in 1usize..3,
        axis_first in proptest::bool::ANY,
        seed in 0u64..1_000,
        specials in proptest::collection::vec((0usize..1_000_000, 0usize..3), 0..3),
    ) {
        let (shape, axis) = if axis_first {
            (vec![len, pre * post], 0)
        } else {
            (vec![pre, len, post], 1)
        };
        let n: usize = shape.iter().product();
        let mut x = values(n, seed);
        for &(at, kind) in &specials {
            x[at % n] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][kind];
        }
        let factors: Vec<f32> = x.iter().map(|v| if v.is_finite() { 1.0 + v / 64.0 } else { *v }).collect();
        let ints: Vec<i32> = x.iter().map(|v| if v.is_finite() { (v * 50.0) as i32 } else { 7 }).collect();
        for dev in devices() {
            let t = Tensor::from_vec(x.clone(), shape.clone(), &dev).unwrap();
            let got = t.cumsum(axis as isize).to_vec::<f32>().unwrap();
            check_scan(&got, &scan_f64(&x, &shape, axis, false), &x, (&shape, axis), 1e-6);
            let t = Tensor::from_vec(factors.clone(), shape.clone(), &dev).unwrap();
            let got = t.cumprod(axis as isize).to_vec::<f32>().unwrap();
            check_scan(&got, &scan_f64(&factors, &shape, axis, true), &factors, (&shape, axis), 1e-4);
            let t = Tensor::from_vec(ints.clone(), shape.clone(), &dev).unwrap();
            let got: Vec<i32> = t.cumsum(axis as isize).to_vec().unwrap();
            let as_f32: Vec<f32> = ints.iter().map(|&v| v as f32).collect();
            let want = scan_f64(&as_f32, &shape, axis, false);
            proptest::prop_assert!(got.iter().zip(&want).all(|(&g, &w)| f64::from(g) == w), "i32 cumsum on {}", dev.name());
            let t = Tensor::from_vec(x.clone(), shape.clone(), &dev).unwrap().cast(DType::F16);
            let got = t.cumsum(axis as isize).cast(DType::F32).to_vec::<f32>().unwrap();
            let halves: Vec<f32> = x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
            check_scan(&got, &scan_f64(&halves, &shape, axis, false), &halves, (&shape, axis), 1e-3);
        }
    }
}

/// Running sums of non-negative weights, most of them zero (a sampler's
/// top-k mask over a vocabulary), never decrease along a line: where the
/// GPU's lowering scans a line in chunks, a chunk's last running value
/// and the running value the next chunk starts from must be the same
/// number, or `multinomial` could draw a zero-weight token at a chunk's
/// border. Checked on both backends (and under `LAZYWGPU_GPU_CHOICES=1`,
/// as `.ci/run` runs it, on lavapipe's chunks).
#[test]
fn running_sums_of_non_negative_values_never_decrease() {
    for (rows, len, seed) in [(8usize, 50_257usize, 1u64), (3, 20_000, 2), (2, 70_001, 3)] {
        let w: Vec<f32> = values(rows * len, seed)
            .iter()
            .enumerate()
            .map(|(i, v)| {
                // One weight in eight non-zero, of magnitudes 1e-3 to 1e3,
                // so that sums round in their last bits.
                if i % 8 == (seed as usize) % 8 {
                    10f32.powf(v * 1.5).abs()
                } else {
                    0.0
                }
            })
            .collect();
        for dev in devices() {
            let t = Tensor::from_vec(w.clone(), [rows, len], &dev).unwrap();
            let got = t.cumsum(1).to_vec::<f32>().unwrap();
            for r in 0..rows {
                let line = &got[r * len..(r + 1) * len];
                let fall = line.windows(2).position(|p| p[1] < p[0]);
                assert!(
                    fall.is_none(),
                    "{rows}x{len} row {r} on {}: the running sum falls after element {fall:?}",
                    dev.name()
                );
            }
            // Thousands of f32 additions of magnitudes up to 1e3 in order.
            let want = scan_f64(&w, &[rows, len], 1, false);
            check_scan(&got, &want, &w, (&[rows, len], 1), 2e-5);
        }
    }
}

#[test]
fn scan_dtypes_follow_the_input() {
    for dev in devices() {
        let b = Tensor::from_vec(vec![true, false, true, true], [4], &dev).unwrap();
        let c = b.cumsum(0);
        assert_eq!(c.dtype(), DType::I32);
        assert_eq!(c.to_vec::<i32>().unwrap(), [1, 1, 2, 3]);
        let u = Tensor::from_vec(vec![200u8, 100, 50], [3], &dev).unwrap();
        let c = u.cumsum(0);
        assert_eq!(c.dtype(), DType::I64);
        assert_eq!(c.to_vec::<i64>().unwrap(), [200, 300, 350]);
        let i = Tensor::from_vec(vec![2i32, -3, 4], [3], &dev).unwrap();
        assert_eq!(i.cumprod(0).to_vec::<i32>().unwrap(), [2, -6, -24]);
        for dtype in [DType::F16, DType::BF16] {
            let h = Tensor::from_vec(vec![0.5f32, 0.25, 1.0, -2.0], [4], &dev)
                .unwrap()
                .cast(dtype);
            let c = h.cumsum(0);
            assert_eq!(c.dtype(), dtype);
            let got = c.cast(DType::F32).to_vec::<f32>().unwrap();
            assert_eq!(got, [0.5, 0.75, 1.75, -0.25]);
        }
        // Rank 0 and empty.
        let s = Tensor::scalar(3.0f32, &dev);
        assert_eq!(s.cumsum(0).to_vec::<f32>().unwrap(), [3.0]);
        let e = Tensor::zeros([0, 3], &dev);
        assert_eq!(e.cumprod(0).shape(), [0, 3]);
        assert_eq!(e.cumsum(1).to_vec::<f32>().unwrap(), Vec::<f32>::new());
    }
}

/// d sum(r * scan(x)) / dx_i by the definition: `sum over j >= i of r_j *
/// d y_j / d x_i`, with `d y_j / d x_i` the product of the other factors
/// (products) or 1 (sums), along one line.
fn scan_grad_f64(x: &[f32], r: &[f32], prod: bool) -> Vec<f32> {
    let n = x.len();
    (0..n)
        .map(|i| {
            (i..n)
                .map(|j| {
                    let d: f64 = if prod {
                        (0..=j)
                            .filter(|&k| k != i)
                            .map(|k| f64::from(x[k]))
                            .product()
                    } else {
                        1.0
                    };
                    f64::from(r[j]) * d
                })
                .sum::<f64>() as f32
        })
        .collect()
}

#[test]
fn scan_gradients_match_the_definition_with_zeros() {
    let lines: [Vec<f32>; 4] = [
        vec![0.5, -1.5, 2.0, 0.75, 1.25],
        vec![0.5, 0.0, 2.0, 0.75, 1.25],
        vec![0.0, 1.5, 0.0, 0.75, -1.0],
        vec![1.5, -0.5, 2.0, 3.0, 0.0],
    ];
    let r = [0.3f32, -0.7, 1.1, 0.4, -0.2];
    for dev in devices() {
        for prod in [false, true] {
            let x: Vec<f32> = lines.concat();
            let rr: Vec<f32> = r.repeat(lines.len());
            let xt = Tensor::from_vec(x.clone(), [lines.len(), 5], &dev).unwrap();
            xt.requires_grad_(true);
            let rt = Tensor::from_vec(rr, [lines.len(), 5], &dev).unwrap();
            let y = if prod { xt.cumprod(1) } else { xt.cumsum(1) };
            (&y * &rt).sum_all().backward();
            let got = xt.grad().unwrap().to_vec::<f32>().unwrap();
            let want: Vec<f32> = lines
                .iter()
                .flat_map(|l| scan_grad_f64(l, &r, prod))
                .collect();
            let what = format!("prod {prod} on {}", dev.name());
            assert_close(&got, &want, 1e-5, 1e-5, &what);
        }
        // Along the first axis of a transposed layout.
        let x: Vec<f32> = values(12, 7);
        let xt = Tensor::from_vec(x.clone(), [4, 3], &dev).unwrap();
        xt.requires_grad_(true);
        xt.cumprod(0).sum_all().backward();
        let got = xt.grad().unwrap().to_vec::<f32>().unwrap();
        for c in 0..3 {
            let col: Vec<f32> = (0..4).map(|k| x[k * 3 + c]).collect();
            let want = scan_grad_f64(&col, &[1.0; 4], true);
            let have: Vec<f32> = (0..4).map(|k| got[k * 3 + c]).collect();
            assert_close(&have, &want, 1e-5, 1e-5, "cumprod axis 0");
        }
    }
}

#[test]
fn any_all_and_logical_ops_follow_truth_values() {
    for dev in devices() {
        let x =
            Tensor::from_vec(vec![0.0f32, f32::NAN, 0.0, 0.0, 2.0, -1.0], [2, 3], &dev).unwrap();
        assert_eq!(x.any([1], false).to_vec::<bool>().unwrap(), [true, true]);
        assert_eq!(x.all([1], false).to_vec::<bool>().unwrap(), [false, false]);
        assert_eq!(
            x.all([0], true).to_vec::<bool>().unwrap(),
            [false, true, false]
        );
        assert_eq!(x.any_all().to_vec::<bool>().unwrap(), [true]);
        assert_eq!(x.all_all().to_vec::<bool>().unwrap(), [false]);
        let empty = Tensor::zeros([0], &dev);
        assert_eq!(empty.any_all().to_vec::<bool>().unwrap(), [false]);
        assert_eq!(empty.all_all().to_vec::<bool>().unwrap(), [true]);
        let a = Tensor::from_vec(vec![1i32, 0, 3, 0], [4], &dev).unwrap();
        let b = Tensor::from_vec(vec![true, true, false, false], [4], &dev).unwrap();
        assert_eq!(
            a.logical_and(&b).to_vec::<bool>().unwrap(),
            [true, false, false, false]
        );
        assert_eq!(
            a.logical_or(&b).to_vec::<bool>().unwrap(),
            [true, true, true, false]
        );
        assert_eq!(
            a.logical_xor(&b).to_vec::<bool>().unwrap(),
            [false, true, true, false]
        );
        assert_eq!(
            a.logical_not().to_vec::<bool>().unwrap(),
            [false, true, false, true]
        );
    }
}
