//! The GPUs' layer norm (a row per workgroup, `Target::rows_per_workgroup`)
//! run on the adapter the tests have (lavapipe in CI, whose own kernel is
//! a row per invocation), forward and backward, against the CPU
//! reference: rows shorter and longer than the workgroup, not a multiple
//! of it, long rows, constant rows (exact zeros) and a NaN row; and the
//! GPUs' softmax rows per workgroup.

use crate::kernel::Target;
use crate::nn::functional::layer_norm;
use crate::{Device, Tensor};

fn per_workgroup_device() -> Option<Device> {
    let mut target = Target::lavapipe();
    target.rows_per_workgroup = true;
    Device::gpu_for_target(target)
}

fn data(n: usize, seed: u64) -> Vec<f32> {
    crate::test_values::spread(n, seed, -2.0, 4.0)
}

/// Output, and the gradients of x, weight and bias for `sum(y * r)`.
fn run(dev: &Device, (rows, len): (usize, usize), x: &[f32]) -> [Vec<f32>; 4] {
    let t = |v: Vec<f32>, shape: Vec<usize>| {
        let t = Tensor::from_vec(v, shape, dev).unwrap();
        t.requires_grad_(true);
        t
    };
    let xt = t(x.to_vec(), vec![rows, len]);
    let w = t(data(len, 3), vec![len]);
    let b = t(data(len, 4), vec![len]);
    let r = Tensor::from_vec(data(rows * len, 5), [rows, len], dev).unwrap();
    let y = layer_norm(&xt, &[len], Some(&w), Some(&b), 1e-5);
    (&y * &r).sum_all().backward();
    let read = |t: &Tensor| t.to_vec::<f32>().unwrap();
    [
        read(&y),
        read(&xt.grad().unwrap()),
        read(&w.grad().unwrap()),
        read(&b.grad().unwrap()),
    ]
}

#[test]
fn a_row_per_workgroup_matches_the_cpu_reference() {
    let Some(gpu) = per_workgroup_device() else {
        return;
    };
    let cpu = Device::cpu();
    for &(rows, len) in &[
        (768usize, 128usize),
        (5, 1000),
        (3, 7),
        (2, 64),
        (4, 65),
        (1, 70_001),
    ] {
        let mut x = data(rows * len, (rows * 31 + len) as u64);
        if rows > 2 {
            // A constant row, a row holding a NaN, and where rows allow,
            // a NaN and an infinity as the first element (the shift the
            // moments are taken about) and a row with both infinities.
            x[..len].fill(0.1);
            x[2 * len + len / 2] = f32::NAN;
            if rows > 4 && len > 1 {
                x[3 * len] = f32::NAN;
                x[4 * len] = f32::INFINITY;
                x[len + 1] = f32::INFINITY;
                x[len] = f32::NEG_INFINITY;
            }
        }
        let got = run(&gpu, (rows, len), &x);
        let want = run(&cpu, (rows, len), &x);
        for (what, (g, w)) in ["y", "dx", "dweight", "dbias"]
            .iter()
            .zip(got.iter().zip(&want))
        {
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                let ok = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 2e-3 * (1.0 + b.abs());
                assert!(ok, "{rows}x{len} {what}[{i}]: {a} where the CPU has {b}");
            }
        }
        if rows > 2 {
            let y = &got[0][..len];
            let bias = data(len, 4);
            assert!(
                y.iter().zip(&bias).all(|(a, b)| a == b),
                "a constant row is the bias exactly"
            );
        }
    }
}

/// The GPUs' softmax rule (a workgroup per row from `GPU_ROW_MIN`
/// elements) on this adapter, softmax and log-softmax with their
/// gradients, against the CPU reference; rows of -inf and with +inf give
/// PyTorch's NaNs.
#[test]
fn softmax_rows_per_workgroup_match_the_cpu_reference() {
    let Some(gpu) = per_workgroup_device() else {
        return;
    };
    let cpu = Device::cpu();
    for &(rows, len) in &[
        (4096usize, 1024usize),
        (3, 64),
        (5, 1000),
        (2, 70_001),
        (7, 10),
    ] {
        let mut x = data(rows * len, (rows + len) as u64);
        if rows > 2 {
            x[..len].fill(f32::NEG_INFINITY);
            x[len + 3] = f32::INFINITY;
        }
        let run = |dev: &Device| {
            let xt = Tensor::from_vec(x.clone(), [rows, len], dev).unwrap();
            xt.requires_grad_(true);
            let r = Tensor::from_vec(data(rows * len, 9), [rows, len], dev).unwrap();
            let s = xt.softmax(-1);
            let l = xt.log_softmax(-1);
            ((&s * &r).sum_all() + (&l * &r).sum_all()).backward();
            [
                s.to_vec::<f32>().unwrap(),
                l.to_vec::<f32>().unwrap(),
                xt.grad().unwrap().to_vec::<f32>().unwrap(),
            ]
        };
        let (got, want) = (run(&gpu), run(&cpu));
        for (what, (g, w)) in ["softmax", "log_softmax", "dx"]
            .iter()
            .zip(got.iter().zip(&want))
        {
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                let ok =
                    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-4 * (1.0 + b.abs());
                assert!(ok, "{rows}x{len} {what}[{i}]: {a} where the CPU has {b}");
            }
        }
    }
}

/// RMS norm's kernels a row per workgroup (GPUs) against the CPU
/// reference, forward and both gradients, rows shorter and longer than
/// the workgroup and past the loop limit, with a row of zeros and a NaN.
#[test]
fn rms_rows_per_workgroup_match_the_cpu_reference() {
    use crate::nn::functional::rms_norm;
    let Some(gpu) = per_workgroup_device() else {
        return;
    };
    let cpu = Device::cpu();
    for &(rows, len) in &[(300usize, 128usize), (3, 7), (4, 65), (1, 70_001)] {
        let mut x = data(rows * len, (rows * 7 + len) as u64);
        if rows > 2 {
            x[..len].fill(0.0);
            x[2 * len + 1] = f32::NAN;
        }
        let run = |dev: &Device| {
            let xt = Tensor::from_vec(x.clone(), [rows, len], dev).unwrap();
            xt.requires_grad_(true);
            let w = Tensor::from_vec(data(len, 3), [len], dev).unwrap();
            w.requires_grad_(true);
            let r = Tensor::from_vec(data(rows * len, 5), [rows, len], dev).unwrap();
            let y = rms_norm(&xt, &[len], Some(&w), Some(1e-5));
            (&y * &r).sum_all().backward();
            [
                y.to_vec::<f32>().unwrap(),
                xt.grad().unwrap().to_vec::<f32>().unwrap(),
                w.grad().unwrap().to_vec::<f32>().unwrap(),
            ]
        };
        let (got, want) = (run(&gpu), run(&cpu));
        for (what, (g, w)) in ["y", "dx", "dweight"].iter().zip(got.iter().zip(&want)) {
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                let ok = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 2e-3 * (1.0 + b.abs());
                assert!(ok, "{rows}x{len} {what}[{i}]: {a} where the CPU has {b}");
            }
        }
    }
}
