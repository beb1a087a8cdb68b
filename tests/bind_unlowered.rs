//! New sizes of a trace site bound to the site's kernels without lowering
//! them (`graphs_bound`; `kernels_lowered` does not grow), where the
//! site's kernels were shown generic and their guards hold; lowered again
//! where a guard is crossed or a number that never changed does. Values
//! against the CPU reference device running the same program and against
//! f64 loops; the devices here check each bound graph against lowering it
//! (`DeviceConfig::check_binds`) but one, which binds as a user's does.

mod common;

use lazywgpu::nn::functional as F;
use lazywgpu::optim::{Optimizer, Sgd};
use lazywgpu::{DType, Device, DeviceConfig, Tensor};

/// A GPU device that checks what it binds unlowered (`check`) or not.
fn gpu(check: bool) -> Option<Device> {
    common::gpu()?;
    let config = DeviceConfig {
        check_binds: check,
        ..DeviceConfig::default()
    };
    Some(Device::gpu_with(config).expect("a GPU device"))
}

/// A two-layer MLP's training step (SGD) on `dev` at each batch size of
/// `batches`, from the same weights and data on every device: per size,
/// the loss and the first layer's weights after the step.
fn mlp_steps(dev: &Device, batches: &[usize]) -> Vec<(f32, Vec<f32>)> {
    let param = |data: Vec<f32>, shape: [usize; 2]| {
        let w = Tensor::from_vec(data, shape, dev).unwrap();
        w.requires_grad_(true);
        w
    };
    let w1 = param(
        common::data(32 * 16, 1).iter().map(|v| v * 0.3).collect(),
        [32, 16],
    );
    let w2 = param(
        common::data(16 * 4, 2).iter().map(|v| v * 0.5).collect(),
        [16, 4],
    );
    let mut opt = Sgd::new(vec![w1.clone(), w2.clone()], 0.05);
    let mut out = Vec::new();
    for &b in batches {
        let x = Tensor::from_vec(common::data(b * 32, b as u64), [b, 32], dev).unwrap();
        let labels: Vec<i32> = (0..b).map(|i| (i * 7 % 4) as i32).collect();
        let y = Tensor::from_vec(labels, [b], dev).unwrap();
        opt.zero_grad();
        let loss = F::cross_entropy(&x.matmul(&w1).relu().matmul(&w2), &y);
        loss.backward();
        opt.step();
        let l = loss.to_vec::<f32>().unwrap()[0];
        out.push((l, w1.to_vec::<f32>().unwrap()));
        dev.mark_step().unwrap();
    }
    out
}

/// Batch sizes 64, 50, 33 compile and show the step's kernels generic;
/// later sizes bind them, except the first of each class a guard tells
/// apart (a batch a multiple of four or not, for the lane matmul's
/// in-place reads), which lowers once. Run again from the same weights
/// on the same trace sites, with 20 sizes more: the sizes seen are found
/// compiled, and the 20 new ones lower nothing.
#[test]
fn new_batch_sizes_of_a_training_step_bind_without_lowering() {
    let batches: Vec<usize> = [64, 50, 33].into_iter().chain(65..105).collect();
    let want = mlp_steps(&Device::cpu(), &batches);
    for check in [true, false] {
        let Some(dev) = gpu(check) else { return };
        mlp_steps(&dev, &batches[..batches.len() - 20]);
        let (lowered, bound) = (
            dev.metrics().counter("kernels_lowered"),
            dev.metrics().counter("graphs_bound"),
        );
        let got = mlp_steps(&dev, &batches);
        let m = dev.metrics();
        let what = format!("check_binds {check}: {m}");
        // Checking lowers each bound graph a second time.
        if !check {
            assert_eq!(m.counter("kernels_lowered"), lowered, "{what}");
        }
        assert!(m.counter("graphs_bound") >= bound + 20, "{what}");
        for (i, ((gl, gw), (wl, ww))) in got.iter().zip(&want).enumerate() {
            let at = format!("batch {} (step {i}), check_binds {check}", batches[i]);
            common::assert_close(&[*gl], &[*wl], 1e-4, 1e-5, &format!("loss at {at}"));
            common::assert_close(gw, ww, 1e-4, 1e-5, &format!("weights at {at}"));
        }
    }
}

/// Column sums of `[rows, 263]` values (a sum over the rows, read
/// transposed), at row counts that bind the site's kernels, cross the
/// reduction's guards (70,000 rows: a workgroup tree; lavapipe would end
/// a loop that long), and bind both kinds again: each against f64 sums.
#[test]
fn a_crossed_guard_lowers_again_and_the_sizes_past_it_bind_their_own_kernels() {
    let Some(dev) = gpu(true) else { return };
    let mut bound = Vec::new();
    for b in [5usize, 8, 9, 10, 70_000, 70_001, 70_002, 11] {
        let data = common::data(b * 263, b as u64);
        let x = Tensor::from_vec(data.clone(), [b, 263], &dev).unwrap();
        let got = x.t().sum([1], false).to_vec::<f32>().unwrap();
        let want: Vec<f32> = (0..263)
            .map(|c| (0..b).map(|r| data[r * 263 + c] as f64).sum::<f64>() as f32)
            .collect();
        common::assert_close(&got, &want, 1e-4, 1e-3, &format!("column sums of {b} rows"));
        dev.mark_step().unwrap();
        bound.push(dev.metrics().counter("graphs_bound"));
    }
    let m = dev.metrics();
    // 8 lowers the site's kernels generic, 9 lowers to them (which shows
    // them generic) and 10 binds them; 70,000 crosses a guard and lowers,
    // 70,001 shows its kernels generic and 70,002 binds them; 11 binds
    // the kernels 10 bound, which the site keeps beside them.
    let binds = |i: usize| bound[i] > bound[i - 1];
    assert!(binds(3), "10 binds: {bound:?}; {m}");
    assert!(!binds(4), "70,000 lowers again: {bound:?}; {m}");
    assert!(binds(6) && binds(7), "70,002 and 11 bind: {bound:?}; {m}");
}

/// A number that never changed at a site (the row length, 16) changing
/// later lowers the graph again: the site's kernels hold it as a literal.
#[test]
fn a_number_that_had_not_changed_lowers_again_when_it_changes() {
    let Some(dev) = gpu(true) else { return };
    let sizes = [
        (6usize, 16usize),
        (7, 16),
        (9, 16),
        (10, 16),
        (10, 24),
        (11, 24),
    ];
    let mut bound = Vec::new();
    for (rows, len) in sizes {
        let data = common::data(rows * len, (rows * len) as u64);
        let x = Tensor::from_vec(data.clone(), [rows, len], &dev).unwrap();
        let got = (x.exp() * 0.5).softmax(1).to_vec::<f32>().unwrap();
        for r in 0..rows {
            let row: Vec<f64> = (0..len)
                .map(|c| (data[r * len + c] as f64).exp() * 0.5)
                .collect();
            let max = row.iter().cloned().fold(f64::MIN, f64::max);
            let total: f64 = row.iter().map(|v| (v - max).exp()).sum();
            let want: Vec<f32> = row
                .iter()
                .map(|v| ((v - max).exp() / total) as f32)
                .collect();
            let at = format!("softmax of {rows} x {len}, row {r}");
            common::assert_close(&got[r * len..(r + 1) * len], &want, 1e-5, 1e-6, &at);
        }
        dev.mark_step().unwrap();
        bound.push(dev.metrics().counter("graphs_bound"));
    }
    let m = dev.metrics();
    assert!(bound[3] > bound[2], "10 rows bind: {bound:?}; {m}");
    assert_eq!(bound[4], bound[3], "rows of 24 lower: {bound:?}; {m}");
}

/// A device that dumps its kernels lowers every graph (a dump lists each
/// graph's IR), binding none unlowered.
#[test]
fn a_dumping_device_binds_nothing_unlowered() {
    common::gpu();
    let dir = std::env::temp_dir().join(format!("lazywgpu-bind-dump-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    let config = DeviceConfig {
        dump_dir: Some(dir.clone()),
        ..DeviceConfig::default()
    };
    let Ok(dev) = Device::gpu_with(config) else {
        return;
    };
    for b in [4usize, 5, 6, 7, 8] {
        let x = Tensor::from_vec(common::data(b * 3, 1), [b, 3], &dev).unwrap();
        let got = x.cast(DType::F32).sum([0], false).to_vec::<f32>().unwrap();
        assert_eq!(got.len(), 3);
        dev.mark_step().unwrap();
    }
    assert_eq!(
        dev.metrics().counter("graphs_bound"),
        0,
        "{}",
        dev.metrics()
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A padded convolution whose batch changes, then its images' side: the
/// kernel reads its first element's offset, less the padding, as a
/// literal without an expression, which the side changes. Batch 4 at
/// side 9 makes a template while only the batch varied, which batch 5
/// binds; side 10 must lower again (the side did not vary between the
/// graphs that made it), not bind a kernel with side 9's offset; batch 8
/// at side 11 binds again. Values against the CPU reference, with and
/// without checking.
#[test]
fn a_number_the_template_did_not_see_vary_lowers_again() {
    #[rustfmt::skip]
    let cases = [(2, 8), (2, 9), (3, 9), (4, 9), (5, 9), (5, 10), (6, 11), (7, 11), (8, 11)];
    let conv = |dev: &Device| -> Vec<Vec<f32>> {
        let w = Tensor::from_vec(common::data(4 * 3 * 3 * 3, 7), [4, 3, 3, 3], dev).unwrap();
        let mut out = Vec::new();
        for &(b, side) in &cases {
            let data = common::data(b * 3 * side * side, (side * 100 + b) as u64);
            let x = Tensor::from_vec(data, [b, 3, side, side], dev).unwrap();
            out.push(
                x.conv2d(&w, None, (1, 1), (1, 1), (1, 1))
                    .to_vec::<f32>()
                    .unwrap(),
            );
            dev.mark_step().unwrap();
        }
        out
    };
    let want = conv(&Device::cpu());
    for check in [false, true] {
        let Some(dev) = gpu(check) else { return };
        for ((got, want), (b, side)) in conv(&dev).iter().zip(&want).zip(cases) {
            let at = format!("batch {b}, side {side}, check_binds {check}");
            common::assert_close(got, want, 1e-4, 1e-5, &at);
        }
        assert!(
            dev.metrics().counter("graphs_bound") >= 2,
            "{}",
            dev.metrics()
        );
    }
}
