//! Non-contiguous inputs (transposed, stepped, offset and broadcast views,
//! 0-dim and empty shapes among them) through every kernel root:
//! reductions over random axes, softmax, logsumexp, var, matmul and
//! gather, on the GPU and the CPU reference, against f64 loops over the
//! view's elements computed in the test. NaN appears in some inputs.
//! Tolerance: rtol 1e-4 / atol 1e-5 (f32 accumulation against f64).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, devices};
use lazywgpu::{Device, Tensor};
use proptest::prelude::*;

/// How the input view is made from a stored base.
#[derive(Clone, Debug)]
enum View {
    Plain,
    /// Last two dims swapped (rank >= 2).
    Transposed,
    /// Every other element of dim 0, starting at 1 (an offset).
    Stepped,
    /// A size-1 leading dim expanded to 3.
    Expanded,
}

/// A view of shape `shape` and its elements in row-major order.
fn make(shape: &[usize], view: &View, seed: u64, nan: bool, dev: &Device) -> (Tensor, Vec<f64>) {
    let value = |i: usize| {
        if nan && i % 7 == 3 {
            f32::NAN
        } else {
            ((i as u64 * 2654435761 + seed * 97) % 1000) as f32 / 250.0 - 2.0
        }
    };
    let n: usize = shape.iter().product();
    let r = shape.len();
    match view {
        View::Transposed if r >= 2 => {
            let mut stored = shape.to_vec();
            stored.swap(r - 1, r - 2);
            let data: Vec<f32> = (0..n).map(value).collect();
            let t = Tensor::from_vec(data.clone(), stored.clone(), dev)
                .unwrap()
                .transpose(-1, -2);
            // Element (.., i, j) of the view is stored element (.., j, i).
            let (a, b) = (shape[r - 2], shape[r - 1]);
            let vals = (0..n)
                .map(|e| {
                    let (outer, i, j) = (e / (a * b), e / b % a, e % b);
                    data[outer * a * b + j * a + i] as f64
                })
                .collect();
            (t, vals)
        }
        View::Stepped if r >= 1 => {
            let mut stored = shape.to_vec();
            stored[0] = 2 * shape[0] + 1;
            let m: usize = stored.iter().product();
            let data: Vec<f32> = (0..m).map(value).collect();
            let t = Tensor::from_vec(data.clone(), stored, dev).unwrap().slice(
                0,
                1,
                2 * shape[0] + 1,
                2,
            );
            let inner: usize = shape[1..].iter().product();
            let vals = (0..n)
                .map(|e| data[(1 + 2 * (e / inner.max(1))) * inner + e % inner.max(1)] as f64)
                .collect();
            (t, vals)
        }
        View::Expanded if r >= 1 && shape[0] == 3 => {
            let mut stored = shape.to_vec();
            stored[0] = 1;
            let m: usize = stored.iter().product();
            let data: Vec<f32> = (0..m).map(value).collect();
            let target: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
            let t = Tensor::from_vec(data.clone(), stored, dev)
                .unwrap()
                .expand(target);
            let vals = (0..n).map(|e| data[e % m.max(1)] as f64).collect();
            (t, vals)
        }
        _ => {
            let data: Vec<f32> = (0..n).map(value).collect();
            let vals = data.iter().map(|&v| v as f64).collect();
            (Tensor::from_vec(data, shape.to_vec(), dev).unwrap(), vals)
        }
    }
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// `f` folded over each slice along `axis` (keepdim shape, row-major).
fn along(vals: &[f64], shape: &[usize], axis: usize, f: &dyn Fn(&[f64]) -> f64) -> Vec<f64> {
    let st = strides(shape);
    let len = shape[axis];
    let outer: usize = shape.iter().product::<usize>() / len.max(1);
    let mut out = Vec::new();
    for o in 0..outer {
        // The first element of slice `o`: skip `axis` in the multi-index.
        let (hi, lo) = (o / st[axis], o % st[axis]);
        let base = hi * st[axis] * len + lo;
        let slice: Vec<f64> = (0..len).map(|k| vals[base + k * st[axis]]).collect();
        out.push(f(&slice));
    }
    out
}

fn nan_max(s: &[f64]) -> f64 {
    s.iter().fold(f64::NEG_INFINITY, |m, &v| {
        if m.is_nan() || v.is_nan() {
            f64::NAN
        } else {
            m.max(v)
        }
    })
}

fn nan_argmax(s: &[f64]) -> f64 {
    let mut best = 0;
    for (i, &v) in s.iter().enumerate() {
        if s[best].is_nan() {
            break;
        }
        if v.is_nan() || v > s[best] {
            best = i;
        }
    }
    best as f64
}

fn check(got: &Tensor, want: &[f64], what: &str) {
    let got = match got.dtype() {
        lazywgpu::DType::I32 => got
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .map(|&v| v as f32)
            .collect(),
        _ => got.to_vec::<f32>().unwrap(),
    };
    let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    assert_close(&got, &want, 1e-4, 1e-5, what);
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![Just(1usize), 2usize..6, Just(3usize)], 1..=3)
}

fn view() -> impl Strategy<Value = View> {
    prop_oneof![
        Just(View::Plain),
        Just(View::Transposed),
        Just(View::Stepped),
        Just(View::Expanded)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn reductions_and_softmax_of_views_match_f64(
        shape in shape(),
        view in view(),
        axis_pick in any::<usize>(),
        nan in any::<bool>(),
    ) {
        let axis = axis_pick % shape.len();
        for dev in devices() {
            let (x, vals) = make(&shape, &view, 3, nan, &dev);
            let what = |op: &str| format!("{op} over axis {axis} of {view:?} {shape:?} (NaN: {nan}) on {dev:?}");
            let a = axis as isize;
            check(&x.sum([a], true), &along(&vals, &shape, axis, &|s| s.iter().sum()), &what("sum"));
            check(&x.max([a], true), &along(&vals, &shape, axis, &nan_max), &what("max"));
            check(&x.argmax(a, true), &along(&vals, &shape, axis, &nan_argmax), &what("argmax"));
            check(
                &x.mean([a], true),
                &along(&vals, &shape, axis, &|s| s.iter().sum::<f64>() / s.len() as f64),
                &what("mean"),
            );
            check(
                &x.logsumexp([a], true),
                &along(&vals, &shape, axis, &|s| {
                    let m = nan_max(s);
                    if m.is_nan() { return f64::NAN; }
                    m + s.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
                }),
                &what("logsumexp"),
            );
            // Softmax: each element over its slice's sum, laid back out.
            let st = strides(&shape);
            let sm: Vec<f64> = (0..vals.len())
                .map(|e| {
                    let k = e / st[axis] % shape[axis];
                    let base = e - k * st[axis];
                    let slice: Vec<f64> = (0..shape[axis]).map(|j| vals[base + j * st[axis]]).collect();
                    let m = nan_max(&slice);
                    let z: f64 = slice.iter().map(|v| (v - m).exp()).sum();
                    (vals[e] - m).exp() / z
                })
                .collect();
            check(&x.softmax(a), &sm, &what("softmax"));
        }
    }

    #[test]
    fn matmuls_of_views_match_f64(
        m in 1usize..9, k in 1usize..9, n in 1usize..9,
        ta in any::<bool>(), tb in any::<bool>(),
    ) {
        for dev in devices() {
            let va = if ta { View::Transposed } else { View::Stepped };
            let vb = if tb { View::Transposed } else { View::Plain };
            let (a, av) = make(&[m, k], &va, 5, false, &dev);
            let (b, bv) = make(&[k, n], &vb, 9, false, &dev);
            let want: Vec<f64> = (0..m * n)
                .map(|e| (0..k).map(|q| av[e / n * k + q] * bv[q * n + e % n]).sum())
                .collect();
            check(&a.matmul(&b), &want, &format!("{va:?} [{m}, {k}] @ {vb:?} [{k}, {n}] on {dev:?}"));
        }
    }
}
