//! Scatter-adds whose index varies along the scattered axis alone (an
//! embedding's gradient, `index_add`, a scatter of an expanded index),
//! which the GPU lowers through the index's sorted order: values against
//! f64 loops written here, over random vocabularies and token counts,
//! out-of-range indices, NaN and infinities, runs past the adapter's loop
//! limit and sizes that change between steps; and, from dumped plans,
//! that the sort is what ran.

#![allow(clippy::needless_range_loop)]

mod common;

use common::{assert_close, gpu};
use lazywgpu::{Device, DeviceConfig, Tensor, nn};
use proptest::prelude::*;

/// `base[v, c] + sum over t with ids[t] == v of src[t, c]`, in f64
/// (rows `[v, c]` of `cols` columns; out-of-range ids add nothing).
fn index_add_f64(base: &[f32], ids: &[i32], src: &[f32], cols: usize) -> Vec<f32> {
    let rows = base.len() / cols.max(1);
    let mut out: Vec<f64> = base.iter().map(|&x| x as f64).collect();
    for (t, &v) in ids.iter().enumerate() {
        if v < 0 || v as usize >= rows {
            continue;
        }
        for c in 0..cols {
            out[v as usize * cols + c] += src[t * cols + c] as f64;
        }
    }
    out.into_iter().map(|x| x as f32).collect()
}

/// `got` against `index_add_f64(base, ids, src, cols)` within f32
/// summation's error: a millionth of the sum of the magnitudes each
/// element adds (a row named 500 times sums 500 values of up to 1 in f32,
/// in position order; the f64 oracle has no rounding to compare with).
fn assert_index_add(
    got: &[f32],
    (base, ids, src): (&[f32], &[i32], &[f32]),
    cols: usize,
    what: &str,
) {
    let want = index_add_f64(base, ids, src, cols);
    let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<f32>>();
    let magnitude = index_add_f64(&abs(base), ids, &abs(src), cols);
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, ((&g, &w), &m)) in got.iter().zip(&want).zip(&magnitude).enumerate() {
        let close = (g as f64 - w as f64).abs() <= 1e-6 * (m as f64 + 1.0);
        let same_special = (g.is_nan() && w.is_nan()) || (g.is_infinite() && g == w);
        assert!(
            close || same_special,
            "{what}: element {k}: got {g}, expected {w} (magnitude {m})"
        );
    }
}

/// Token ids over a vocabulary of `vocab`, skewed so that some rows
/// repeat many times and others never occur.
fn skewed_ids(tokens: usize, vocab: usize, seed: u64) -> Vec<i32> {
    (0..tokens)
        .map(|t| {
            let h = (t as u64 * 2654435761 + seed * 40503) % 1000;
            let v = if h < 300 { h % 3 } else { h * 7 % vocab as u64 };
            (v % vocab as u64) as i32
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// The gradient of an embedding table: the table's rows summed over
    /// the tokens that picked them.
    #[test]
    fn embedding_gradients_match_f64(vocab in 8usize..300, tokens in 1usize..3000, dim in 1usize..24, seed in 0u64..1000) {
        let Some(dev) = gpu() else { return Ok(()) };
        let ids = skewed_ids(tokens, vocab, seed);
        let upstream = common::data(tokens * dim, seed);
        let table = Tensor::from_vec(common::data(vocab * dim, seed + 1), [vocab, dim], &dev).unwrap();
        table.requires_grad_(true);
        let picked = nn::functional::embedding(&Tensor::from_vec(ids.clone(), [tokens], &dev).unwrap(), &table);
        let weights = Tensor::from_vec(upstream.clone(), [tokens, dim], &dev).unwrap();
        (&picked * &weights).sum_all().backward();
        let got = table.grad().unwrap().to_vec::<f32>().unwrap();
        let zeros = vec![0.0; vocab * dim];
        assert_index_add(&got, (&zeros, &ids, &upstream), dim, &format!("embedding gradient, {vocab} rows, {tokens} tokens, dim {dim}"));
    }
}

/// `index_add` along a middle axis from a transposed source, with NaN
/// and infinities among the source's values: each reaches exactly the
/// rows its index names.
#[test]
fn index_add_along_a_middle_axis_of_a_transposed_source() {
    let Some(dev) = gpu() else { return };
    let (outer, rows, tokens, inner) = (3, 20, 57, 5);
    let ids: Vec<i32> = (0..tokens).map(|t| ((t * 11) % rows) as i32).collect();
    let mut src = common::data(outer * tokens * inner, 7);
    src[4] = f32::NAN;
    src[100] = f32::INFINITY;
    src[200] = f32::NEG_INFINITY;
    let base = common::data(outer * rows * inner, 8);
    // Stored as [outer, inner, tokens] and transposed to [outer, tokens, inner].
    let mut stored = vec![0.0f32; src.len()];
    for o in 0..outer {
        for t in 0..tokens {
            for i in 0..inner {
                stored[(o * inner + i) * tokens + t] = src[(o * tokens + t) * inner + i];
            }
        }
    }
    let s = Tensor::from_vec(stored, [outer, inner, tokens], &dev)
        .unwrap()
        .transpose(1, 2);
    let b = Tensor::from_vec(base.clone(), [outer, rows, inner], &dev).unwrap();
    let got = b.index_add(
        1,
        &Tensor::from_vec(ids.clone(), [tokens], &dev).unwrap(),
        &s,
    );
    let got = got.to_vec::<f32>().unwrap();
    let mut want = Vec::new();
    for o in 0..outer {
        let per = |v: &[f32], len: usize| {
            (0..len * inner)
                .map(|k| v[o * len * inner + k])
                .collect::<Vec<f32>>()
        };
        want.extend(index_add_f64(
            &per(&base, rows),
            &ids,
            &per(&src, tokens),
            inner,
        ));
    }
    assert_close(&got, &want, 1e-5, 1e-5, "index_add along axis 1");
}

/// A scatter-add of an index broadcast along the other dim: indices out
/// of range (negative, or past the rows) add nothing, as in the scan.
#[test]
fn out_of_range_indices_of_a_broadcast_index_add_nothing() {
    let Some(dev) = gpu() else { return };
    let (rows, tokens, cols) = (16, 40, 3);
    let ids: Vec<i32> = (0..tokens as i32).map(|t| t % 21 - 3).collect();
    let src = common::data(tokens * cols, 3);
    let base = common::data(rows * cols, 4);
    let index = Tensor::from_vec(ids.clone(), [tokens, 1], &dev)
        .unwrap()
        .expand([tokens as isize, cols as isize]);
    let b = Tensor::from_vec(base.clone(), [rows, cols], &dev).unwrap();
    let got = b.scatter_add(
        0,
        &index,
        &Tensor::from_vec(src.clone(), [tokens, cols], &dev).unwrap(),
    );
    assert_close(
        &got.to_vec::<f32>().unwrap(),
        &index_add_f64(&base, &ids, &src, cols),
        1e-5,
        1e-5,
        "scatter_add, broadcast index",
    );
}

/// 70,000 tokens, 66,000 of them one row: the index's sort runs in
/// merged runs, and that row's sum is a loop past lavapipe's 65,535
/// iterations, unrolled to stay within it.
#[test]
fn a_row_named_past_the_loop_limit_sums_every_token() {
    let Some(dev) = gpu() else { return };
    let (rows, tokens, cols) = (10, 70_000, 2);
    let ids: Vec<i32> = (0..tokens)
        .map(|t| if t % 70 < 66 { 3 } else { (t % 10) as i32 })
        .collect();
    let src: Vec<f32> = (0..tokens * cols)
        .map(|k| ((k % 7) as f32 - 3.0) / 8.0)
        .collect();
    let b = Tensor::zeros([rows, cols], &dev);
    let got = b.index_add(
        0,
        &Tensor::from_vec(ids.clone(), [tokens], &dev).unwrap(),
        &Tensor::from_vec(src.clone(), [tokens, cols], &dev).unwrap(),
    );
    let want = index_add_f64(&vec![0.0; rows * cols], &ids, &src, cols);
    assert_close(
        &got.to_vec::<f32>().unwrap(),
        &want,
        1e-5,
        1e-5,
        "index_add over 70,000 tokens",
    );
}

/// The same gradient at token counts that change between steps, on one
/// device; and the dumped kernels show the index sorted, not scanned.
#[test]
fn the_embedding_gradient_sorts_its_index_at_changing_token_counts() {
    let Some(_) = gpu() else { return };
    let dir = std::env::temp_dir().join(format!("lazywgpu-sorted-scatter-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    let config = DeviceConfig {
        dump_dir: Some(dir.clone()),
        ..DeviceConfig::default()
    };
    let dev = Device::gpu_with(config).expect("a GPU device");
    let (vocab, dim) = (78, 16);
    let table = Tensor::from_vec(common::data(vocab * dim, 5), [vocab, dim], &dev).unwrap();
    table.requires_grad_(true);
    for (step, tokens) in [768usize, 500, 33, 768, 1].into_iter().enumerate() {
        let ids = skewed_ids(tokens, vocab, step as u64);
        let upstream = common::data(tokens * dim, step as u64);
        let picked = nn::functional::embedding(
            &Tensor::from_vec(ids.clone(), [tokens], &dev).unwrap(),
            &table,
        );
        let weights = Tensor::from_vec(upstream.clone(), [tokens, dim], &dev).unwrap();
        (&picked * &weights).sum_all().backward();
        let got = table.grad().unwrap().to_vec::<f32>().unwrap();
        let zeros = vec![0.0; vocab * dim];
        let what = format!("step {step}, {tokens} tokens");
        assert_index_add(&got, (&zeros, &ids, &upstream), dim, &what);
        table.zero_grad();
        dev.mark_step().unwrap();
    }
    let plans = common::dumped_plans(&dir);
    assert!(
        plans.iter().any(|p| p.contains("strategy: Sort")),
        "no kernel sorted the index"
    );
    // The scan tests each token's index against the element's row:
    // `if ((u32(v8) == c1) && (v8 >= 0i))`.
    let scans = |p: &&String| p.lines().any(|l| l.contains("== c") && l.contains(">= 0i"));
    assert!(
        !plans.iter().any(|p| scans(&p)),
        "a kernel scanned the whole index"
    );
    std::fs::remove_dir_all(&dir).ok();
}
