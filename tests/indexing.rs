//! Indexing ops, convolution and pooling: GPU against the CPU reference
//! over random shapes (size-1 and empty dims, transposed views as inputs),
//! conv2d against f64 loops, and kernel counts.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, gpu};
use lazywgpu::{DType, Device, Tensor};
use proptest::prelude::*;

fn data(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u64 * 2654435761 + seed * 97) % 1000) as f32) / 250.0 - 2.0)
        .collect()
}

/// Builds the same op on a device: `which` picks the op, `shape` the input.
fn build(dev: &Device, which: usize, shape: &[usize], transposed: bool, seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let x = if transposed && shape.len() >= 2 {
        let r = shape.len();
        let mut s = shape.to_vec();
        s.swap(r - 1, r - 2);
        Tensor::from_vec(data(n, seed), s, dev)
            .unwrap()
            .transpose(-1, -2)
    } else {
        Tensor::from_vec(data(n, seed), shape.to_vec(), dev).unwrap()
    };
    let last = shape.len() as isize - 1;
    let len = *shape.last().unwrap();
    let idx = |count: usize, modulo: usize| {
        let v: Vec<i32> = (0..count)
            .map(|i| ((i * 7 + seed as usize) % modulo.max(1)) as i32)
            .collect();
        v
    };
    match which {
        0 => x.pad(&[(1, 2)], 0.5f32) * 2.0,
        1 => Tensor::cat(&[&x, &(&x * 3.0), &x.exp()], last),
        2 => Tensor::stack(&[&x, &x.neg()], 0),
        3 => x.flip([0, last]) + 1.0,
        4 => {
            let i = Tensor::from_vec(idx(n, len), shape.to_vec(), dev).unwrap();
            x.gather(last, &i)
        }
        5 => {
            let k = 3;
            let i = Tensor::from_vec(idx(k, len), [k], dev).unwrap();
            x.index_select(last, &i).sin()
        }
        6 => {
            let i = Tensor::from_vec(idx(n, len), shape.to_vec(), dev).unwrap();
            x.scatter_add(last, &i, &(&x * 0.5))
        }
        7 => {
            let i = Tensor::from_vec(idx(len, len), [len], dev).unwrap();
            x.index_add(last, &i, &x.cos())
        }
        8 => x
            .gt(0.0)
            .cast(DType::I32)
            .one_hot(3)
            .sum([-1], false)
            .cast(DType::F32),
        _ => x.masked_fill(&x.lt(-1.0), -7.0f32),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn indexing_ops_match_cpu(which in 0usize..10, shape in prop::collection::vec(prop_oneof![Just(1usize), 2usize..6], 1..=3), transposed in any::<bool>(), seed in 0u64..50, empty in any::<bool>()) {
        let mut shape = shape;
        // Occasionally an empty leading dim (not on the indexed last dim).
        if empty && shape.len() >= 2 && which != 3 {
            shape[0] = 0;
        }
        let Some(g) = gpu() else { return Ok(()) };
        let c = Device::cpu();
        let gv = build(&g, which, &shape, transposed, seed);
        let cv = build(&c, which, &shape, transposed, seed);
        prop_assert_eq!(gv.shape(), cv.shape());
        assert_close(&gv.to_vec::<f32>().unwrap(), &cv.to_vec::<f32>().unwrap(), 1e-5, 1e-5, &format!("op {which} shape {shape:?} transposed {transposed}"));
    }
}

/// Direct f64 convolution, PyTorch's definition.
#[allow(clippy::too_many_arguments)]
fn conv_f64(
    x: &[f32],
    xs: [usize; 4],
    w: &[f32],
    ws: [usize; 4],
    b: &[f32],
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
) -> (Vec<f32>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [oc, _, kh, kw] = ws;
    let oh = (h + 2 * pad.0 - dil.0 * (kh - 1) - 1) / stride.0 + 1;
    let ow = (wd + 2 * pad.1 - dil.1 * (kw - 1) - 1) / stride.1 + 1;
    let mut out = vec![0.0f32; n * oc * oh * ow];
    for ni in 0..n {
        for o in 0..oc {
            for y in 0..oh {
                for xo in 0..ow {
                    let mut acc = b[o] as f64;
                    for ci in 0..c {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (y * stride.0 + ky * dil.0) as isize - pad.0 as isize;
                                let ix = (xo * stride.1 + kx * dil.1) as isize - pad.1 as isize;
                                if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd {
                                    acc += x[((ni * c + ci) * h + iy as usize) * wd + ix as usize]
                                        as f64
                                        * w[((o * c + ci) * kh + ky) * kw + kx] as f64;
                                }
                            }
                        }
                    }
                    out[((ni * oc + o) * oh + y) * ow + xo] = acc as f32;
                }
            }
        }
    }
    (out, [n, oc, oh, ow])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn conv2d_matches_f64(n in 1usize..3, c in 1usize..4, oc in 1usize..5, h in 1usize..12, w in 1usize..12, k in 1usize..4, s in 1usize..3, p in 0usize..3, d in 1usize..3) {
        prop_assume!(h + 2 * p > d * (k - 1) && w + 2 * p > d * (k - 1));
        let x = data(n * c * h * w, 1);
        let wt = data(oc * c * k * k, 2);
        let b = data(oc, 3);
        let (expected, os) = conv_f64(&x, [n, c, h, w], &wt, [oc, c, k, k], &b, (s, s), (p, p), (d, d));
        for dev in std::iter::once(Device::cpu()).chain(gpu()) {
            let xt = Tensor::from_vec(x.clone(), [n, c, h, w], &dev).unwrap();
            let wtt = Tensor::from_vec(wt.clone(), [oc, c, k, k], &dev).unwrap();
            let bt = Tensor::from_vec(b.clone(), [oc], &dev).unwrap();
            let y = xt.conv2d(&wtt, Some(&bt), (s, s), (p, p), (d, d));
            prop_assert_eq!(y.shape(), &os[..]);
            assert_close(&y.to_vec::<f32>().unwrap(), &expected, 1e-4, 1e-4, &format!("conv2d on {dev:?}"));
        }
    }
}

/// Direct f64 transposed convolution, PyTorch's definition, as a
/// scatter: input `(iy, ix)` through tap `(ky, kx)` lands on output
/// `(iy * s - p + ky * d, ..)`. `w` is `[C_in, C_out / groups, KH, KW]`;
/// the output is `out` positions in space.
#[allow(clippy::too_many_arguments)]
fn conv_transpose_f64(
    x: &[f32],
    xs: [usize; 4],
    w: &[f32],
    ws: [usize; 4],
    groups: usize,
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
    out: (usize, usize),
) -> Vec<f32> {
    let [n, c, h, wd] = xs;
    let [_, ocg, kh, kw] = ws;
    let (cg, oc) = (c / groups, ocg * groups);
    let mut acc = vec![0.0f64; n * oc * out.0 * out.1];
    for ni in 0..n {
        for ci in 0..c {
            let g = ci / cg;
            for iy in 0..h {
                for ix in 0..wd {
                    let v = x[((ni * c + ci) * h + iy) * wd + ix] as f64;
                    for o in 0..ocg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let y = (iy * stride.0 + ky * dil.0) as isize - pad.0 as isize;
                                let xo = (ix * stride.1 + kx * dil.1) as isize - pad.1 as isize;
                                if y < 0 || xo < 0 || y as usize >= out.0 || xo as usize >= out.1 {
                                    continue;
                                }
                                let oc_i = g * ocg + o;
                                acc[((ni * oc + oc_i) * out.0 + y as usize) * out.1
                                    + xo as usize] +=
                                    v * w[((ci * ocg + o) * kh + ky) * kw + kx] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    acc.into_iter().map(|v| v as f32).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Strided transposed convolutions run as one convolution per stride
    /// phase (dilation 1) or over the spread input (dilation above 1):
    /// both against the scatter above, phases with no taps (a 1x1 kernel
    /// at stride 3), output padding and padding larger than the kernel
    /// included.
    #[test]
    fn conv_transpose2d_matches_f64(n in 1usize..3, cg in 1usize..3, ocg in 1usize..3, groups in 1usize..3, h in 1usize..7, w in 1usize..7, kh in 1usize..5, kw in 1usize..5, s in (1usize..4, 1usize..4), p in (0usize..3, 0usize..3), d in 1usize..3, op in (0usize..3, 0usize..3), bias in any::<bool>()) {
        let op = (op.0 % s.0.max(d), op.1 % s.1.max(d));
        let size = |i: usize, s: usize, p: usize, k: usize, op: usize| ((i - 1) * s + d * (k - 1) + op + 1).checked_sub(2 * p).filter(|&o| o > 0);
        let (Some(oh), Some(ow)) = (size(h, s.0, p.0, kh, op.0), size(w, s.1, p.1, kw, op.1)) else { return Ok(()) };
        let c = cg * groups;
        let x = data(n * c * h * w, 11);
        let wt = data(c * ocg * kh * kw, 12);
        let b = data(ocg * groups, 13);
        let mut expected = conv_transpose_f64(&x, [n, c, h, w], &wt, [c, ocg, kh, kw], groups, s, p, (d, d), (oh, ow));
        if bias {
            for (i, v) in expected.iter_mut().enumerate() {
                *v += b[i / (oh * ow) % (ocg * groups)];
            }
        }
        for dev in std::iter::once(Device::cpu()).chain(gpu()) {
            let xt = Tensor::from_vec(x.clone(), [n, c, h, w], &dev).unwrap();
            let wtt = Tensor::from_vec(wt.clone(), [c, ocg, kh, kw], &dev).unwrap();
            let bt = Tensor::from_vec(b.clone(), [ocg * groups], &dev).unwrap();
            let y = xt.conv_transpose2d(&wtt, bias.then_some(&bt), s, p, op, groups, (d, d));
            prop_assert_eq!(y.shape(), &[n, ocg * groups, oh, ow][..]);
            assert_close(&y.to_vec::<f32>().unwrap(), &expected, 1e-4, 1e-4, &format!("conv_transpose2d on {dev:?}"));
        }
    }

    /// A strided convolution's input gradient (a transposed convolution of
    /// the output gradient, by stride phases at dilation 1) against the
    /// f64 scatter of the output gradient through the weights.
    #[test]
    fn conv2d_input_gradient_matches_f64(n in 1usize..3, c in 1usize..4, oc in 1usize..4, h in 1usize..10, w in 1usize..10, k in 1usize..4, s in (1usize..4, 1usize..4), p in 0usize..3, d in 1usize..3) {
        prop_assume!(h + 2 * p > d * (k - 1) && w + 2 * p > d * (k - 1));
        let oh = (h + 2 * p - d * (k - 1) - 1) / s.0 + 1;
        let ow = (w + 2 * p - d * (k - 1) - 1) / s.1 + 1;
        let x = data(n * c * h * w, 21);
        let wt = data(oc * c * k * k, 22);
        let g = data(n * oc * oh * ow, 23);
        // The weight [OC, C, K, K] read as a transposed convolution's
        // [C_in = OC, C_out = C, K, K].
        let expected = conv_transpose_f64(&g, [n, oc, oh, ow], &wt, [oc, c, k, k], 1, s, (p, p), (d, d), (h, w));
        for dev in std::iter::once(Device::cpu()).chain(gpu()) {
            let xt = Tensor::from_vec(x.clone(), [n, c, h, w], &dev).unwrap();
            xt.requires_grad_(true);
            let wtt = Tensor::from_vec(wt.clone(), [oc, c, k, k], &dev).unwrap();
            let gt = Tensor::from_vec(g.clone(), [n, oc, oh, ow], &dev).unwrap();
            (xt.conv2d(&wtt, None, s, (p, p), (d, d)) * &gt).sum_all().backward();
            let gx = xt.grad().expect("x has a gradient");
            assert_close(&gx.to_vec::<f32>().unwrap(), &expected, 1e-4, 1e-4, &format!("conv2d input gradient on {dev:?}"));
        }
    }
}

#[test]
fn conv_bias_relu_and_pooling_kernel_counts() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(data(2 * 3 * 28 * 28, 4), [2, 3, 28, 28], &dev).unwrap();
    let w = Tensor::from_vec(data(8 * 3 * 3 * 3, 5), [8, 3, 3, 3], &dev).unwrap();
    let b = Tensor::from_vec(data(8, 6), [8], &dev).unwrap();
    dev.reset_metrics();
    let y = x.conv2d(&w, Some(&b), (1, 1), (1, 1), (1, 1)).relu();
    dev.mark_step().unwrap();
    assert_eq!(
        dev.metrics().counter("kernel_launches"),
        1,
        "im2col read in place, bias+relu epilogue: {}",
        dev.metrics()
    );
    dev.reset_metrics();
    let p = y.max_pool2d((2, 2), (2, 2), (0, 0));
    dev.mark_step().unwrap();
    assert_eq!(
        dev.metrics().counter("kernel_launches"),
        1,
        "{}",
        dev.metrics()
    );
    assert_eq!(p.shape(), &[2, 8, 14, 14]);
}

#[test]
fn out_of_range_host_indices_panic_at_trace_time() {
    let dev = Device::cpu();
    let x = Tensor::zeros([3, 4], &dev);
    let bad = Tensor::from_vec(vec![0i32, 4], [2], &dev).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| x.index_select(1, &bad)));
    let msg = r
        .expect_err("index 4 of a dim of size 4")
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        msg.contains("index_select") && msg.contains("out of range"),
        "{msg}"
    );
    // On the GPU the kernel clamps instead.
    if let Some(g) = gpu() {
        let xg =
            Tensor::from_vec((0..12).map(|v| v as f32).collect::<Vec<_>>(), [3, 4], &g).unwrap();
        let ig = Tensor::from_vec(vec![0i32, 9, -3], [3], &g).unwrap();
        assert_eq!(
            xg.index_select(1, &ig).to_vec::<f32>().unwrap(),
            vec![0.0, 3.0, 0.0, 4.0, 7.0, 4.0, 8.0, 11.0, 8.0]
        );
    }
}

#[test]
fn gathers_along_long_lines_carry_gradients_to_every_named_element() {
    // Index lines of 64 and more are summed back through the flattened
    // input (`autograd::rules::scatter_add_flat`); shorter ones by the
    // scan. Each case: x's shape, the index's, the axis. Indices repeat
    // (a line longer than the axis), weights are small integers, so the
    // sums are exact.
    let cases: [(&[usize], &[usize], usize); 5] = [
        (&[3, 200], &[3, 150], 1),
        (&[3, 50], &[2, 130], 1),
        (&[4, 70, 5], &[4, 90, 5], 1),
        (&[70, 3, 2], &[100, 2, 2], 0),
        (&[2, 3, 300], &[2, 3, 8], 2),
    ];
    for dev in common::devices() {
        for (c, &(shape, index_shape, axis)) in cases.iter().enumerate() {
            let n: usize = shape.iter().product();
            let m: usize = index_shape.iter().product();
            let len = shape[axis];
            let index: Vec<i32> = (0..m)
                .map(|e| ((e as u64 * 2654435761 + c as u64) % len as u64) as i32)
                .collect();
            let weights: Vec<f32> = (0..m).map(|e| (e % 5) as f32 - 2.0).collect();
            let x = Tensor::from_vec(data(n, c as u64), shape.to_vec(), &dev).unwrap();
            x.requires_grad_(true);
            let i = Tensor::from_vec(index.clone(), index_shape.to_vec(), &dev).unwrap();
            let w = Tensor::from_vec(weights.clone(), index_shape.to_vec(), &dev).unwrap();
            (&x.gather(axis as isize, &i) * &w).sum_all().backward();
            let got = x.grad().unwrap().to_vec::<f32>().unwrap();
            // Each index element's weight, added at its own coordinates
            // with `axis` replaced by its value.
            let mut want = vec![0.0f32; n];
            for (e, (&k, &wt)) in index.iter().zip(&weights).enumerate() {
                let mut rest = e;
                let mut at = 0;
                let mut stride = 1;
                for d in (0..shape.len()).rev() {
                    let coordinate = rest % index_shape[d];
                    rest /= index_shape[d];
                    let coordinate = if d == axis { k as usize } else { coordinate };
                    at += coordinate * stride;
                    stride *= shape[d];
                }
                want[at] += wt;
            }
            assert_eq!(
                got,
                want,
                "{shape:?} gathered by {index_shape:?} along {axis} on {}",
                dev.name()
            );
        }
    }
}

#[test]
fn scatter_adds_along_long_lines_drop_what_falls_outside() {
    // Index lines of 64 and more go through the flattened tensor
    // (`Tensor::scatter_add_flat`): indices past either end of the axis,
    // and source rows past the base's, are dropped as the scan drops
    // them; the rest add up exactly (small integers).
    let (rows, len, src_rows, src_len) = (3usize, 80usize, 4usize, 100usize);
    let index: Vec<i32> = (0..src_rows * src_len)
        .map(|e| ((e as u64 * 2654435761) % 90) as i32 - 5)
        .collect();
    let src: Vec<f32> = (0..src_rows * src_len)
        .map(|e| (e % 7) as f32 - 3.0)
        .collect();
    let base: Vec<f32> = (0..rows * len).map(|e| (e % 5) as f32).collect();
    let mut want = base.clone();
    for (e, (&k, &v)) in index.iter().zip(&src).enumerate() {
        let r = e / src_len;
        if r < rows && (0..len as i32).contains(&k) {
            want[r * len + k as usize] += v;
        }
    }
    for dev in common::devices() {
        let b = Tensor::from_vec(base.clone(), [rows, len], &dev).unwrap();
        let i = Tensor::from_vec(index.clone(), [src_rows, src_len], &dev).unwrap();
        let s = Tensor::from_vec(src.clone(), [src_rows, src_len], &dev).unwrap();
        let got = b.scatter_add(1, &i, &s).to_vec::<f32>().unwrap();
        assert_eq!(got, want, "on {}", dev.name());
    }
}
