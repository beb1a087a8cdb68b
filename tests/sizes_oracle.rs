//! One program run at changing sizes on one device (its trace sites see
//! every size in turn: 1, primes, sizes past each strategy's threshold,
//! rows past lavapipe's loop limit), checked against f64 loops written
//! here: row reductions (sum, mean, max, argmin, logsumexp), softmax and
//! log-softmax, layer norm, and a reduction over a strided axis.

mod common;

use lazywgpu::Tensor;
use lazywgpu::nn::functional as F;

/// Rows of the input; its row length is the size that changes.
const ROWS: usize = 3;

/// The program: every output of one input.
fn program(x: &Tensor) -> Vec<Tensor> {
    let n = x.shape()[1];
    vec![
        x.sum([1], false),
        x.mean([1], false),
        x.max([1], false),
        x.argmin(1, false).float(),
        x.logsumexp([1], false),
        x.softmax(1),
        x.log_softmax(1),
        F::layer_norm(x, &[n], None, None, 1e-5),
        x.t().sum([1], false),
    ]
}

/// The program's outputs in f64, from the rows of `x` (`ROWS` rows of `n`).
fn oracle(x: &[f32], n: usize) -> Vec<Vec<f64>> {
    let rows: Vec<Vec<f64>> = x
        .chunks(n)
        .map(|r| r.iter().map(|&v| v as f64).collect())
        .collect();
    let mut out = vec![Vec::new(); 9];
    for r in &rows {
        let sum: f64 = r.iter().sum();
        let max = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let min = r.iter().cloned().fold(f64::INFINITY, f64::min);
        let lse = max + r.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
        let mean = sum / n as f64;
        let var = r.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        out[0].push(sum);
        out[1].push(mean);
        out[2].push(max);
        out[3].push(r.iter().position(|&v| v == min).unwrap_or(0) as f64);
        out[4].push(lse);
        out[5].extend(r.iter().map(|v| (v - lse).exp()));
        out[6].extend(r.iter().map(|v| v - lse));
        out[7].extend(r.iter().map(|v| (v - mean) / (var + 1e-5).sqrt()));
    }
    out[8] = (0..n).map(|j| rows.iter().map(|r| r[j]).sum()).collect();
    out
}

#[test]
fn a_program_at_changing_sizes_agrees_with_f64_loops() {
    let Some(dev) = common::gpu() else { return };
    let names = [
        "sum",
        "mean",
        "max",
        "argmin",
        "logsumexp",
        "softmax",
        "log_softmax",
        "layer_norm",
        "sum over the strided axis",
    ];
    for n in [
        1usize, 2, 7, 13, 64, 257, 1031, 4099, 21_851, 65_537, 70_001, 5,
    ] {
        let host = common::data(ROWS * n, n as u64);
        let x = Tensor::from_vec(host.clone(), [ROWS, n], &dev).unwrap();
        let outs = program(&x);
        dev.mark_step().unwrap();
        let want = oracle(&host, n);
        for ((out, want), name) in outs.iter().zip(&want).zip(names) {
            let got = out.to_vec::<f32>().unwrap();
            // f32 sums of n terms in [-1, 1): error grows with n.
            let atol = match name {
                "sum" | "logsumexp" => 1e-5 * n as f32,
                "sum over the strided axis" | "log_softmax" => 1e-4,
                "softmax" => 1e-6,
                _ => 1e-4,
            };
            let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
            common::assert_close(&got, &want, 1e-4, atol, &format!("{name} at {n}"));
        }
    }
}
