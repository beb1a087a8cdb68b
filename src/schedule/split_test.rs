//! A GPU's reduction stages (`ReduceSplit::GPU`: split from 4,096
//! elements, 32 a part, up to four stages) run on the adapter the tests
//! have (lavapipe in CI, whose own policy splits only from 65,536), and
//! checked against f64 loops: sums, means, products, maxima and minima of
//! all elements and of a few long rows, at sizes around each stage's
//! threshold, with a NaN where one must win.

use crate::kernel::{ReduceSplit, Target};
use crate::{Device, Tensor};

fn gpu_policy_device() -> Option<Device> {
    let mut target = Target::lavapipe();
    target.reduce_split = ReduceSplit::GPU;
    Device::gpu_for_target(target)
}

/// Values in [0.5, 1.5): products of thousands stay finite.
fn values(n: usize, seed: u64) -> Vec<f32> {
    crate::test_values::spread(n, seed, 0.5, 1.0)
}

fn close(got: f32, want: f64, what: &str) {
    close_within(got, want, 1e-5, what);
}

/// `got` within `rel` of `want` (relative, at least absolute `rel`).
fn close_within(got: f32, want: f64, rel: f64, what: &str) {
    let tol = rel * want.abs().max(1.0);
    assert!(
        (f64::from(got) - want).abs() <= tol || (got.is_nan() && want.is_nan()),
        "{what}: {got} where {want}"
    );
}

#[test]
fn reductions_split_into_a_gpus_stages_match_f64_loops() {
    let Some(dev) = gpu_policy_device() else {
        return;
    };
    for &n in &[4095usize, 4096, 8192, 49_152, 131_073, 1 << 20] {
        let host = values(n, n as u64);
        let x = Tensor::from_vec(host.clone(), [n], &dev).unwrap();
        let sum: f64 = host.iter().map(|&v| f64::from(v)).sum();
        close(
            x.sum_all().item::<f32>().unwrap(),
            sum,
            &format!("sum of {n}"),
        );
        close(
            x.mean_all().item::<f32>().unwrap(),
            sum / n as f64,
            &format!("mean of {n}"),
        );
        let max = host.iter().copied().fold(f32::MIN, f32::max);
        let min = host.iter().copied().fold(f32::MAX, f32::min);
        close(
            x.max_all().item::<f32>().unwrap(),
            f64::from(max),
            &format!("max of {n}"),
        );
        close(
            x.min_all().item::<f32>().unwrap(),
            f64::from(min),
            &format!("min of {n}"),
        );
        // A product near 1: each value scaled so the logs cancel.
        let scaled: Vec<f32> = host.iter().map(|&v| 1.0 + (v - 1.0) * 1e-3).collect();
        let prod: f64 = scaled.iter().map(|&v| f64::from(v)).product();
        let xs = Tensor::from_vec(scaled, [n], &dev).unwrap();
        // f32 products round at each of n steps: n * 2^-24 at worst.
        let got = xs.prod(Vec::<isize>::new(), false).item::<f32>().unwrap();
        close_within(got, prod, n as f64 * 6e-8, &format!("prod of {n}"));
        // A NaN anywhere wins the maximum and the sum.
        let mut nan = host.clone();
        nan[n * 2 / 3] = f32::NAN;
        let xn = Tensor::from_vec(nan, [n], &dev).unwrap();
        assert!(
            xn.max_all().item::<f32>().unwrap().is_nan(),
            "max with a NaN, {n}"
        );
        assert!(
            xn.sum_all().item::<f32>().unwrap().is_nan(),
            "sum with a NaN, {n}"
        );
    }
    // Three long rows, summed along the row (few outputs: split), and
    // along the strided axis of the transpose.
    let (rows, cols) = (3usize, 70_001usize);
    let host = values(rows * cols, 7);
    let x = Tensor::from_vec(host.clone(), [rows, cols], &dev).unwrap();
    let got = x.sum([1], false).to_vec::<f32>().unwrap();
    let by_t = x.t().sum([0], false).to_vec::<f32>().unwrap();
    for r in 0..rows {
        let want: f64 = host[r * cols..(r + 1) * cols]
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        close(got[r], want, &format!("row {r}"));
        close(by_t[r], want, &format!("row {r} through the transpose"));
    }
}
