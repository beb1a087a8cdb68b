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
