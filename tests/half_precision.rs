//! f16 and bf16 against an f64 oracle written here (rounding to a binary
//! format by arithmetic on f64, sharing no code with the crate or the
//! `half` crate), on the CPU reference and the GPU.
//!
//! Tolerances, per dtype: a cast is exact (the oracle's bits); an op's
//! result is within one unit in the last place of the format (`ulp`) of
//! the f64 result rounded to the format, because each op is computed in
//! f32 and rounded once; a reduction or matmul adds the error of its f32
//! accumulation, `n · 2^-24 · Σ|terms|`, where accumulating in the 16-bit
//! format itself would lose whole units (the sum of 10,000 ones in f16
//! stops at 2,048).

mod common;

use lazywgpu::half::{bf16, f16};
use lazywgpu::nn::{ParamVisitor, Parameters, load_safetensors, save_safetensors};
use lazywgpu::{DType, Device, Element, Tensor};

/// A binary float format: `mantissa` stored bits, smallest normal
/// exponent `min_exp`, largest finite value `max`.
#[derive(Clone, Copy, Debug)]
struct Format {
    dtype: DType,
    mantissa: i32,
    min_exp: i32,
    max: f64,
}

const F16: Format = Format {
    dtype: DType::F16,
    mantissa: 10,
    min_exp: -14,
    max: 65504.0,
};
const BF16: Format = Format {
    dtype: DType::BF16,
    mantissa: 7,
    min_exp: -126,
    // (2 - 2^-7) · 2^127
    max: 3.3895313892515355e38,
};

/// The exponent of the power of two at or below `a` (> 0), exactly.
fn exponent(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// Round half to even.
fn round_even(q: f64) -> f64 {
    let r = q.round();
    if (r - q).abs() == 0.5 && r % 2.0 != 0.0 {
        r - q.signum()
    } else {
        r
    }
}

impl Format {
    /// The unit in the last place at `a`'s magnitude.
    fn ulp(self, a: f64) -> f64 {
        let e = if a == 0.0 {
            self.min_exp
        } else {
            exponent(a.abs()).max(self.min_exp)
        };
        2f64.powi(e - self.mantissa)
    }

    /// `x` rounded to nearest, ties to even; past the largest finite
    /// value (by half an ulp or more) to infinity; NaN stays NaN.
    fn round(self, x: f64) -> f64 {
        if !x.is_finite() || x == 0.0 {
            return x;
        }
        let ulp = self.ulp(x);
        let r = round_even(x.abs() / ulp) * ulp;
        let r = if r > self.max { f64::INFINITY } else { r };
        r.copysign(x)
    }
}

/// Host values of `fmt`, built from f32 values through the oracle.
fn tensor_of(fmt: Format, values: &[f64], shape: &[usize], dev: &Device) -> Tensor {
    let rounded: Vec<f32> = values.iter().map(|&v| fmt.round(v) as f32).collect();
    // A cast of values already in the format is exact.
    Tensor::from_vec(rounded, shape.to_vec(), dev)
        .expect("upload")
        .cast(fmt.dtype)
}

fn read(t: &Tensor) -> Vec<f64> {
    t.to_f32_vec()
        .expect("readback")
        .into_iter()
        .map(f64::from)
        .collect()
}

/// Asserts `got[i]` within `tol[i]` of `want[i]`; NaN and infinities
/// must match exactly.
#[track_caller]
fn assert_within(got: &[f64], want: &[f64], tol: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tol[i]
        };
        assert!(
            ok,
            "{what}: element {i}: got {g}, expected {w} (± {})",
            tol[i]
        );
    }
}

/// Deterministic values spread over `[-scale, scale]`.
fn spread(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    common::data(n, seed)
        .into_iter()
        .map(|v| v as f64 * scale)
        .collect()
}

/// Values at the edges of both formats: overflow bands, subnormals,
/// ties, signed zeros, NaN and infinities.
fn edge_values() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        1.0 / 3.0,
        65504.0,
        65519.99,
        65520.0,
        -65520.0,
        70000.0,
        2049.0, // a tie in f16 (ulp 2): rounds to even 2048
        2051.0, // a tie: rounds to even 2052
        1.0 + 2f64.powi(-11),
        1.0 + 3.0 * 2f64.powi(-11),
        2f64.powi(-24),       // the smallest f16 subnormal
        2f64.powi(-25),       // a tie with 0: rounds to 0
        3.0 * 2f64.powi(-25), // rounds to 2^-23
        6.0e-5,               // an f16 subnormal
        1e-30,
        -1e-38,
        3.0e38,
        3.4e38,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    v.extend(spread(200, 7, 1.0).iter().map(|x| x * 1e4));
    v.extend(spread(200, 8, 1.0).iter().map(|x| x * 1e-4));
    // Keep the inputs f32 values: casts start from f32.
    v.into_iter().map(|x| x as f32 as f64).collect()
}

#[test]
fn casts_from_f32_round_to_nearest_even_as_the_oracle() {
    let values = edge_values();
    for dev in common::devices() {
        let x = Tensor::from_vec(
            values.iter().map(|&v| v as f32).collect::<Vec<_>>(),
            [values.len()],
            &dev,
        )
        .expect("upload");
        for fmt in [F16, BF16] {
            let got = read(&x.cast(fmt.dtype));
            let want: Vec<f64> = values.iter().map(|&v| fmt.round(v)).collect();
            let exact = vec![0.0; values.len()];
            assert_within(
                &got,
                &want,
                &exact,
                &format!("{} cast on {dev:?}", fmt.dtype),
            );
        }
    }
}

#[test]
fn host_values_round_trip_bit_for_bit() {
    let halves: Vec<f16> = (0..=u16::MAX)
        .step_by(7)
        .map(f16::from_bits)
        .filter(|v| !v.is_nan())
        .collect();
    let brains: Vec<bf16> = (0..=u16::MAX)
        .step_by(7)
        .map(bf16::from_bits)
        .filter(|v| !v.is_nan())
        .collect();
    for dev in common::devices() {
        let n = halves.len();
        let h = Tensor::from_vec(halves.clone(), [n], &dev).expect("upload");
        assert_eq!(h.dtype(), DType::F16);
        // Through a kernel (a copy of a view at an odd offset) and back.
        let back: Vec<f16> = (&h.narrow(0, 1, n - 1) * 1.0f32).to_vec().expect("read");
        assert_eq!(back, halves[1..], "f16 on {dev:?}");
        let b = Tensor::from_vec(brains.clone(), [brains.len()], &dev).expect("upload");
        let back: Vec<bf16> = b.narrow(0, 3, 100).to_vec().expect("read");
        assert_eq!(back, brains[3..103], "bf16 on {dev:?}");
        // f32 widening is exact.
        let wide = read(&h.float());
        let want: Vec<f64> = halves.iter().map(|v| v.to_f64()).collect();
        assert_within(&wide, &want, &vec![0.0; n], "f16 to f32");
    }
}

/// (name, op on tensors, op on f64) of the elementwise ops checked.
type Case = (
    &'static str,
    fn(&Tensor, &Tensor) -> Tensor,
    fn(f64, f64) -> f64,
);

fn cases() -> Vec<Case> {
    vec![
        ("add", |a, b| a + b, |a, b| a + b),
        ("sub", |a, b| a - b, |a, b| a - b),
        ("mul", |a, b| a * b, |a, b| a * b),
        ("div", |a, b| a / b, |a, b| a / b),
        ("maximum", |a, b| a.maximum(b), |a, b| a.max(b)),
        ("exp", |a, _| a.exp(), |a, _| a.exp()),
        ("tanh", |a, _| a.tanh(), |a, _| a.tanh()),
        (
            "sigmoid",
            |a, _| a.sigmoid(),
            |a, _| 1.0 / (1.0 + (-a).exp()),
        ),
        ("sqrt of |a|", |a, _| a.abs().sqrt(), |a, _| a.abs().sqrt()),
        ("relu", |a, _| a.relu(), |a, _| a.max(0.0)),
        (
            "scaled",
            |a, _| a * 0.1f32 + 3.0f32,
            |a, _| a * (0.1f32 as f64) + 3.0,
        ),
    ]
}

#[test]
fn elementwise_ops_are_computed_in_f32_and_rounded_once() {
    let n = 3000;
    for dev in common::devices() {
        for fmt in [F16, BF16] {
            let a_host: Vec<f64> = spread(n, 1, 12.0).iter().map(|&v| fmt.round(v)).collect();
            let b_host: Vec<f64> = spread(n, 2, 3.0)
                .iter()
                .map(|&v| fmt.round(v + 0.01))
                .collect();
            let a = tensor_of(fmt, &a_host, &[n], &dev);
            let b = tensor_of(fmt, &b_host, &[n], &dev);
            for (name, op, oracle) in cases() {
                let out = op(&a, &b);
                assert_eq!(out.dtype(), fmt.dtype, "{name}");
                let want: Vec<f64> = (0..n)
                    .map(|i| fmt.round(oracle(a_host[i], b_host[i])))
                    .collect();
                let tol: Vec<f64> = want.iter().map(|&w| fmt.ulp(w)).collect();
                assert_within(
                    &read(&out),
                    &want,
                    &tol,
                    &format!("{name} in {} on {dev:?}", fmt.dtype),
                );
            }
        }
    }
}

#[test]
fn a_fused_chain_rounds_every_op_as_pytorch_does() {
    // x * x * x overflows f16 at |x| > 40.3 even though the f32 chain
    // would come back into range after the division: each op's result
    // is an f16, as in PyTorch's eager ops.
    let x_host: Vec<f64> = vec![10.0, 41.0, -50.0, 0.5, 3.0e-3];
    for dev in common::devices() {
        let x = tensor_of(F16, &x_host, &[5], &dev);
        let y = &(&(&x * &x) * &x) / 1000.0f32;
        let want: Vec<f64> = x_host
            .iter()
            .map(|&v| {
                let sq = F16.round(v * v);
                let cube = F16.round(sq * v);
                F16.round(cube / 1000.0)
            })
            .collect();
        let tol: Vec<f64> = want.iter().map(|&w| F16.ulp(w)).collect();
        assert_within(&read(&y), &want, &tol, &format!("chain on {dev:?}"));
        assert!(read(&y)[2].is_infinite());
    }
}

#[test]
fn reductions_accumulate_in_f32() {
    for dev in common::devices() {
        // 10,000 ones: an f16 accumulator would stop at 2,048.
        let ones = Tensor::ones([10_000], &dev).half();
        assert_eq!(read(&ones.sum_all()), vec![10_000.0], "f16 sum on {dev:?}");
        let ones = Tensor::ones([10_000], &dev).bfloat16();
        // 10,000 is not a bf16: its nearest is 9,984 (ulp 64).
        assert_eq!(read(&ones.sum_all()), vec![9_984.0], "bf16 sum on {dev:?}");
        for fmt in [F16, BF16] {
            let (rows, cols) = (37, 700);
            let host: Vec<f64> = spread(rows * cols, 3, 4.0)
                .iter()
                .map(|&v| fmt.round(v))
                .collect();
            let x = tensor_of(fmt, &host, &[rows, cols], &dev);
            let sums = read(&x.sum([1], false));
            let means = read(&x.mean([1], false));
            let maxes = read(&x.max([1], false));
            let (mut want_sum, mut want_mean, mut want_max, mut tol) =
                (vec![], vec![], vec![], vec![]);
            for r in 0..rows {
                let row = &host[r * cols..(r + 1) * cols];
                let s: f64 = row.iter().sum();
                let abs: f64 = row.iter().map(|v| v.abs()).sum();
                want_sum.push(fmt.round(s));
                want_mean.push(fmt.round(s / cols as f64));
                want_max.push(row.iter().cloned().fold(f64::MIN, f64::max));
                tol.push(fmt.ulp(s) + cols as f64 * 2f64.powi(-24) * abs);
            }
            let what = format!("{} on {dev:?}", fmt.dtype);
            assert_within(&sums, &want_sum, &tol, &format!("sum in {what}"));
            let mean_tol: Vec<f64> = want_mean
                .iter()
                .zip(&tol)
                .map(|(&m, &t)| fmt.ulp(m) + t / cols as f64)
                .collect();
            assert_within(&means, &want_mean, &mean_tol, &format!("mean in {what}"));
            assert_within(
                &maxes,
                &want_max,
                &vec![0.0; rows],
                &format!("max in {what}"),
            );
        }
        // NaN wins a max, as in PyTorch.
        let with_nan = tensor_of(F16, &[1.0, f64::NAN, 3.0], &[3], &dev);
        assert!(read(&with_nan.max([0], false))[0].is_nan());
    }
}

/// `a [m, k] @ b [k, n]` in f64, with each entry's accumulation bound.
fn matmul_oracle(a: &[f64], b: &[f64], (m, k, n): (usize, usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let (mut out, mut abs) = (vec![0.0; m * n], vec![0.0; m * n]);
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                out[i * n + j] += a[i * k + p] * b[p * n + j];
                abs[i * n + j] += (a[i * k + p] * b[p * n + j]).abs();
            }
        }
    }
    (out, abs)
}

#[test]
fn matmul_in_half_types_accumulates_in_f32() {
    for dev in common::devices() {
        for fmt in [F16, BF16] {
            for &(m, k, n) in &[(1, 1, 1), (33, 70, 17), (64, 256, 96), (5, 1000, 3)] {
                let a_host: Vec<f64> = spread(m * k, 4, 2.0)
                    .iter()
                    .map(|&v| fmt.round(v))
                    .collect();
                let b_host: Vec<f64> = spread(k * n, 5, 2.0)
                    .iter()
                    .map(|&v| fmt.round(v))
                    .collect();
                let a = tensor_of(fmt, &a_host, &[m, k], &dev);
                // b from a transposed view, read through its strides.
                let bt_host: Vec<f64> = (0..n * k).map(|i| b_host[(i % k) * n + i / k]).collect();
                let b = tensor_of(fmt, &bt_host, &[n, k], &dev).t();
                let out = a.matmul(&b);
                assert_eq!(out.dtype(), fmt.dtype);
                let (exact, abs) = matmul_oracle(&a_host, &b_host, (m, k, n));
                let want: Vec<f64> = exact.iter().map(|&v| fmt.round(v)).collect();
                let tol: Vec<f64> = exact
                    .iter()
                    .zip(&abs)
                    .map(|(&e, &s)| fmt.ulp(e) + k as f64 * 2f64.powi(-24) * s)
                    .collect();
                assert_within(
                    &read(&out),
                    &want,
                    &tol,
                    &format!("{m}x{k}x{n} in {} on {dev:?}", fmt.dtype),
                );
            }
        }
    }
}

#[test]
fn softmax_of_large_f16_logits_is_computed_in_f32() {
    // exp of these overflows f16 (and f32): the max is subtracted in f32.
    let logits = [60000.0, 59968.0, 0.0, -65504.0, 59936.0, 12.5];
    for dev in common::devices() {
        let x = tensor_of(F16, &logits, &[1, 6], &dev);
        let y = x.softmax(-1);
        assert_eq!(y.dtype(), DType::F16);
        let m = logits.iter().cloned().fold(f64::MIN, f64::max);
        let total: f64 = logits.iter().map(|&v| (v - m).exp()).sum();
        let want: Vec<f64> = logits
            .iter()
            .map(|&v| F16.round((v - m).exp() / total))
            .collect();
        let tol: Vec<f64> = want.iter().map(|&w| F16.ulp(w)).collect();
        assert_within(&read(&y), &want, &tol, &format!("softmax on {dev:?}"));
    }
}

#[test]
fn half_tensors_mix_with_f32_by_pytorch_promotion() {
    for dev in common::devices() {
        let h = Tensor::ones([3], &dev).half();
        let b = Tensor::ones([3], &dev).bfloat16();
        let f = Tensor::ones([3], &dev);
        assert_eq!((&h + &f).dtype(), DType::F32);
        assert_eq!((&h + &b).dtype(), DType::F32);
        assert_eq!((&h * 2.5f32).dtype(), DType::F16);
        assert_eq!((&b + 1i32).dtype(), DType::BF16);
        assert_eq!(read(&(&h + &b)), vec![2.0; 3]);
    }
}

#[test]
fn large_half_buffers_past_the_workgroup_and_f32_integer_limits() {
    let Some(dev) = common::gpu() else { return };
    // 2^24 + 5 elements: more than 65,535 workgroups of 256, and past
    // the integers f32 counts exactly.
    let n = (1 << 24) + 5;
    let x = Tensor::ones([n], &dev).bfloat16();
    let last = x.narrow(0, n - 3, 3).float();
    assert_eq!(read(&last), vec![1.0; 3]);
    let h = (Tensor::ones([n], &dev) * 0.5f32).half();
    // The sum, 8,388,610.5, is not an f32: within one unit of it.
    let s = read(&h.float().sum_all())[0];
    assert!((s - n as f64 * 0.5).abs() <= 1.0, "sum {s}");
}

struct HalfModel {
    w16: Tensor,
    wbf: Tensor,
}

impl Parameters for HalfModel {
    fn visit(&self, v: &mut ParamVisitor) {
        v.param("w16", &self.w16);
        v.param("wbf", &self.wbf);
    }
}

/// The elements' bit patterns (NaNs compare equal by their bits).
fn bits<T: Element>(t: &Tensor) -> Vec<u32> {
    t.to_vec::<T>()
        .expect("read")
        .into_iter()
        .map(T::to_bits)
        .collect()
}

#[test]
fn safetensors_keep_f16_and_bf16_bits() {
    let dir = std::env::temp_dir().join(format!("lazywgpu-half-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (i, dev) in common::devices().into_iter().enumerate() {
        let values = edge_values();
        let saved = HalfModel {
            w16: tensor_of(F16, &values, &[values.len()], &dev),
            wbf: tensor_of(BF16, &values, &[values.len()], &dev),
        };
        let path = dir.join(format!("half{i}.safetensors"));
        save_safetensors(&saved, &path).expect("save");
        // The file names the dtypes as PyTorch's safetensors does.
        let bytes = std::fs::read(&path).expect("read file");
        let file = safetensors::SafeTensors::deserialize(&bytes).expect("parse");
        assert_eq!(
            file.tensor("w16").expect("w16").dtype(),
            safetensors::Dtype::F16
        );
        assert_eq!(
            file.tensor("wbf").expect("wbf").dtype(),
            safetensors::Dtype::BF16
        );
        let loaded = HalfModel {
            w16: Tensor::zeros([values.len()], &dev).half(),
            wbf: Tensor::zeros([values.len()], &dev).bfloat16(),
        };
        load_safetensors(&loaded, &path).expect("load");
        assert_eq!(
            bits::<f16>(&loaded.w16),
            bits::<f16>(&saved.w16),
            "f16 on {dev:?}"
        );
        assert_eq!(
            bits::<bf16>(&loaded.wbf),
            bits::<bf16>(&saved.wbf),
            "bf16 on {dev:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gradients_flow_through_half_casts_in_the_dtype_of_each_tensor() {
    for dev in common::devices() {
        let w = Tensor::from_vec(vec![0.5f32, -1.25, 2.0], [3], &dev).expect("upload");
        w.requires_grad_(true);
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev)
            .expect("upload")
            .half();
        let y = (&w.half() * &x).float().sum_all();
        y.backward();
        let g = w.grad().expect("grad");
        assert_eq!(g.dtype(), DType::F32);
        assert_eq!(g.to_vec::<f32>().expect("read"), vec![1.0, 2.0, 3.0]);
    }
}

/// `F::layer_norm` on f16 and bf16 input (it used to panic): normalised
/// in f32 and rounded once to the input's dtype, against an f64 loop,
/// with a weight and bias of the same dtype; its gradient flows back in
/// that dtype.
#[test]
fn layer_norm_takes_half_precision_input() {
    use lazywgpu::nn::functional::layer_norm;
    let (rows, len) = (6usize, 40usize);
    let host: Vec<f32> = (0..rows * len)
        .map(|i| ((i * 37 % 101) as f32) * 0.05 - 2.5)
        .collect();
    let want: Vec<f64> = host
        .chunks(len)
        .flat_map(|row| {
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / len as f64;
            let var = row
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / len as f64;
            row.iter()
                .map(move |&v| (f64::from(v) - mean) / (var + 1e-5).sqrt() * 1.5 + 0.25)
                .collect::<Vec<_>>()
        })
        .collect();
    for dev in common::devices() {
        for dtype in [DType::F16, DType::BF16] {
            let x = Tensor::from_vec(host.clone(), [rows, len], &dev)
                .unwrap()
                .cast(dtype);
            let x = x.detach();
            x.requires_grad_(true);
            let w = Tensor::full([len], 1.5f32, &dev).cast(dtype);
            let b = Tensor::full([len], 0.25f32, &dev).cast(dtype);
            let y = layer_norm(&x, &[len], Some(&w), Some(&b), 1e-5);
            assert_eq!(y.dtype(), dtype);
            let got = y.cast(DType::F32).to_vec::<f32>().unwrap();
            // One rounding to 8 (bf16) or 11 (f16) bits of a value up to ~4.
            let tol = if dtype == DType::BF16 { 4e-2 } else { 5e-3 };
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(*g) - w).abs() <= tol * (1.0 + w.abs()),
                    "{} {dtype}: [{i}] {g} where {w}",
                    dev.name()
                );
            }
            y.cast(DType::F32).sum_all().backward();
            let gx = x.grad().expect("a gradient");
            assert_eq!(gx.dtype(), dtype);
            // Each row's gradient of a sum through layer norm is ~0.
            let gx = gx.cast(DType::F32).to_vec::<f32>().unwrap();
            for row in gx.chunks(len) {
                let s: f32 = row.iter().sum();
                assert!(
                    s.abs() < 0.1,
                    "{} {dtype}: row gradient sums to {s}",
                    dev.name()
                );
            }
        }
    }
}
