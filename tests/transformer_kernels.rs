//! Kernel counts of the transformer's fused ops on the GPU: layer norm is
//! one kernel forward (weight in its epilogue) and two backward (the
//! input's gradient, the weight's reduction); attention is three kernels
//! (scores with scale and mask, softmax, the product with v), or one with
//! `DeviceConfig::fused_attention` and no mask tensor, whose values and
//! gradients match the three-kernel path.

mod common;

use lazywgpu::nn::functional::{layer_norm, scaled_dot_product_attention};
use lazywgpu::{Device, DeviceConfig, Tensor};

fn launches(dev: &Device) -> u64 {
    dev.metrics().counter("kernel_launches")
}

#[test]
fn layer_norm_is_one_kernel_forward_and_two_backward() {
    let Some(dev) = common::gpu() else { return };
    let x = Tensor::randn([12, 64, 128], &dev);
    x.requires_grad_(true);
    let w = Tensor::ones([128], &dev);
    w.requires_grad_(true);
    let r = Tensor::randn([12, 64, 128], &dev);
    dev.mark_step().unwrap();
    let before = launches(&dev);
    let y = layer_norm(&x, &[128], Some(&w), None, 1e-5);
    y.to_vec::<f32>().unwrap();
    assert_eq!(launches(&dev) - before, 1, "layer_norm forward");
    let before = launches(&dev);
    (&y * &r).sum_all().backward();
    let gx = x.grad().unwrap();
    let gw = w.grad().unwrap();
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    // The loss's sum is a reduction of its own.
    assert_eq!(
        launches(&dev) - before,
        3,
        "layer_norm backward and the loss"
    );
    assert_eq!(gx.shape(), x.shape());
    assert_eq!(gw.shape(), w.shape());
}

#[test]
fn attention_is_three_kernels_or_one_fused() {
    let Some(dev) = common::gpu() else { return };
    let q = Tensor::randn([12, 4, 64, 32], &dev);
    dev.mark_step().unwrap();
    let before = launches(&dev);
    let a = scaled_dot_product_attention(&q, &q, &q, None, true);
    a.to_vec::<f32>().unwrap();
    assert_eq!(launches(&dev) - before, 3, "attention");
    let fused = Device::gpu_with(DeviceConfig {
        fused_attention: true,
        ..DeviceConfig::default()
    })
    .expect("a GPU");
    let q = Tensor::randn([12, 4, 64, 32], &fused);
    fused.mark_step().unwrap();
    for causal in [true, false] {
        let before = launches(&fused);
        let a = scaled_dot_product_attention(&q, &q, &q, None, causal);
        a.to_vec::<f32>().unwrap();
        assert_eq!(
            launches(&fused) - before,
            1,
            "fused attention, causal {causal}"
        );
    }
}

/// The fused kernel (and its recomputing gradient) against the
/// three-kernel path on random views, causal or not, L != S, and against
/// an f64 loop on the CPU reference's fused op.
#[test]
fn fused_attention_matches_the_three_kernel_path() {
    let config = DeviceConfig {
        fused_attention: true,
        ..DeviceConfig::default()
    };
    let mut devices = vec![(Device::cpu_with(config.clone()), Device::cpu())];
    if let Ok(gpu) = Device::gpu_with(config) {
        devices.push((gpu, common::gpu().expect("a GPU")));
    }
    for (fused_dev, plain_dev) in devices {
        for (causal, l, s) in [(true, 13, 13), (false, 5, 7), (true, 9, 4)] {
            let shapes = [[2, 3, l, 6], [2, 3, s, 6], [2, 3, s, 5]];
            let data: Vec<Vec<f32>> = shapes
                .iter()
                .enumerate()
                .map(|(t, sh)| {
                    let n: usize = sh.iter().product();
                    (0..n)
                        .map(|i| (((i * 37 + t * 11) % 29) as f32 - 14.0) / 9.0)
                        .collect()
                })
                .collect();
            let run = |dev: &Device| {
                let xs: Vec<Tensor> = shapes
                    .iter()
                    .zip(&data)
                    .map(|(sh, d)| {
                        let t = Tensor::from_vec(d.clone(), *sh, dev).unwrap();
                        t.requires_grad_(true);
                        t
                    })
                    .collect();
                let out = scaled_dot_product_attention(&xs[0], &xs[1], &xs[2], None, causal);
                let w = Tensor::from_vec(
                    (0..out.numel())
                        .map(|i| (i % 7) as f32 - 3.0)
                        .collect::<Vec<_>>(),
                    out.shape(),
                    dev,
                )
                .unwrap();
                (&out * &w).sum_all().backward();
                let mut vals = vec![out.to_vec::<f32>().unwrap()];
                vals.extend(
                    xs.iter()
                        .map(|x| x.grad().unwrap().to_vec::<f32>().unwrap()),
                );
                vals
            };
            let (fused, plain) = (run(&fused_dev), run(&plain_dev));
            for (what, (a, b)) in ["out", "dq", "dk", "dv"]
                .iter()
                .zip(fused.iter().zip(&plain))
            {
                common::assert_close(
                    a,
                    b,
                    1e-4,
                    1e-5,
                    &format!("{what} causal {causal} L {l} S {s} on {}", fused_dev.name()),
                );
            }
        }
    }
}

/// A row whose elements are all equal normalises to exact zeros, as in
/// PyTorch (its Welford moments find such a row's mean exactly): the
/// kernel's mean is taken about the row's first element, so neither the
/// rounding of a sum of many `0.1`s nor a driver's reciprocal-and-FMA
/// division (NVIDIA's Vulkan driver gave -1.4e-5 for rows of 3.0) can
/// leave the mean an ulp off the elements. With `weight` and `bias`, the
/// output is the bias exactly. Rows of several lengths and magnitudes.
#[test]
fn layer_norm_of_constant_rows_is_exactly_zero() {
    for dev in common::devices() {
        for &value in &[0.1f32, 3.0, -7.3, 1.0e4 + 0.3, 1.0e-3, 0.7] {
            for &len in &[1usize, 5, 10, 33, 128, 1000] {
                // Stored data, not a literal the kernel could fold.
                let x = Tensor::from_vec(vec![value; 3 * len], [3, len], &dev).unwrap();
                let y = layer_norm(&x, &[len], None, None, 1e-5);
                let got = y.to_vec::<f32>().unwrap();
                let off: Vec<_> = got.iter().filter(|v| **v != 0.0).take(3).collect();
                assert!(
                    off.is_empty(),
                    "{}: layer_norm of rows of {value} x {len}: {off:?} where 0",
                    dev.name()
                );
                let bias = Tensor::full([len], 0.25f32, &dev);
                let weight = Tensor::full([len], 3.0f32, &dev);
                let z = layer_norm(&x, &[len], Some(&weight), Some(&bias), 1e-5);
                assert!(z.to_vec::<f32>().unwrap().iter().all(|v| *v == 0.25));
            }
        }
    }
}

/// Layer norm over rows of 132 (a multiple of four) reads its rows four
/// elements a load on a CPU adapter, forward and backward; rows of 130
/// one at a time. Values and the input's gradient against f64 loops.
#[test]
fn layer_norm_rows_read_four_at_a_time_match_f64() {
    let Some(_) = common::gpu() else { return };
    for (len, four) in [(132usize, true), (130, false)] {
        let dir = std::env::temp_dir().join(format!("lazywgpu-ln4-{len}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        let dev = Device::gpu_with(DeviceConfig {
            dump_dir: Some(dir.clone()),
            ..DeviceConfig::default()
        })
        .expect("a GPU");
        let rows = 37;
        let xs: Vec<f32> = common::data(rows * len, 3)
            .iter()
            .map(|v| v * 3.0 + 1.0)
            .collect();
        let ws = common::data(len, 4);
        let rs = common::data(rows * len, 5);
        let x = Tensor::from_vec(xs.clone(), [rows, len], &dev).unwrap();
        x.requires_grad_(true);
        let w = Tensor::from_vec(ws.clone(), [len], &dev).unwrap();
        let r = Tensor::from_vec(rs.clone(), [rows, len], &dev).unwrap();
        let y = layer_norm(&x, &[len], Some(&w), None, 1e-5);
        (&y * &r).sum_all().backward();
        let (got_y, got_gx) = (
            y.to_vec::<f32>().unwrap(),
            x.grad().unwrap().to_vec::<f32>().unwrap(),
        );
        let (mut want_y, mut want_gx) = (Vec::new(), Vec::new());
        for row in 0..rows {
            let v: Vec<f64> = xs[row * len..(row + 1) * len]
                .iter()
                .map(|&a| a as f64)
                .collect();
            let mean = v.iter().sum::<f64>() / len as f64;
            let var = v.iter().map(|a| (a - mean) * (a - mean)).sum::<f64>() / len as f64;
            let rstd = 1.0 / (var + 1e-5).sqrt();
            let xh: Vec<f64> = v.iter().map(|a| (a - mean) * rstd).collect();
            // dL/dxhat = r * w; dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
            let g: Vec<f64> = (0..len)
                .map(|k| rs[row * len + k] as f64 * ws[k] as f64)
                .collect();
            let mg = g.iter().sum::<f64>() / len as f64;
            let mgx = g.iter().zip(&xh).map(|(a, b)| a * b).sum::<f64>() / len as f64;
            for k in 0..len {
                want_y.push((xh[k] * ws[k] as f64) as f32);
                want_gx.push((rstd * (g[k] - mg - xh[k] * mgx)) as f32);
            }
        }
        common::assert_close(
            &got_y,
            &want_y,
            1e-4,
            1e-4,
            &format!("layer_norm rows of {len}"),
        );
        common::assert_close(
            &got_gx,
            &want_gx,
            1e-4,
            1e-4,
            &format!("its gradient, rows of {len}"),
        );
        let plans = common::dumped_plans(&dir);
        let norms: Vec<&String> = plans
            .iter()
            .filter(|p| p.contains("strategy: RowNorm"))
            .collect();
        assert_eq!(norms.len(), 2, "forward and backward");
        for plan in norms {
            let vec4 = plan.contains("RowNorm { vec4: true }");
            assert!(
                vec4 == four || common::gpu_schedules(&dev),
                "rows of {len}:\n{plan}"
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
