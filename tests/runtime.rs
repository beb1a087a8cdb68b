//! The asynchronous runtime: many steps with reads in between, futures,
//! verification against the CPU reference, recompilation accounting, and
//! a training-shaped loop whose memory stays flat.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, gpu};
use lazywgpu::{Error, Tensor};

#[test]
fn values_stay_right_across_async_steps_with_reads_between() {
    let Some(dev) = gpu() else { return };
    let n = 4096;
    let mut host: Vec<f32> = (0..n).map(|i| i as f32 / n as f32).collect();
    let mut x = Tensor::from_vec(host.clone(), [n], &dev).unwrap();
    for step in 0..60 {
        let k = step as f32 * 0.01;
        // A new handle each step (the old value may be read below while the
        // next step is already submitted).
        let prev = x.clone();
        x = (&x * 0.9 + k).sin();
        dev.mark_step().unwrap();
        host.iter_mut().for_each(|v| *v = (*v * 0.9 + k).sin());
        if step % 7 == 0 {
            // Read the newest value and, after it was overwritten by later
            // submissions' outputs, an older one too.
            assert_close(
                &x.to_vec::<f32>().unwrap(),
                &host,
                1e-5,
                1e-6,
                &format!("step {step}"),
            );
            assert!(!prev.is_pending());
        }
    }
    assert_close(&x.to_vec::<f32>().unwrap(), &host, 1e-5, 1e-6, "final");
    assert_eq!(
        dev.metrics().counter("graphs_compiled"),
        1,
        "one graph for the whole loop"
    );
}

#[test]
fn futures_read_values() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev).unwrap();
    let y = &x * 2.0;
    let s = (&x * 0.0 + 7.0).reshape([3]).select(0, 1);
    let (v, item) = futures::executor::block_on(async {
        (y.to_vec_async::<f32>().await, s.item_async::<f32>().await)
    });
    assert_eq!(v.unwrap(), vec![2.0, 4.0, 6.0]);
    assert_eq!(item.unwrap(), 7.0);
    dev.wait().unwrap();
}

#[test]
fn verify_mode_catches_a_corrupted_kernel_result() {
    let Some(dev) = gpu() else { return };
    dev.set_verify(true);
    let x = Tensor::from_vec(
        (0..64).map(|v| v as f32 * 0.1).collect::<Vec<_>>(),
        [64],
        &dev,
    )
    .unwrap();
    // A correct graph verifies.
    let ok = (&x * 2.0).exp().to_vec::<f32>();
    assert!(ok.is_ok(), "{ok:?}");
    // A corrupted one is named: op, graph and the user's line.
    dev.debug_corrupt_next_result();
    let line = line!() + 1;
    let bad = (&x + 1.0).sqrt();
    match bad.to_vec::<f32>() {
        Err(Error::VerifyMismatch {
            op,
            location,
            max_abs,
            ..
        }) => {
            assert_eq!(op, "sqrt");
            assert!(
                location.contains(&format!("{}:{line}", file!())),
                "{location}"
            );
            assert!(max_abs > 1.0);
        }
        other => panic!("expected a verify mismatch, got {other:?}"),
    }
}

#[test]
fn a_shape_change_at_the_same_site_counts_as_a_recompile() {
    let Some(dev) = gpu() else { return };
    for n in [16usize, 16, 32] {
        let x = Tensor::ones([n], &dev);
        let y = (&x * 3.0).relu();
        y.to_vec::<f32>().unwrap();
    }
    let m = dev.metrics();
    assert_eq!(m.counter("graphs_compiled"), 2, "{m}");
    assert_eq!(m.counter("recompiles"), 1, "{m}");
    assert!(m.timer("compile").is_some_and(|t| t.count == 2));
    assert!(m.timer("encode_submit").is_some_and(|t| t.count == 3));
    let report = m.to_string();
    assert!(
        report.contains("median") && report.contains("graphs_compiled"),
        "{report}"
    );
}

#[test]
fn a_thousand_step_training_shaped_loop_keeps_memory_flat() {
    let Some(dev) = gpu() else { return };
    // A per-feature linear model y = tanh(w * x + b) trained by hand-written
    // gradients: forward, backward and update traced into one graph a step.
    let n = 4096;
    dev.manual_seed(3);
    let x = Tensor::rand([n], &dev);
    let target = (&x * 0.5 - 0.25).tanh();
    let w = Tensor::zeros([n], &dev);
    let b = Tensor::zeros([n], &dev);
    dev.mark_step().unwrap();
    let lr = 0.5f32;
    let mut flat = None;
    for step in 0..1000 {
        let pred = (&w * &x + &b).tanh();
        let err = &pred - &target;
        let dpre = &err * (1.0 - &pred * &pred);
        w.sub_(&(&dpre * &x) * lr);
        b.sub_(&dpre * lr);
        dev.mark_step().unwrap();
        // pred, err and dpre are still in scope at the step, so they are
        // stored too (as PyTorch's lazy tensors store every live tensor);
        // compare like with like: at the same point of each iteration.
        dev.wait().unwrap();
        let m = dev.metrics();
        let levels = (m.counter("bytes_live"), m.counter("bytes_pooled"));
        if step == 2 {
            dev.reset_metrics();
            flat = Some(levels);
        } else if step > 2 {
            assert_eq!(Some(levels), flat, "step {step}: {m}");
        }
    }
    let m = dev.metrics();
    assert_eq!(m.counter("graphs_compiled"), 0, "{m}");
    assert_eq!(m.counter("buffers_allocated"), 0, "{m}");
    println!("metrics after 1,000 steps:\n{m}");
    let wv = w.to_vec::<f32>().unwrap();
    let bv = b.to_vec::<f32>().unwrap();
    let xv = x.to_vec::<f32>().unwrap();
    // Converged: w * x + b ≈ 0.5 x - 0.25 at each x.
    for i in (0..n).step_by(257) {
        let fit = wv[i] * xv[i] + bv[i];
        assert!(
            (fit - (0.5 * xv[i] - 0.25)).abs() < 2e-3,
            "feature {i}: {fit}"
        );
    }
}

/// The adapter report agrees with the device it describes: its name is
/// the device's, its limits are ordered as wgpu guarantees, a buffer one
/// element past its largest is refused by name, and the CPU backend has
/// none.
#[test]
fn the_adapter_report_describes_the_device() {
    assert!(lazywgpu::Device::cpu().adapter().is_none());
    let Some(dev) = common::gpu() else { return };
    let report = dev.adapter().expect("a GPU device has an adapter report");
    assert!(dev.name().starts_with(&report.name), "{report}");
    assert!(report.max_buffer_bytes >= report.max_storage_binding_bytes);
    assert!(report.subgroup_sizes.0 <= report.subgroup_sizes.1);
    assert!(report.max_workgroups_per_dimension >= 65_535);
    let text = report.to_string();
    assert!(text.contains(&report.matmul_kernel), "{text}");
    let n = (report.max_buffer_bytes / 4 + 1) as usize;
    match (Tensor::zeros([n], &dev) + 1.0).to_vec::<f32>() {
        Err(Error::TooLarge { bytes, limit, .. }) => {
            assert_eq!(limit, report.max_buffer_bytes);
            assert!(bytes > limit);
        }
        other => panic!(
            "{n} elements past the report's limit: {:?}",
            other.map(|v| v.len())
        ),
    }
}

/// The work a step does, in the metrics: bytes the kernels bind for
/// reading and writing, and the matmuls' 2·m·n·k.
#[test]
fn the_metrics_count_the_bytes_and_flops_of_a_step() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(vec![0.5f32; 1000], [1000], &dev).unwrap();
    dev.reset_metrics();
    let y = ((&x * 2.0).exp() + 1.0).to_vec::<f32>().unwrap();
    assert_eq!(y.len(), 1000);
    let m = dev.metrics();
    // One fused kernel: 4,000 bytes in, 4,000 out.
    assert_eq!(m.counter("kernel_bytes_read"), 4000, "{m}");
    assert_eq!(m.counter("kernel_bytes_written"), 4000, "{m}");
    assert_eq!(m.counter("matmul_flops"), 0);
    let a = Tensor::from_vec(vec![1.0f32; 64 * 32], [64, 32], &dev).unwrap();
    let b = Tensor::from_vec(vec![1.0f32; 32 * 16], [32, 16], &dev).unwrap();
    dev.reset_metrics();
    let c = a.matmul(&b).to_vec::<f32>().unwrap();
    assert_eq!(c[0], 32.0);
    let m = dev.metrics();
    assert_eq!(m.counter("matmul_flops"), 2 * 64 * 16 * 32);
    assert!(
        m.counter("kernel_bytes_read") >= (64 * 32 + 32 * 16) * 4,
        "{m}"
    );
    assert!(m.counter("kernel_bytes_written") >= 64 * 16 * 4, "{m}");
}
