//! The CPU reference for reductions, softmax and matmul: plain loops over
//! row-major data, accumulating in f64.

use crate::dtype::DType;
use crate::graph::op::ReduceOp;
use crate::shape::{contiguous_strides, numel};

/// `values` (row-major, `shape`) reduced over `axes`, every reduced
/// element in row-major order; results in row-major order of the keepdim
/// shape. The first NaN wins `max`/`min` and the arg ops, as in PyTorch.
pub(crate) fn reduce(op: ReduceOp, values: &[f64], shape: &[usize], axes: &[usize]) -> Vec<f64> {
    let strides = contiguous_strides(shape);
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let outer = numel(&kept.iter().map(|&d| shape[d]).collect::<Vec<_>>());
    let reduced: usize = axes.iter().map(|&d| shape[d]).product();
    let position = |mut o: usize, mut r: usize| {
        let mut pos = 0;
        for &d in kept.iter().rev() {
            pos += (o % shape[d]) * strides[d];
            o /= shape[d];
        }
        for &d in axes.iter().rev() {
            pos += (r % shape[d]) * strides[d];
            r /= shape[d];
        }
        pos
    };
    let mut out = Vec::with_capacity(outer);
    for o in 0..outer {
        let mut acc = op.identity();
        let mut best = 0usize;
        for r in 0..reduced {
            let v = values[position(o, r)];
            match op {
                ReduceOp::Sum => acc += v,
                ReduceOp::Prod => acc *= v,
                ReduceOp::Max => acc = if v > acc || v.is_nan() { v } else { acc },
                ReduceOp::Min => acc = if v < acc || v.is_nan() { v } else { acc },
                ReduceOp::ArgMax => {
                    if !acc.is_nan() && (v > acc || v.is_nan() || r == 0) {
                        acc = v;
                        best = r;
                    }
                }
                ReduceOp::ArgMin => {
                    if !acc.is_nan() && (v < acc || v.is_nan() || r == 0) {
                        acc = v;
                        best = r;
                    }
                }
            }
        }
        out.push(if op.is_arg() { best as f64 } else { acc });
    }
    out
}

/// Softmax or log-softmax of `values` along `axis`.
pub(crate) fn softmax(values: &[f64], shape: &[usize], axis: usize, log: bool) -> Vec<f64> {
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let mut out = vec![0.0; values.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let max = (0..len)
                .map(|k| values[at(k)])
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..len).map(|k| (values[at(k)] - max).exp()).sum();
            for k in 0..len {
                let z = values[at(k)] - max;
                out[at(k)] = if log { z - sum.ln() } else { z.exp() / sum };
            }
        }
    }
    out
}

/// Each row of the last axis as `(x - mean) / sqrt(var + eps)` (biased
/// variance); with `gy`, the gradient of that for output gradient `gy`.
pub(crate) fn normalize(
    x: &[f64],
    gy: Option<&[f64]>,
    (len, rms): (usize, bool),
    eps: f64,
) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    if len == 0 {
        return out;
    }
    let n = len as f64;
    for (r, row) in x.chunks(len).enumerate() {
        let mean = if rms {
            0.0
        } else {
            row.iter().sum::<f64>() / n
        };
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let rstd = 1.0 / (var + eps).sqrt();
        let xhat: Vec<f64> = row.iter().map(|v| (v - mean) * rstd).collect();
        let dst = &mut out[r * len..(r + 1) * len];
        match gy {
            None => dst.copy_from_slice(&xhat),
            Some(gy) => {
                let g = &gy[r * len..(r + 1) * len];
                let mg = if rms { 0.0 } else { g.iter().sum::<f64>() / n };
                let mgx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n;
                for k in 0..len {
                    dst[k] = rstd * (g[k] - mg - xhat[k] * mgx);
                }
            }
        }
    }
    out
}

/// Running sums (`Sum`) or products (`Prod`) of `x` (of `shape`) along
/// `axis`, each line walked in order.
pub(crate) fn scan(op: ReduceOp, x: &[f64], shape: &[usize], axis: usize) -> Vec<f64> {
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = x.to_vec();
    if len == 0 || inner == 0 {
        return out;
    }
    for block in out.chunks_mut(len * inner) {
        for k in 1..len {
            for j in 0..inner {
                let prev = block[(k - 1) * inner + j];
                let here = &mut block[k * inner + j];
                *here = match op {
                    ReduceOp::Prod => prev * *here,
                    _ => prev + *here,
                };
            }
        }
    }
    out
}

/// The indices that stably sort each line of `x` (of `shape`) along
/// `axis`: ascending (or `descending`), NaN the greatest value.
pub(crate) fn argsort(x: &[f64], shape: &[usize], axis: usize, descending: bool) -> Vec<i32> {
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = vec![0i32; x.len()];
    if len == 0 || inner == 0 {
        return out;
    }
    let order = |a: f64, b: f64| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => a.partial_cmp(&b).expect("neither is NaN"),
    };
    for start in (0..x.len()).step_by(len * inner) {
        for j in 0..inner {
            let at = |k: usize| start + k * inner + j;
            let mut idx: Vec<usize> = (0..len).collect();
            // `sort_by` is stable: equal values keep their order.
            if descending {
                idx.sort_by(|&a, &b| order(x[at(b)], x[at(a)]));
            } else {
                idx.sort_by(|&a, &b| order(x[at(a)], x[at(b)]));
            }
            for (k, &i) in idx.iter().enumerate() {
                out[at(k)] = i as i32;
            }
        }
    }
    out
}

/// `Op::TopkSelect` over the last dim of `x` (of `shape`): per line,
/// the indices of the `k` elements a stable sort (descending when
/// `largest`) puts first, in increasing index order.
pub(crate) fn topk_select(x: &[f64], shape: &[usize], k: usize, largest: bool) -> Vec<i32> {
    let len = shape.last().copied().unwrap_or(1);
    let lines = x.len().checked_div(len).unwrap_or(0);
    let mut out = Vec::with_capacity(lines * k);
    for line in x.chunks(len.max(1)).take(lines) {
        let order = argsort(line, &[len], 0, largest);
        let mut picked: Vec<i32> = order[..k].to_vec();
        picked.sort_unstable();
        out.extend(picked);
    }
    out
}

/// Attention `softmax(q k^T * scale) v` per batch (`batch` leading
/// elements; q `[L, E]`, k `[S, E]`, v `[S, Ev]` each), with the causal
/// mask `j <= i` when `causal`.
pub(crate) fn attention(
    (q, k, v): (&[f64], &[f64], &[f64]),
    (l, s, e, ev): (usize, usize, usize, usize),
    scale: f64,
    causal: bool,
) -> Vec<f64> {
    let batch = q.len().checked_div(l * e).unwrap_or(0);
    let mut out = vec![0.0; batch * l * ev];
    for b in 0..batch {
        for i in 0..l {
            let keys = if causal { (i + 1).min(s) } else { s };
            let scores: Vec<f64> = (0..keys)
                .map(|j| {
                    let qr = &q[(b * l + i) * e..(b * l + i + 1) * e];
                    let kr = &k[(b * s + j) * e..(b * s + j + 1) * e];
                    qr.iter().zip(kr).map(|(a, c)| a * c).sum::<f64>() * scale
                })
                .collect();
            let probs = softmax(&scores, &[keys], 0, false);
            for c in 0..ev {
                out[(b * l + i) * ev + c] = probs
                    .iter()
                    .enumerate()
                    .map(|(j, p)| p * v[(b * s + j) * ev + c])
                    .sum();
            }
        }
    }
    out
}

/// Batched `[.., M, K] x [.., K, N]` (same batch dims).
pub(crate) fn matmul(a: &[f64], b: &[f64], a_shape: &[usize], b_shape: &[usize]) -> Vec<f64> {
    let r = a_shape.len();
    let (m, k, n) = (a_shape[r - 2], a_shape[r - 1], b_shape[r - 1]);
    let batch: usize = a_shape[..r - 2].iter().product();
    let mut out = vec![0.0; batch * m * n];
    for bi in 0..batch {
        let (ao, bo, oo) = (bi * m * k, bi * k * n, bi * m * n);
        for i in 0..m {
            for kk in 0..k {
                let av = a[ao + i * k + kk];
                for j in 0..n {
                    out[oo + i * n + j] += av * b[bo + kk * n + j];
                }
            }
        }
    }
    out
}

/// Rounds f64 results to a dtype's 32-bit pattern.
pub(crate) fn to_bits(values: &[f64], dtype: DType) -> Vec<u32> {
    values
        .iter()
        .map(|&v| match dtype {
            DType::F32 => (v as f32).to_bits(),
            DType::F16 | DType::BF16 => unreachable!("computed in f32"),
            DType::I32 => (v as i64) as i32 as u32,
            DType::U32 => (v as i64) as u32,
            DType::Bool => (v != 0.0) as u32,
            DType::I64 | DType::U8 => unreachable!("I32 and U32 below the front end"),
        })
        .collect()
}
