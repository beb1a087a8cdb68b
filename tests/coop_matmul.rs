//! The cooperative-matrix matmul (`MatmulChoice::Coop`, tensor cores
//! through wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX`): `f16` products of
//! sizes off its 16-element fragments and 64-element tiles, batched, read
//! through a transposed view, with an epilogue, with NaN and infinities,
//! against an f64 oracle written here. On an adapter that lists the
//! cooperative matrices it uses the kernel must be the cooperative one;
//! elsewhere (lavapipe) the same products run the tiled kernel it falls
//! back to, and the test says which ran.
//!
//! Tolerance: the result is the f64 product rounded to `f16`, within one
//! `f16` unit in the last place plus the error of an `f32` accumulation,
//! `k · 2^-22 · Σ|terms|` (four times `f32`'s rounding bound: matrix units
//! may add in another order and round once per few products).

mod common;

use lazywgpu::half::f16;
use lazywgpu::{DType, Device, DeviceConfig, MatmulChoice, Tensor};

/// `v` rounded to the nearest `f16`, as an f64.
fn to_f16(v: f64) -> f64 {
    f16::from_f64(v).to_f64()
}

/// The unit in the last place of an `f16` at `a`'s magnitude.
fn f16_ulp(a: f64) -> f64 {
    let a = a.abs();
    if a < 2f64.powi(-14) {
        return 2f64.powi(-24);
    }
    2f64.powi(a.log2().floor() as i32 - 10)
}

/// `n` values in [-2, 2) from a seeded generator, rounded to `f16`.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            to_f16((s >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0)
        })
        .collect()
}

/// The `f16` tensor of `values` (exact: they are `f16`s already).
fn tensor(values: &[f64], shape: &[usize], dev: &Device) -> Tensor {
    let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
    Tensor::from_vec(v, shape.to_vec(), dev)
        .expect("upload")
        .cast(DType::F16)
}

/// One product of the batch: `a` (m x k) times `b` (k x n), row-major,
/// exact and the sum of the terms' magnitudes.
fn oracle(a: &[f64], b: &[f64], (m, k, n): (usize, usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let (mut out, mut abs) = (vec![0.0; m * n], vec![0.0; m * n]);
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                let t = a[i * k + p] * b[p * n + j];
                out[i * n + j] += t;
                abs[i * n + j] += t.abs();
            }
        }
    }
    (out, abs)
}

/// Checks `got` against `exact` (rounded to `f16`, then through
/// `epilogue` where the product has one).
#[track_caller]
fn check(
    got: &[f32],
    (exact, abs): (&[f64], &[f64]),
    k: usize,
    epilogue: Option<fn(f64) -> f64>,
    what: &str,
) {
    assert_eq!(got.len(), exact.len(), "{what}: length");
    for (i, ((&g, &e), &s)) in got.iter().zip(exact).zip(abs).enumerate() {
        let want = to_f16(epilogue.map_or(to_f16(e), |f| f(to_f16(e))));
        let g = g as f64;
        if want.is_nan() || want.is_infinite() || s.is_nan() || s.is_infinite() {
            // A NaN or an infinity among the terms: the f64 oracle is NaN
            // exactly where PyTorch's result is (a NaN term, inf - inf,
            // inf * 0), else the same infinity, or what the epilogue
            // makes of it.
            assert!(
                if want.is_nan() { g.is_nan() } else { g == want },
                "{what}: element {i} is {g}, want {want}"
            );
            continue;
        }
        // The product's error, and where an epilogue rounds again, one
        // unit at the result's magnitude.
        let rounded_again = if epilogue.is_some() {
            f16_ulp(want)
        } else {
            0.0
        };
        let tol = f16_ulp(e) + k as f64 * 2f64.powi(-22) * s + rounded_again;
        assert!(
            (g - want).abs() <= tol,
            "{what}: element {i} is {g}, want {want} (within {tol})"
        );
    }
}

/// `relu(v + 1)` in `f16`, NaN kept (PyTorch's relu).
fn bias_relu(v: f64) -> f64 {
    let x = to_f16(to_f16(v) + 1.0);
    if x.is_nan() { x } else { x.max(0.0) }
}

#[test]
fn f16_products_on_cooperative_matrices_match_an_f64_oracle() {
    let Some(_) = common::gpu() else { return };
    let config = DeviceConfig {
        matmul: Some(MatmulChoice::Coop),
        ..DeviceConfig::from_env()
    };
    let dev = Device::gpu_with(config).expect("GPU device");
    let report = dev.adapter().expect("a GPU adapter");
    let listed = report
        .features
        .iter()
        .any(|f| f == "EXPERIMENTAL_COOPERATIVE_MATRIX");
    eprintln!(
        "{}: matmul kernel {} (cooperative matrices {})",
        report.name,
        report.matmul_kernel,
        if listed { "listed" } else { "not listed" }
    );
    assert_eq!(
        report.matmul_kernel.starts_with("coop"),
        listed,
        "the cooperative kernel where the adapter lists its matrices, the tiled one elsewhere"
    );
    let shapes = [
        (1, 1, 1, 1),
        (1, 16, 16, 16),
        (1, 64, 64, 64),
        (1, 65, 33, 70),
        (1, 128, 1000, 96),
        (1, 3, 40, 200),
        (3, 33, 48, 20),
        (2, 70, 40, 66),
    ];
    for (seed, &(batch, m, k, n)) in shapes.iter().enumerate() {
        let seed = seed as u64;
        let mut a_host = values(batch * m * k, 2 * seed + 1);
        let b_host = values(batch * k * n, 2 * seed + 2);
        if m * k > 4 {
            // A NaN and an infinity in the first product's A.
            a_host[1] = f64::NAN;
            a_host[k.min(m * k - 1)] = f64::INFINITY;
        }
        let a = tensor(&a_host, &[batch, m, k], &dev);
        // B through a transposed view of its n x k storage.
        let bt: Vec<f64> = (0..batch * n * k)
            .map(|i| {
                let (e, r) = (i / (n * k), i % (n * k));
                b_host[e * k * n + (r % k) * n + r / k]
            })
            .collect();
        let b = tensor(&bt, &[batch, n, k], &dev).transpose(1, 2);
        let plain = a.matmul(&b);
        let fused = (a.matmul(&b) + 1.0).relu();
        let got = plain.to_f32_vec().expect("product");
        let got_fused = fused.to_f32_vec().expect("product with epilogue");
        for e in 0..batch {
            let (am, bm) = (&a_host[e * m * k..][..m * k], &b_host[e * k * n..][..k * n]);
            let (exact, abs) = oracle(am, bm, (m, k, n));
            let what = format!("{batch}x{m}x{k}x{n} entry {e}");
            let out = &got[e * m * n..][..m * n];
            check(out, (&exact, &abs), k, None, &what);
            let out = &got_fused[e * m * n..][..m * n];
            check(
                out,
                (&exact, &abs),
                k,
                Some(bias_relu),
                &format!("{what} + 1, relu"),
            );
        }
    }
}
