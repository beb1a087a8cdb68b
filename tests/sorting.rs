//! `argsort`, `sort`, `topk` and `randperm` against a stable sort written
//! here (NaN the greatest value, as PyTorch orders it), on random shapes
//! and every axis, with ties, NaN, infinities and signed zeros; rows of a
//! real vocabulary's length (32,000, 50,257, 151,936) and 2^20 elements;
//! integer, bool and 16-bit inputs; the values' gradient; on both
//! backends.

mod common;

use std::cmp::Ordering;

use common::devices;
use lazywgpu::{DType, Tensor};

/// Small integers (many ties) or spread values, from a xorshift stream.
fn values(n: usize, seed: u64, ties: bool) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            if ties {
                (u * 7.0).floor() - 3.0
            } else {
                u * 200.0 - 100.0
            }
        })
        .collect()
}

/// The stable order of each line of `x` (`shape`) along `axis`.
fn oracle(x: &[f32], shape: &[usize], axis: usize, descending: bool) -> Vec<i64> {
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let key = |a: f32, b: f32| match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap(),
    };
    let mut out = vec![0i64; x.len()];
    for start in (0..x.len()).step_by((len * inner).max(1)) {
        for j in 0..inner {
            let at = |k: usize| start + k * inner + j;
            let mut order: Vec<usize> = (0..len).collect();
            order.sort_by(|&a, &b| {
                let o = key(x[at(a)], x[at(b)]);
                if descending { o.reverse() } else { o }
            });
            for (k, i) in order.into_iter().enumerate() {
                out[at(k)] = i as i64;
            }
        }
    }
    out
}

/// `x` at `idx` along `axis` (the sorted values the indices give).
fn take(x: &[f32], shape: &[usize], axis: usize, idx: &[i64], idx_shape: &[usize]) -> Vec<f32> {
    let inner: usize = shape[axis + 1..].iter().product();
    let (len, k) = (shape[axis], idx_shape[axis]);
    (0..idx.len())
        .map(|e| {
            let (o, j) = (e / (k * inner), e % inner);
            x[o * len * inner + idx[e] as usize * inner + j]
        })
        .collect()
}

fn same_values(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
            "{what}: [{i}] {g} where {w}"
        );
    }
}

#[test]
fn argsort_and_sort_match_a_stable_sort_on_every_axis() {
    let shapes: [&[usize]; 7] = [
        &[1],
        &[2],
        &[5],
        &[3, 17],
        &[4, 1, 6],
        &[2, 64, 3],
        &[3, 1000],
    ];
    for (case, shape) in shapes.iter().enumerate() {
        let n: usize = shape.iter().product();
        for ties in [false, true] {
            let mut x = values(n, case as u64 * 2 + ties as u64 + 1, ties);
            if n > 10 {
                x[1] = f32::NAN;
                x[4] = f32::INFINITY;
                x[7] = f32::NEG_INFINITY;
                x[8] = -0.0;
                x[9] = 0.0;
                x[n - 1] = f32::NAN;
            }
            for dev in devices() {
                let t = Tensor::from_vec(x.clone(), shape.to_vec(), &dev).unwrap();
                for axis in 0..shape.len() {
                    for descending in [false, true] {
                        let what = format!(
                            "{shape:?} axis {axis} desc {descending} ties {ties} on {}",
                            dev.name()
                        );
                        let want = oracle(&x, shape, axis, descending);
                        let idx = t.argsort(axis as isize, descending);
                        assert_eq!(idx.dtype(), DType::I64);
                        assert_eq!(idx.to_vec::<i64>().unwrap(), want, "{what}");
                        let (vals, idx2) = t.sort(axis as isize, descending);
                        assert_eq!(idx2.to_vec::<i64>().unwrap(), want, "{what}");
                        let want_vals = take(&x, shape, axis, &want, shape);
                        same_values(&vals.to_vec::<f32>().unwrap(), &want_vals, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn topk_over_a_vocabulary_and_long_rows() {
    for &(rows, len, k) in &[
        (2usize, 50_257usize, 50usize),
        (1, 32_000, 5),
        (1, 151_936, 3),
    ] {
        let x = values(rows * len, len as u64, false);
        for dev in devices() {
            let t = Tensor::from_vec(x.clone(), [rows, len], &dev).unwrap();
            for largest in [true, false] {
                let (vals, idx) = t.topk(k, -1, largest);
                assert_eq!(vals.shape(), [rows, k]);
                let full = oracle(&x, &[rows, len], 1, largest);
                let want: Vec<i64> = full.chunks(len).flat_map(|r| r[..k].to_vec()).collect();
                let what = format!("{rows}x{len} top {k} largest {largest} on {}", dev.name());
                assert_eq!(idx.to_vec::<i64>().unwrap(), want, "{what}");
                let want_vals = take(&x, &[rows, len], 1, &want, &[rows, k]);
                same_values(&vals.to_vec::<f32>().unwrap(), &want_vals, &what);
            }
        }
    }
}

/// 2^20 elements in one line, and a sort along the first axis of a
/// tall tensor (many short strided lines past 65,535 workgroups).
#[test]
fn sorts_of_a_million_elements_and_of_many_lines() {
    let n = 1 << 20;
    let x = values(n, 99, true);
    let want = oracle(&x, &[n], 0, false);
    let tall = values(70_000 * 3, 5, false);
    let want_tall = oracle(&tall, &[70_000, 3], 1, true);
    for dev in devices() {
        let t = Tensor::from_vec(x.clone(), [n], &dev).unwrap();
        let got = t.argsort(0, false).to_vec::<i64>().unwrap();
        assert!(got == want, "2^20 on {}", dev.name());
        let t = Tensor::from_vec(tall.clone(), [70_000, 3], &dev).unwrap();
        let got = t.argsort(1, true).to_vec::<i64>().unwrap();
        assert!(got == want_tall, "70000 lines on {}", dev.name());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 8, .. Default::default() })]

    /// Long lines over few of them, which the GPU's lowering sorts in
    /// runs and merges (from 2,048 elements a line on GPUs, 16,384 on
    /// lavapipe; lengths not a multiple of a run included): either axis,
    /// both directions, ties, NaN, infinities and signed zeros, against
    /// the stable sort above on both backends.
    #[test]
    fn long_sorts_over_few_lines_match_a_stable_sort(
        len in 1_500usize..40_000,
        lines in 1usize..4,
        axis_first in proptest::bool::ANY,
        descending in proptest::bool::ANY,
        ties in proptest::bool::ANY,
        seed in 0u64..1_000,
        specials in proptest::collection::vec((0usize..1_000_000, 0usize..4), 0..6),
    ) {
        let (shape, axis) = if axis_first { (vec![len, lines], 0) } else { (vec![lines, len], 1) };
        let n = len * lines;
        let mut x = values(n, seed, ties);
        for &(at, kind) in &specials {
            x[at % n] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0][kind];
        }
        let want = oracle(&x, &shape, axis, descending);
        for dev in devices() {
            let t = Tensor::from_vec(x.clone(), shape.clone(), &dev).unwrap();
            let got = t.argsort(axis as isize, descending).to_vec::<i64>().unwrap();
            let first_wrong = got.iter().zip(&want).position(|(g, w)| g != w);
            proptest::prop_assert!(first_wrong.is_none(), "{shape:?} axis {axis} descending {descending} on {}: first wrong at {first_wrong:?}", dev.name());
        }
    }
}

#[test]
fn sorts_of_integers_bools_and_half_floats() {
    for dev in devices() {
        let i = Tensor::from_vec(vec![3i32, -1, 3, 0, -7, 2], [6], &dev).unwrap();
        assert_eq!(
            i.argsort(0, false).to_vec::<i64>().unwrap(),
            [4, 1, 3, 5, 0, 2]
        );
        let (v, _) = i.sort(0, true);
        assert_eq!(v.to_vec::<i32>().unwrap(), [3, 3, 2, 0, -1, -7]);
        let b = Tensor::from_vec(vec![true, false, true, false], [4], &dev).unwrap();
        assert_eq!(b.argsort(0, false).to_vec::<i64>().unwrap(), [1, 3, 0, 2]);
        let u = Tensor::from_vec(vec![200u8, 3, 255, 0], [4], &dev).unwrap();
        assert_eq!(u.argsort(0, true).to_vec::<i64>().unwrap(), [2, 0, 1, 3]);
        for dtype in [DType::F16, DType::BF16] {
            let h = Tensor::from_vec(vec![0.5f32, -2.0, 1.5, f32::NAN, 0.25], [5], &dev)
                .unwrap()
                .cast(dtype);
            let (v, idx) = h.sort(0, false);
            assert_eq!(v.dtype(), dtype);
            assert_eq!(idx.to_vec::<i64>().unwrap(), [1, 4, 0, 2, 3]);
        }
        // 0-dim and empty inputs.
        let s = Tensor::scalar(2.0f32, &dev);
        let (v, i) = s.topk(1, 0, true);
        assert_eq!(v.to_vec::<f32>().unwrap(), [2.0]);
        assert_eq!(i.to_vec::<i64>().unwrap(), [0]);
        let e = Tensor::zeros([2, 0], &dev);
        let (v, i) = e.sort(1, false);
        assert_eq!(
            (v.shape(), i.shape()),
            ([2, 0].as_slice(), [2, 0].as_slice())
        );
    }
}

/// The gradient of sorted (and top-k) values goes back to the positions
/// they came from.
#[test]
fn sorted_values_carry_gradients_to_their_positions() {
    let x = vec![0.3f32, -1.0, 2.5, 0.7, -0.2];
    for dev in devices() {
        let t = Tensor::from_vec(x.clone(), [5], &dev).unwrap();
        t.requires_grad_(true);
        let (vals, _) = t.topk(2, 0, true);
        let w = Tensor::from_vec(vec![10.0f32, 1.0], [2], &dev).unwrap();
        (&vals * &w).sum_all().backward();
        let g = t.grad().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(g, [0.0, 0.0, 10.0, 1.0, 0.0], "on {}", dev.name());
    }
}

#[test]
fn long_sorted_rows_carry_gradients_to_where_each_value_came_from() {
    // Rows of 70,001 with ties, sorted whole, by `topk` through the sort
    // (k past the selection's 1,024) and along the first axis: each
    // value's weight goes back to the position it came from (ties in
    // their stable order), zero where topk left a value out.
    let (rows, len) = (2usize, 70_001usize);
    let x = values(rows * len, 11, true);
    let weight = |j: usize| (j % 7) as f32 - 3.0;
    for dev in devices() {
        let shape = [rows, len];
        let t = Tensor::from_vec(x.clone(), shape, &dev).unwrap();
        for (k, descending) in [(len, false), (len, true), (5_000, true)] {
            t.set_grad(None);
            t.requires_grad_(true);
            let vals = if k == len {
                t.sort(1, descending).0
            } else {
                t.topk(k, 1, descending).0
            };
            let w: Vec<f32> = (0..rows * k).map(|e| weight(e % k)).collect();
            let w = Tensor::from_vec(w, [rows, k], &dev).unwrap();
            (&vals * &w).sum_all().backward();
            let got = t.grad().unwrap().to_vec::<f32>().unwrap();
            let order = oracle(&x, &shape, 1, descending);
            let mut want = vec![0.0f32; rows * len];
            for r in 0..rows {
                for j in 0..k {
                    want[r * len + order[r * len + j] as usize] = weight(j);
                }
            }
            assert_eq!(
                got,
                want,
                "k {k} of {len}, descending {descending} on {}",
                dev.name()
            );
        }
        // Down the first axis: a column of 70,001.
        let col = Tensor::from_vec(x.clone(), [len, rows], &dev).unwrap();
        col.requires_grad_(true);
        let vals = col.sort(0, false).0;
        let w: Vec<f32> = (0..rows * len).map(|e| weight(e / rows)).collect();
        let w = Tensor::from_vec(w, [len, rows], &dev).unwrap();
        (&vals * &w).sum_all().backward();
        let got = col.grad().unwrap().to_vec::<f32>().unwrap();
        let order = oracle(&x, &[len, rows], 0, false);
        let mut want = vec![0.0f32; rows * len];
        for c in 0..rows {
            for j in 0..len {
                want[order[j * rows + c] as usize * rows + c] = weight(j);
            }
        }
        assert_eq!(got, want, "a column of {len} on {}", dev.name());
    }
}

#[test]
fn randperm_is_a_seeded_permutation() {
    for dev in devices() {
        dev.manual_seed(11);
        let p = Tensor::randperm(1000, &dev).to_vec::<i64>().unwrap();
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<i64>>());
        assert_ne!(p, (0..1000).collect::<Vec<i64>>());
        dev.manual_seed(11);
        assert_eq!(Tensor::randperm(1000, &dev).to_vec::<i64>().unwrap(), p);
    }
}

/// Top-k of long lines goes by a radix select: ties, NaN and
/// infinities, along a leading axis too, both directions, against the
/// stable sort.
#[test]
fn selected_topk_keeps_the_stable_order() {
    let (rows, len) = (3usize, 5_003usize);
    let mut x = values(rows * len, 77, true);
    x[17] = f32::NAN;
    x[4_000] = f32::NAN;
    x[2_500] = f32::INFINITY;
    x[len + 9] = f32::NEG_INFINITY;
    x[2 * len + 4_999] = f32::INFINITY;
    for dev in devices() {
        let t = Tensor::from_vec(x.clone(), [rows, len], &dev).unwrap();
        for largest in [true, false] {
            for k in [1usize, 10, 200] {
                let full = oracle(&x, &[rows, len], 1, largest);
                let want: Vec<i64> = full.chunks(len).flat_map(|r| r[..k].to_vec()).collect();
                let (vals, idx) = t.topk(k, 1, largest);
                let what = format!("k {k} largest {largest} on {}", dev.name());
                assert_eq!(idx.to_vec::<i64>().unwrap(), want, "{what}");
                let want_vals = take(&x, &[rows, len], 1, &want, &[rows, k]);
                same_values(&vals.to_vec::<f32>().unwrap(), &want_vals, &what);
            }
            // Along the first axis of the transposed tensor.
            let tt = t.t();
            let (_, idx) = tt.topk(10, 0, largest);
            let want: Vec<i64> = oracle(&x, &[rows, len], 1, largest)
                .chunks(len)
                .flat_map(|r| r[..10].to_vec())
                .collect();
            let got = idx.t().to_vec::<i64>().unwrap();
            assert_eq!(got, want, "transposed, largest {largest}");
        }
    }
}

/// Smallest-k of a long line with fewer real values than k: the NaNs
/// come last, at their own indices.
#[test]
fn selected_smallest_k_of_a_mostly_nan_line() {
    let len = 3_000usize;
    let mut x = vec![f32::NAN; len];
    for (i, v) in [
        (7usize, 2.0f32),
        (900, -1.0),
        (2_100, 0.5),
        (2_999, 3.0),
        (1_500, 2.0),
    ] {
        x[i] = v;
    }
    let want = oracle(&x, &[1, len], 1, false)[..10].to_vec();
    for dev in devices() {
        let t = Tensor::from_vec(x.clone(), [1, len], &dev).unwrap();
        let (vals, idx) = t.topk(10, 1, false);
        assert_eq!(idx.to_vec::<i64>().unwrap(), want, "on {}", dev.name());
        let vals = vals.to_vec::<f32>().unwrap();
        assert_eq!(&vals[..5], &[-1.0, 0.5, 2.0, 2.0, 3.0]);
        assert!(vals[5..].iter().all(|v| v.is_nan()));
    }
}

/// The radix select behind `topk` on long lines, on random lines: lengths
/// just past the sorted ones, primes, past 65,535 and one of 2^20 + 3
/// (whose strips pass lavapipe's loop limit), k from 1 to 1,024, values
/// with many ties, both signed zeros (equal), NaNs of either sign (equal,
/// greatest), infinities and all-equal lines; f32 and f16; both
/// directions; against the stable sort written here.
#[test]
fn topk_by_radix_select_matches_a_stable_sort_on_random_lines() {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % n
    };
    let specials = [
        0.0f32,
        -0.0,
        f32::NAN,
        f32::from_bits(0xFFC0_0000),
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.5,
    ];
    // Four lines of an odd length start at every offset modulo four, read
    // a group of four at a time (the whole count is a multiple of four);
    // the single odd lines are read an element at a time.
    let cases = [
        (4usize, 1025usize),
        (4, 1031),
        (1, 4099),
        (4, 70_001),
        (1, (1 << 20) + 3),
        (1, 3001),
    ];
    for (case, &(rows, len)) in cases.iter().enumerate() {
        let mut x = values(rows * len, case as u64 + 1, case % 2 == 0);
        for _ in 0..(rows * len / 50) {
            let at = next((rows * len) as u64) as usize;
            x[at] = specials[next(specials.len() as u64) as usize];
        }
        if case == 0 {
            // NaNs (the greatest) on both sides of line 1, none in it: a
            // group that straddles a line's end must not count them.
            x[..3 * len]
                .iter_mut()
                .filter(|v| v.is_nan())
                .for_each(|v| *v = 0.5);
            x[len - 1] = f32::NAN;
            x[2 * len] = f32::NAN;
        }
        if case == 1 {
            // An all-equal line.
            x[..len].fill(2.0);
        }
        if case == 5 {
            // Zeros of both signs, a hundred ones: the 500th greatest is a
            // zero, and equal zeros go by index whatever their sign.
            for (i, v) in x.iter_mut().enumerate() {
                *v = if i % 30 == 7 {
                    1.0
                } else if i % 2 == 0 {
                    -0.0
                } else {
                    0.0
                };
            }
        }
        let k = [1usize, 2, 1024, 1 + next(1024) as usize, 37, 500][case];
        for dev in devices() {
            for (dtype, largest) in [(DType::F32, true), (DType::F32, false), (DType::F16, true)] {
                let t = Tensor::from_vec(x.clone(), [rows, len], &dev)
                    .unwrap()
                    .cast(dtype);
                // The oracle sorts the values the tensor holds.
                let held = t.cast(DType::F32).to_vec::<f32>().unwrap();
                let full = oracle(&held, &[rows, len], 1, largest);
                let want: Vec<i64> = full.chunks(len).flat_map(|r| r[..k].to_vec()).collect();
                let (vals, idx) = t.topk(k, -1, largest);
                let what = format!(
                    "{rows}x{len} top {k} {dtype:?} largest {largest} on {}",
                    dev.name()
                );
                assert_eq!(idx.to_vec::<i64>().unwrap(), want, "{what}");
                let want_vals = take(&held, &[rows, len], 1, &want, &[rows, k]);
                same_values(
                    &vals.cast(DType::F32).to_vec::<f32>().unwrap(),
                    &want_vals,
                    &what,
                );
            }
        }
    }
}

/// Long lines (sorted by radix passes on a CPU adapter, in runs and
/// merges on a GPU) of every key kind: `i32` with negatives and many
/// ties, `u8`, `bool`, `f16` and `bf16` with NaNs and signed zeros;
/// along the last axis and the first; both directions; against the
/// stable sort written here.
#[test]
fn long_sorts_of_integers_bools_and_half_floats_match_a_stable_sort() {
    let (lines, len) = (2usize, 20_011usize);
    let n = lines * len;
    let mut x = values(n, 3, true);
    for (i, v) in x.iter_mut().enumerate() {
        *v = (*v * 1000.0 + (i % 13) as f32).round();
    }
    for dev in devices() {
        for descending in [false, true] {
            // i32 (negatives, ties), along both axes.
            let ints: Vec<i32> = x.iter().map(|&v| v as i32 * 65_537).collect();
            let held: Vec<f32> = ints.iter().map(|&v| v as f32).collect();
            for (shape, axis) in [(vec![lines, len], 1usize), (vec![len, lines], 0)] {
                let t = Tensor::from_vec(ints.clone(), shape.clone(), &dev).unwrap();
                let got = t
                    .argsort(axis as isize, descending)
                    .to_vec::<i64>()
                    .unwrap();
                let what = format!("i32 {shape:?} descending {descending} on {}", dev.name());
                assert_eq!(got, oracle(&held, &shape, axis, descending), "{what}");
            }
            // u8 and bool.
            let bytes: Vec<u8> = x
                .iter()
                .map(|&v| (v as i64).rem_euclid(256) as u8)
                .collect();
            let held: Vec<f32> = bytes.iter().map(|&v| f32::from(v)).collect();
            let t = Tensor::from_vec(bytes, [lines, len], &dev).unwrap();
            let got = t.argsort(-1, descending).to_vec::<i64>().unwrap();
            assert_eq!(
                got,
                oracle(&held, &[lines, len], 1, descending),
                "u8 on {}",
                dev.name()
            );
            let flags: Vec<bool> = x.iter().map(|&v| v > 0.0).collect();
            let held: Vec<f32> = flags.iter().map(|&v| f32::from(u8::from(v))).collect();
            let t = Tensor::from_vec(flags, [lines, len], &dev).unwrap();
            let got = t.argsort(-1, descending).to_vec::<i64>().unwrap();
            assert_eq!(
                got,
                oracle(&held, &[lines, len], 1, descending),
                "bool on {}",
                dev.name()
            );
            // Half floats with NaNs and signed zeros.
            let mut floats = values(n, 8, false);
            for (i, v) in floats.iter_mut().enumerate() {
                if i % 97 == 5 {
                    *v = [f32::NAN, -0.0, 0.0, f32::NEG_INFINITY][i % 4];
                }
            }
            for dtype in [DType::F16, DType::BF16] {
                let t = Tensor::from_vec(floats.clone(), [lines, len], &dev)
                    .unwrap()
                    .cast(dtype);
                let held = t.cast(DType::F32).to_vec::<f32>().unwrap();
                let got = t.argsort(-1, descending).to_vec::<i64>().unwrap();
                let what = format!("{dtype:?} descending {descending} on {}", dev.name());
                assert_eq!(got, oracle(&held, &[lines, len], 1, descending), "{what}");
            }
        }
    }
}

/// Sorts and top-k of computed values (a prologue the sorting kernels
/// would otherwise recompute in each pass, which must agree): a rank-1
/// line sorted by radix passes, and a top-k of rows of a scaled tensor,
/// smallest first in bf16; against the stable sort of the same values
/// computed here in f32.
#[test]
fn sorts_and_top_k_of_computed_values_match_a_stable_sort() {
    let n = 20_000usize;
    let x = values(n, 41, true);
    let scaled: Vec<f32> = x.iter().map(|&v| v * 0.5 - 1.0).collect();
    for dev in devices() {
        let t = Tensor::from_vec(x.clone(), [n], &dev).unwrap();
        let got = (&t * 0.5f32 - 1.0f32)
            .argsort(0, true)
            .to_vec::<i64>()
            .unwrap();
        assert_eq!(
            got,
            oracle(&scaled, &[n], 0, true),
            "rank 1 on {}",
            dev.name()
        );
        let (rows, len) = (4usize, n / 4);
        let m = Tensor::from_vec(x.clone(), [rows, len], &dev).unwrap();
        let computed = (&m * 0.5f32 - 1.0f32).cast(DType::BF16);
        let held = computed.cast(DType::F32).to_vec::<f32>().unwrap();
        let (vals, idx) = computed.topk(300, 1, false);
        let full = oracle(&held, &[rows, len], 1, false);
        let want: Vec<i64> = full.chunks(len).flat_map(|r| r[..300].to_vec()).collect();
        assert_eq!(
            idx.to_vec::<i64>().unwrap(),
            want,
            "bf16 top-k on {}",
            dev.name()
        );
        let want_vals = take(&held, &[rows, len], 1, &want, &[rows, 300]);
        same_values(
            &vals.cast(DType::F32).to_vec::<f32>().unwrap(),
            &want_vals,
            "bf16 values",
        );
    }
}

/// Sorts whose values and indices lie in several binding parts (on
/// lavapipe, past 128 MiB; here past a 64 KiB limit the device is given,
/// `DeviceConfig::max_binding_bytes`): whole lines sorted by one
/// workgroup's network (which reads back the indices it swaps), long
/// lines by radix passes (or, under `LAZYWGPU_GPU_CHOICES=1`, by runs and
/// merges), and a top-k, against the stable sort written here. Before
/// the network went through the parts, a `[34_000, 1_000]` sort failed to
/// compile on lavapipe ("unknown identifier out0").
#[test]
fn sorts_bound_in_parts_match_a_stable_sort() {
    let config = lazywgpu::DeviceConfig {
        max_binding_bytes: Some(64 << 10),
        ..lazywgpu::DeviceConfig::default()
    };
    let Ok(dev) = lazywgpu::Device::gpu_with(config) else {
        assert!(common::gpu().is_none(), "a GPU adapter but no device");
        return;
    };
    let shapes: [&[usize]; 3] = [&[60, 1000], &[3, 20_011], &[20_000, 3]];
    for (case, shape) in shapes.iter().enumerate() {
        let n: usize = shape.iter().product();
        let mut x = values(n, 40 + case as u64, case == 0);
        for i in (0..n).step_by(997) {
            x[i] = [f32::NAN, -0.0, f32::INFINITY, 0.0][i % 4];
        }
        let t = Tensor::from_vec(x.clone(), shape.to_vec(), &dev).unwrap();
        for (axis, descending) in [(1, false), (1, true), (0, false)] {
            let what = format!("{shape:?} axis {axis} desc {descending}");
            let want = oracle(&x, shape, axis, descending);
            let (vals, idx) = t.sort(axis as isize, descending);
            assert_eq!(idx.to_vec::<i64>().unwrap(), want, "{what}");
            let want_vals = take(&x, shape, axis, &want, shape);
            same_values(&vals.to_vec::<f32>().unwrap(), &want_vals, &what);
        }
        let k = 7.min(shape[1]);
        let (vals, idx) = t.topk(k, -1, true);
        let mut idx_shape = shape.to_vec();
        idx_shape[1] = k;
        let want: Vec<i64> = oracle(&x, shape, 1, true)
            .chunks(shape[1])
            .flat_map(|line| line[..k].to_vec())
            .collect();
        assert_eq!(idx.to_vec::<i64>().unwrap(), want, "{shape:?} top {k}");
        let want_vals = take(&x, shape, 1, &want, &idx_shape);
        same_values(&vals.to_vec::<f32>().unwrap(), &want_vals, "top-k values");
    }
}
