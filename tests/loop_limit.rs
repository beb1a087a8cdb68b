//! Loops longer than the adapter runs whole: lavapipe leaves any shader
//! loop after 65,535 iterations, silently (`Target::loop_limit`). Kernels
//! whose only strategy loops over a dimension (a layer-norm row, the keys
//! of fused attention, the source extent of a scatter-add) must run such
//! loops in nested runs. Each case here loops 70,000 times per output and
//! is checked against an f64 loop written in the test.

mod common;

use lazywgpu::nn::functional as F;
use lazywgpu::{Device, DeviceConfig, Tensor};

/// Longer than lavapipe's 65,535 iterations.
const LONG: usize = 70_000;

/// Layer norm over rows of `len`, against an f64 loop.
fn check_layer_norm(len: usize) {
    let Some(dev) = common::gpu() else { return };
    let rows = 2;
    let host = common::data(rows * len, 3);
    let x = Tensor::from_vec(host.clone(), [rows, len], &dev).unwrap();
    let got = F::layer_norm(&x, &[len], None, None, 1e-5)
        .to_vec::<f32>()
        .unwrap();
    let mut want = Vec::new();
    for row in host.chunks(len) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / len as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / len as f64;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        want.extend(row.iter().map(|&v| ((v as f64 - mean) * rstd) as f32));
    }
    common::assert_close(&got, &want, 1e-4, 1e-4, &format!("layer norm over {len}"));
}

#[test]
fn a_layer_norm_row_longer_than_the_loop_limit() {
    check_layer_norm(LONG);
}

/// Three passes over a row of 30,000: each loop is short, together they
/// pass 65,535 iterations.
#[test]
fn a_layer_norm_whose_passes_together_pass_the_loop_limit() {
    check_layer_norm(30_000);
}

#[test]
fn fused_attention_over_more_keys_than_the_loop_limit() {
    let Ok(dev) = Device::gpu_with(DeviceConfig {
        fused_attention: true,
        ..DeviceConfig::default()
    }) else {
        assert!(common::gpu().is_none());
        return;
    };
    let (l, e) = (3, 64);
    let (qh, kh, vh) = (
        common::data(l * e, 1),
        common::data(LONG * e, 2),
        common::data(LONG * e, 5),
    );
    let q = Tensor::from_vec(qh.clone(), [1, l, e], &dev).unwrap();
    let k = Tensor::from_vec(kh.clone(), [1, LONG, e], &dev).unwrap();
    let v = Tensor::from_vec(vh.clone(), [1, LONG, e], &dev).unwrap();
    let got = F::scaled_dot_product_attention(&q, &k, &v, None, false)
        .to_vec::<f32>()
        .unwrap();
    let scale = 1.0 / (e as f64).sqrt();
    let mut want = Vec::new();
    for i in 0..l {
        let scores: Vec<f64> = (0..LONG)
            .map(|j| {
                (0..e)
                    .map(|t| qh[i * e + t] as f64 * kh[j * e + t] as f64)
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        for c in 0..e {
            let dot: f64 = (0..LONG).map(|j| weights[j] * vh[j * e + c] as f64).sum();
            want.push((dot / total) as f32);
        }
    }
    common::assert_close(&got, &want, 1e-3, 1e-5, "attention over 70,000 keys");
}

#[test]
fn a_scatter_add_over_a_source_longer_than_the_loop_limit() {
    let Some(dev) = common::gpu() else { return };
    let (base_len, positions) = (5, 3);
    let src_host = common::data(LONG, 7);
    let index_host: Vec<i32> = (0..LONG).map(|j| (j * 7 % positions) as i32).collect();
    let base = Tensor::from_vec(vec![0.5f32; base_len], [base_len], &dev).unwrap();
    let index = Tensor::from_vec(index_host.clone(), [LONG], &dev).unwrap();
    let src = Tensor::from_vec(src_host.clone(), [LONG], &dev).unwrap();
    let got = base.scatter_add(0, &index, &src).to_vec::<f32>().unwrap();
    let mut want = vec![0.5f64; base_len];
    for (j, &i) in index_host.iter().enumerate() {
        want[i as usize] += src_host[j] as f64;
    }
    let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    common::assert_close(&got, &want, 1e-4, 1e-3, "scatter-add of 70,000");
}

/// A matmul whose inner dimension is longer than the loop limit: each
/// output sums 70,000 products.
#[test]
fn a_matmul_over_an_inner_dimension_longer_than_the_loop_limit() {
    let Some(dev) = common::gpu() else { return };
    let (m, n) = (3, 5);
    let (ah, bh) = (common::data(m * LONG, 11), common::data(LONG * n, 13));
    let a = Tensor::from_vec(ah.clone(), [m, LONG], &dev).unwrap();
    let b = Tensor::from_vec(bh.clone(), [LONG, n], &dev).unwrap();
    let got = a.matmul(&b).to_vec::<f32>().unwrap();
    let want = common::matmul_f64(&ah, &bh, (1, m, LONG, n));
    common::assert_close(&got, &want, 1e-4, 1e-2, "matmul over 70,000");
}

/// A matmul whose inner dimension passes what the blocked kernel's K
/// steps can loop over (about a million: the lane kernel's textures
/// stop at 16,384): it is split into chunks whose partial products are
/// summed. A weight gradient of a convolution over a large batch has
/// such a K.
#[test]
fn a_matmul_over_an_inner_dimension_of_over_a_million() {
    let Some(dev) = common::gpu() else { return };
    for (m, k, n) in [(2, 1_100_003, 3), (3, 1 << 20, 2)] {
        let (ah, bh) = (common::data(m * k, 17), common::data(k * n, 19));
        let a = Tensor::from_vec(ah.clone(), [m, k], &dev).unwrap();
        let b = Tensor::from_vec(bh.clone(), [k, n], &dev).unwrap();
        let got = a.matmul(&b).to_vec::<f32>().unwrap();
        let want = common::matmul_f64(&ah, &bh, (1, m, k, n));
        common::assert_close(&got, &want, 1e-3, 1e-1, &format!("matmul over K = {k}"));
        // Through a transposed operand, as a weight gradient reads it.
        let bt = Tensor::from_vec(bh.clone(), [n, k], &dev).unwrap();
        let got = a.matmul(&bt.t()).to_vec::<f32>().unwrap();
        let bt_h: Vec<f32> = (0..k * n).map(|i| bh[(i % n) * k + i / n]).collect();
        let want = common::matmul_f64(&ah, &bt_h, (1, m, k, n));
        common::assert_close(
            &got,
            &want,
            1e-3,
            1e-1,
            &format!("matmul by a transpose, K = {k}"),
        );
    }
}
