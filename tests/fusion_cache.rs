//! Kernel counts, cache behaviour, laziness and large dispatches on the
//! GPU, read from the device's counters.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, gpu};
use lazywgpu::{Device, Tensor};

/// W1 of DESIGN.md.
fn w1(x: &Tensor) -> Tensor {
    ((x * 2.0 + 1.0).tanh() - x).sigmoid() * x + 0.5
}

fn w1_f64(x: f32) -> f32 {
    let x = x as f64;
    let s = 1.0 / (1.0 + (-((x * 2.0 + 1.0).tanh() - x)).exp());
    (s * x + 0.5) as f32
}

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0)
        .collect()
}

#[test]
fn w1_is_one_kernel_and_seven_unfused() {
    let Some(dev) = gpu() else { return };
    let n = 1 << 16;
    let x = Tensor::from_vec(data(n), &[n], &dev).unwrap();
    let expected: Vec<f32> = data(n).into_iter().map(w1_f64).collect();

    dev.reset_metrics();
    let y = w1(&x).to_vec::<f32>().unwrap();
    let m = dev.metrics();
    assert_eq!(m.counter("kernel_launches"), 1, "{m}");
    assert_eq!(m.counter("graphs_executed"), 1, "{m}");
    assert_close(&y, &expected, 1e-5, 1e-6, "W1 fused vs f64");

    dev.set_fusion(false);
    dev.reset_metrics();
    let y = w1(&x).to_vec::<f32>().unwrap();
    let m = dev.metrics();
    assert_eq!(m.counter("kernel_launches"), 7, "{m}");
    assert_close(&y, &expected, 1e-5, 1e-6, "W1 unfused vs f64");
}

#[test]
fn same_trace_with_new_data_and_scalars_compiles_once() {
    let Some(dev) = gpu() else { return };
    for step in 0..5 {
        let lr = 0.1 * (step + 1) as f32; // a new scalar value every step
        let x = Tensor::from_vec(data(1000), &[10, 100], &dev).unwrap();
        let w = Tensor::from_vec(vec![step as f32; 100], &[100], &dev).unwrap();
        let y = (&x - &w * lr).relu();
        let got = y.to_vec::<f32>().unwrap();
        let expected: Vec<f32> = data(1000)
            .iter()
            .map(|&v| (v - step as f32 * lr).max(0.0))
            .collect();
        assert_close(&got, &expected, 1e-6, 1e-6, "step values");
    }
    let m = dev.metrics();
    assert_eq!(m.counter("graphs_compiled"), 1, "{m}");
    assert_eq!(m.counter("kernels_compiled"), 1, "{m}");
    assert_eq!(m.counter("graph_cache_hits"), 4, "{m}");

    // A new shape is a new graph.
    let x = Tensor::from_vec(data(2000), &[20, 100], &dev).unwrap();
    let w = Tensor::ones(&[100], &dev);
    (&x - &w * 0.5).relu().to_vec::<f32>().unwrap();
    assert_eq!(dev.metrics().counter("graphs_compiled"), 2);
}

#[test]
fn reading_twice_executes_once() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(data(64), &[64], &dev).unwrap();
    let y = x.exp() + 1.0;
    dev.reset_metrics();
    let a = y.to_vec::<f32>().unwrap();
    let b = y.to_vec::<f32>().unwrap();
    assert_eq!(a, b);
    let m = dev.metrics();
    assert_eq!(m.counter("graphs_executed"), 1, "{m}");
    assert_eq!(m.counter("readbacks"), 2, "{m}");
    assert!(!y.is_pending());
}

#[test]
fn nothing_runs_before_mark_step_and_only_live_tensors_are_stored() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(data(256), &[256], &dev).unwrap();
    dev.reset_metrics();
    let a = x.sin() * 2.0; // live
    let b = {
        let tmp = a.exp(); // dropped: fused away
        tmp - 1.0 // live
    };
    assert_eq!(
        dev.metrics().counter("graphs_executed"),
        0,
        "tracing runs nothing"
    );
    assert!(a.is_pending() && b.is_pending());
    lazywgpu::mark_step(&dev).unwrap();
    let m = dev.metrics();
    assert_eq!(m.counter("graphs_executed"), 1, "{m}");
    assert_eq!(
        m.counter("kernel_launches"),
        1,
        "two outputs of one size share a kernel: {m}"
    );
    assert!(!a.is_pending() && !b.is_pending());
    dev.reset_metrics();
    let bv = b.to_vec::<f32>().unwrap();
    assert_eq!(
        dev.metrics().counter("graphs_executed"),
        0,
        "already computed"
    );
    let expected: Vec<f32> = data(256)
        .iter()
        .map(|&v| ((v as f64).sin() * 2.0).exp() as f32 - 1.0)
        .collect();
    assert_close(&bv, &expected, 1e-4, 1e-5, "b");
    // A step with nothing pending does nothing.
    dev.mark_step().unwrap();
    assert_eq!(dev.metrics().counter("graphs_executed"), 0);
}

#[test]
fn a_readback_runs_only_what_it_needs() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(data(32), &[32], &dev).unwrap();
    let a = x.cos();
    let b = x.sin();
    a.to_vec::<f32>().unwrap();
    assert!(!a.is_pending());
    assert!(b.is_pending(), "b was not needed");
}

#[test]
fn dispatches_past_65535_workgroups_and_2_pow_24_elements() {
    let Some(dev) = gpu() else { return };
    // 2^24 + 4099 elements: more than 65,535 workgroups of 256.
    let n = (1 << 24) + 4099;
    let x = Tensor::arange(0, n as i32, 1, &dev).cast(lazywgpu::DType::F32);
    let y = (&x * 0.5 + 3.0).to_vec::<f32>().unwrap();
    assert_eq!(y.len(), n);
    for &i in &[0usize, 1, 65535 * 256 - 1, 65535 * 256, 1 << 24, n - 1] {
        let xi = i as f32; // rounds like the device's i32 -> f32 cast; * 0.5 is exact
        assert_eq!(y[i], xi * 0.5 + 3.0, "element {i}");
    }
    let tail_ok = y
        .iter()
        .enumerate()
        .step_by(9973)
        .all(|(i, &v)| v == (i as f32) * 0.5 + 3.0);
    assert!(tail_ok);
}

#[test]
fn a_thousand_op_chain_compiles_and_matches() {
    let Some(dev) = gpu() else { return };
    let mut x = Tensor::from_vec(vec![1.0f32], &[1], &dev).unwrap();
    let mut expected = 1.0f32;
    for _ in 0..500 {
        x = x * 1.0001 + 0.0001;
        expected = expected * 1.0001 + 0.0001;
    }
    let got = x.item::<f32>().unwrap();
    assert!(
        (got - expected).abs() <= 1e-5 * expected.abs(),
        "{got} vs {expected}"
    );
    assert_eq!(dev.metrics().counter("kernel_launches"), 1);
}

#[test]
fn scalar_change_does_not_recompile_but_structure_change_does() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(data(16), &[16], &dev).unwrap();
    (&x * 3.0).to_vec::<f32>().unwrap();
    (&x * 4.0).to_vec::<f32>().unwrap();
    assert_eq!(dev.metrics().counter("graphs_compiled"), 1);
    (&x + 4.0).to_vec::<f32>().unwrap();
    assert_eq!(dev.metrics().counter("graphs_compiled"), 2);
}

#[test]
fn cpu_device_runs_the_same_graphs() {
    let dev = Device::cpu();
    let x = Tensor::from_vec(data(100), &[100], &dev).unwrap();
    let y = w1(&x).to_vec::<f32>().unwrap();
    let expected: Vec<f32> = data(100).into_iter().map(w1_f64).collect();
    assert_close(&y, &expected, 1e-5, 1e-6, "W1 on CPU vs f64");
}

/// Chains of ops with distinct scalars (two parameter words an op, read
/// from a uniform buffer) fuse into one kernel and match f64. (Past 16,384
/// words they would be read from a storage buffer: see the unit tests of
/// `codegen::wgsl`; lavapipe takes minutes to compile such a kernel.)
#[test]
fn long_chains_of_distinct_scalars_fuse_and_match() {
    let Some(dev) = gpu() else { return };
    for ops in [100usize, 1_000] {
        let x0 = [0.5f32, -1.0, 2.0, 0.0];
        let mut x = Tensor::from_vec(x0.to_vec(), [4], &dev).unwrap();
        let mut want: Vec<f64> = x0.iter().map(|&v| v as f64).collect();
        for i in 0..ops {
            let (a, b) = (1.0 + (i % 7) as f32 * 1e-5, (i % 5) as f32 * 1e-4);
            x = x * a + b;
            for w in want.iter_mut() {
                *w = (*w * a as f64 + b as f64) as f32 as f64;
            }
        }
        dev.reset_metrics();
        let got = x.to_vec::<f32>().unwrap();
        assert_eq!(dev.metrics().counter("kernel_launches"), 1);
        let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
        // Drivers may contract x * a + b into one fused multiply-add.
        assert_close(&got, &want, 1e-4, 1e-5, &format!("{ops}-op chain"));
    }
}
