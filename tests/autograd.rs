//! Backward rules against central finite differences.
//!
//! For every differentiable op, `loss = sum(f(inputs) * r)` with a fixed
//! random `r` is differentiated by `backward()` (on the CPU reference and
//! on the GPU) and by central differences of the same loss, computed in
//! f64 from f32 forward values on the CPU device with step 2e-3 (relative
//! to each element). Tolerance: |analytic - numeric| <= 2e-2 + 2e-2 *
//! |numeric|, the error of f32 central differences at that step.
//! Inputs are drawn away from kinks (relu, abs, max) so that the numeric
//! derivative exists. Shapes are random (proptest), with broadcasting.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::gpu;
use lazywgpu::{Device, Tensor, no_grad};
use proptest::prelude::*;

type F = dyn Fn(&[Tensor]) -> Tensor;

/// Deterministic values in [-1.5, -0.1] ∪ [0.1, 1.5], away from kinks:
/// distinct magnitudes on an even grid (shuffled), random signs, so no two
/// elements are within a finite-difference step of each other.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 33
    };
    let mut mags: Vec<f32> = (0..n)
        .map(|k| 0.1 + 1.4 * (k as f32 + 0.5) / n as f32)
        .collect();
    for k in (1..n).rev() {
        let j = next() as usize % (k + 1);
        mags.swap(k, j);
    }
    mags.into_iter()
        .map(|m| if next() & 1 == 0 { m } else { -m })
        .collect()
}

fn loss_value(cpu: &Device, f: &F, shapes: &[Vec<usize>], data: &[Vec<f32>], r: &[f32]) -> f64 {
    no_grad(|| {
        let xs: Vec<Tensor> = shapes
            .iter()
            .zip(data)
            .map(|(s, d)| Tensor::from_vec(d.clone(), s.as_slice(), cpu).unwrap())
            .collect();
        let y: Vec<f32> = f(&xs).to_vec().unwrap();
        y.iter().zip(r).map(|(&a, &b)| a as f64 * b as f64).sum()
    })
}

/// Checks `f`'s gradients w.r.t. every input on the CPU and (if present)
/// the GPU against finite differences.
#[track_caller]
fn check(name: &str, shapes: &[Vec<usize>], seed: u64, f: &F) {
    let cpu = Device::cpu();
    // One pool of distinct magnitudes for all inputs together, so that no
    // two elements anywhere (e.g. both sides of `maximum`) are within a
    // finite-difference step of each other.
    let sizes: Vec<usize> = shapes.iter().map(|s| s.iter().product()).collect();
    let mut pool = values(sizes.iter().sum(), seed).into_iter();
    let data: Vec<Vec<f32>> = sizes
        .iter()
        .map(|&n| pool.by_ref().take(n).collect())
        .collect();
    let out_shape = {
        let xs: Vec<Tensor> = shapes
            .iter()
            .zip(&data)
            .map(|(s, d)| Tensor::from_vec(d.clone(), s.as_slice(), &cpu).unwrap())
            .collect();
        no_grad(|| f(&xs)).shape().to_vec()
    };
    let r = values(out_shape.iter().product(), seed + 1000);
    // Numeric gradients.
    let mut numeric = Vec::new();
    for (i, d) in data.iter().enumerate() {
        let mut g = Vec::new();
        for j in 0..d.len() {
            let h = 2e-3 * d[j].abs().max(0.1);
            let mut plus = data.clone();
            plus[i][j] += h;
            let mut minus = data.clone();
            minus[i][j] -= h;
            let lp = loss_value(&cpu, f, shapes, &plus, &r);
            let lm = loss_value(&cpu, f, shapes, &minus, &r);
            g.push((lp - lm) / (plus[i][j] as f64 - minus[i][j] as f64));
        }
        numeric.push(g);
    }
    let mut devices = vec![cpu.clone()];
    devices.extend(gpu());
    for dev in devices {
        let xs: Vec<Tensor> = shapes
            .iter()
            .zip(&data)
            .map(|(s, d)| {
                let t = Tensor::from_vec(d.clone(), s.as_slice(), &dev).unwrap();
                t.requires_grad_(true);
                t
            })
            .collect();
        let y = f(&xs);
        let rt = Tensor::from_vec(r.clone(), y.shape(), &dev).unwrap();
        let loss = (&y * &rt).sum_all();
        loss.backward();
        for (i, x) in xs.iter().enumerate() {
            let got: Vec<f32> = match x.grad() {
                Some(g) => {
                    assert_eq!(g.shape(), x.shape(), "{name}: grad shape of input {i}");
                    g.to_vec().unwrap()
                }
                None => vec![0.0; x.numel()],
            };
            for (j, (&a, &e)) in got.iter().zip(&numeric[i]).enumerate() {
                assert!(
                    (a as f64 - e).abs() <= 2e-2 + 2e-2 * e.abs(),
                    "{name} on {}: d loss / d input{i}[{j}] = {a}, finite differences give {e} (shapes {shapes:?})",
                    dev.name()
                );
            }
        }
    }
}

fn shape_strategy(max_rank: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..4, 1..=max_rank)
}

/// `shape` with some dims set to 1 and some leading dims dropped, so it
/// broadcasts against `shape`.
fn broadcastable(shape: &[usize], mask: u8, drop: usize) -> Vec<usize> {
    let s: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if mask >> i & 1 == 1 { 1 } else { d })
        .collect();
    s[drop.min(s.len())..].to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    #[test]
    fn unary_ops(shape in shape_strategy(3), op in 0usize..12, seed in 0u64..1000) {
        let fs: [(&str, Box<F>); 12] = [
            ("neg", Box::new(|x: &[Tensor]| x[0].neg())),
            ("abs", Box::new(|x: &[Tensor]| x[0].abs())),
            ("exp", Box::new(|x: &[Tensor]| x[0].exp())),
            ("log", Box::new(|x: &[Tensor]| x[0].abs().log())),
            ("sqrt", Box::new(|x: &[Tensor]| x[0].abs().sqrt())),
            ("rsqrt", Box::new(|x: &[Tensor]| x[0].abs().rsqrt())),
            ("recip", Box::new(|x: &[Tensor]| x[0].recip())),
            ("sin", Box::new(|x: &[Tensor]| x[0].sin())),
            ("cos", Box::new(|x: &[Tensor]| x[0].cos())),
            ("tanh", Box::new(|x: &[Tensor]| x[0].tanh())),
            ("sigmoid", Box::new(|x: &[Tensor]| x[0].sigmoid())),
            ("relu", Box::new(|x: &[Tensor]| x[0].relu())),
        ];
        let (name, f) = &fs[op];
        check(name, &[shape], seed, f.as_ref());
    }

    #[test]
    fn binary_ops_broadcast(
        shape in shape_strategy(3), mask in any::<u8>(), drop in 0usize..2,
        swap in any::<bool>(), op in 0usize..7, seed in 0u64..1000,
    ) {
        let other = broadcastable(&shape, mask, drop);
        let shapes = if swap { vec![other, shape] } else { vec![shape, other] };
        let fs: [(&str, Box<F>); 7] = [
            ("add", Box::new(|x: &[Tensor]| &x[0] + &x[1])),
            ("sub", Box::new(|x: &[Tensor]| &x[0] - &x[1])),
            ("mul", Box::new(|x: &[Tensor]| &x[0] * &x[1])),
            ("div", Box::new(|x: &[Tensor]| &x[0] / &x[1])),
            ("pow", Box::new(|x: &[Tensor]| x[0].abs().pow(&x[1]))),
            ("maximum", Box::new(|x: &[Tensor]| x[0].maximum(&x[1]))),
            ("minimum", Box::new(|x: &[Tensor]| x[0].minimum(&x[1]))),
        ];
        let (name, f) = &fs[op];
        check(name, &shapes, seed, f.as_ref());
    }

    #[test]
    fn reductions(shape in shape_strategy(3), axis in 0usize..3, keep in any::<bool>(), op in 0usize..9, seed in 0u64..1000) {
        let ax = (axis % shape.len()) as isize;
        let fs: [(&str, Box<F>); 9] = [
            ("sum", Box::new(move |x: &[Tensor]| x[0].sum([ax], keep))),
            ("mean", Box::new(move |x: &[Tensor]| x[0].mean([ax], keep))),
            ("prod", Box::new(move |x: &[Tensor]| x[0].prod([ax], keep))),
            ("max", Box::new(move |x: &[Tensor]| x[0].max([ax], keep))),
            ("min", Box::new(move |x: &[Tensor]| x[0].min([ax], keep))),
            ("var", Box::new(move |x: &[Tensor]| x[0].var([ax], 0, keep))),
            ("logsumexp", Box::new(move |x: &[Tensor]| x[0].logsumexp([ax], keep))),
            ("softmax", Box::new(move |x: &[Tensor]| x[0].softmax(ax))),
            ("log_softmax", Box::new(move |x: &[Tensor]| x[0].log_softmax(ax))),
        ];
        let (name, f) = &fs[op];
        check(name, &[shape], seed, f.as_ref());
    }

    #[test]
    fn matmul_shapes(m in 1usize..4, k in 1usize..4, n in 1usize..4, batch in 0usize..3, kind in 0usize..7, seed in 0u64..1000) {
        // Kinds 3-6: a batched `a` times a matrix or vector shared by
        // every batch, computed as one product of batch * m rows (two
        // batch dims, a 1-D `b`, and a Linear layer's transposed weight
        // view).
        let (a, b) = match kind {
            0 => (vec![m, k], vec![k, n]),
            1 => (vec![k], vec![k, n]),
            2 => (vec![m, k], vec![k]),
            3 => (vec![batch + 1, m, k], vec![k, n]),
            4 => (vec![2, batch + 1, m, k], vec![k, n]),
            5 => (vec![batch + 1, m, k], vec![k]),
            _ => (vec![batch + 1, m, k], vec![n, k]),
        };
        if kind == 6 {
            check("matmul", &[a, b], seed, &|x: &[Tensor]| x[0].matmul(&x[1].t()));
        } else {
            check("matmul", &[a, b], seed, &|x: &[Tensor]| x[0].matmul(&x[1]));
        }
    }

    #[test]
    fn movement_and_indexing(shape in prop::collection::vec(2usize..4, 2..=3), op in 0usize..11, seed in 0u64..1000) {
        let r = shape.len() as isize;
        let fs: [(&str, Box<F>); 11] = [
            ("reshape", Box::new(|x: &[Tensor]| x[0].reshape([-1]) * 1.5)),
            ("permute", Box::new(move |x: &[Tensor]| x[0].transpose(0, r - 1) * 1.5)),
            ("expand", Box::new(|x: &[Tensor]| {
                let mut s: Vec<isize> = x[0].shape().iter().map(|&d| d as isize).collect();
                s.insert(0, 2);
                x[0].unsqueeze(0).expand(s)
            })),
            ("slice", Box::new(|x: &[Tensor]| x[0].slice(0, 0, 3, 2) * 2.0)),
            ("select", Box::new(|x: &[Tensor]| x[0].select(1, 1) * 2.0)),
            ("diagonal", Box::new(|x: &[Tensor]| x[0].diagonal(0, 0, 1) * 2.0)),
            ("pad", Box::new(|x: &[Tensor]| x[0].pad(&[(1, 2)], 0.5f32))),
            ("flip", Box::new(|x: &[Tensor]| x[0].flip([0, -1]))),
            ("cat", Box::new(|x: &[Tensor]| Tensor::cat(&[&x[0], &(x[0].exp())], -1))),
            ("gather", Box::new(|x: &[Tensor]| {
                let n = x[0].shape()[0];
                let idx: Vec<i32> = (0..x[0].numel() as i32).map(|i| (i * 7 + 1) % n as i32).collect();
                let it = Tensor::from_vec(idx, x[0].shape(), x[0].device()).unwrap();
                x[0].gather(0, &it)
            })),
            ("index_select", Box::new(|x: &[Tensor]| {
                let it = Tensor::from_vec(vec![1i32, 0, 1], &[3], x[0].device()).unwrap();
                x[0].index_select(1, &it)
            })),
        ];
        let (name, f) = &fs[op];
        check(name, &[shape], seed, f.as_ref());
    }
}

#[test]
fn where_and_masked_fill() {
    check("where", &[vec![3, 4], vec![4]], 3, &|x: &[Tensor]| {
        x[0].gt(&x[1]).where_cond(&x[0], &x[1])
    });
    check("masked_fill", &[vec![3, 4]], 4, &|x: &[Tensor]| {
        x[0].masked_fill(&x[0].lt(0.0f32), 0.25f32) * &x[0]
    });
}

#[test]
fn scatter_add_both_inputs() {
    check(
        "scatter_add",
        &[vec![3, 4], vec![2, 4]],
        5,
        &|x: &[Tensor]| {
            let idx =
                Tensor::from_vec(vec![0i32, 2, 1, 0, 2, 2, 0, 1], &[2, 4], x[0].device()).unwrap();
            x[0].scatter_add(0, &idx, &x[1])
        },
    );
}

#[test]
fn conv2d_stride_padding_dilation() {
    for (seed, stride, padding, dilation) in [
        (1, (1, 1), (0, 0), (1, 1)),
        (2, (2, 1), (1, 0), (1, 1)),
        (3, (1, 2), (2, 1), (2, 1)),
        (4, (2, 2), (1, 1), (1, 2)),
    ] {
        check(
            "conv2d",
            &[vec![2, 2, 6, 5], vec![3, 2, 3, 2], vec![3]],
            seed,
            &move |x: &[Tensor]| x[0].conv2d(&x[1], Some(&x[2]), stride, padding, dilation),
        );
    }
    // 64 input channels take the transposed-convolution path.
    check(
        "conv2d (transposed-convolution gradient)",
        &[vec![1, 64, 4, 3], vec![2, 64, 2, 2]],
        6,
        &|x: &[Tensor]| x[0].conv2d(&x[1], None, (2, 1), (1, 0), (1, 2)),
    );
    // Maps of one row or one pixel: the input gradient pads a 1x1 output
    // gradient by 3 (a padded dim of one element, read in place by the
    // lane matmul), and the forward pass pads a map one row high.
    check(
        "conv2d (1x1 output)",
        &[vec![1, 3, 4, 4], vec![2, 3, 4, 4]],
        8,
        &|x: &[Tensor]| x[0].conv2d(&x[1], None, (1, 1), (0, 0), (1, 1)),
    );
    check(
        "conv2d (a map one row high, padded)",
        &[vec![2, 2, 1, 5], vec![3, 2, 3, 3]],
        9,
        &|x: &[Tensor]| x[0].conv2d(&x[1], None, (1, 1), (1, 1), (1, 1)),
    );
}

#[test]
fn pooling() {
    check("max_pool2d", &[vec![2, 2, 6, 5]], 7, &|x: &[Tensor]| {
        x[0].max_pool2d((2, 2), (2, 2), (0, 0))
    });
    check(
        "max_pool2d overlapping",
        &[vec![1, 2, 5, 5]],
        8,
        &|x: &[Tensor]| x[0].max_pool2d((3, 3), (2, 1), (1, 1)),
    );
    check("avg_pool2d", &[vec![1, 2, 5, 6]], 9, &|x: &[Tensor]| {
        x[0].avg_pool2d((3, 2), (2, 2), (1, 0))
    });
}

/// `x` (one channel, `rows` x `cols`) through a max pool of 2 x 2
/// windows at `stride`, its output's gradient `g`: x's gradient on each
/// device, with the device's name.
fn max_pool_gradients(
    x: &[f32],
    (rows, cols): (usize, usize),
    stride: usize,
    g: &[f32],
) -> Vec<(String, Vec<f32>)> {
    let mut devices = vec![Device::cpu()];
    devices.extend(gpu());
    devices
        .into_iter()
        .map(|dev| {
            let xt = Tensor::from_vec(x.to_vec(), [1, 1, rows, cols], &dev).unwrap();
            xt.requires_grad_(true);
            let y = xt.max_pool2d((2, 2), (stride, stride), (0, 0));
            assert_eq!(y.numel(), g.len(), "{:?}", y.shape());
            let gt = Tensor::from_vec(g.to_vec(), y.shape(), &dev).unwrap();
            y.backward_with(&gt);
            let got = xt.grad().expect("a gradient").to_vec().unwrap();
            (dev.name(), got)
        })
        .collect()
}

/// A max pool sends each window's gradient to its first maximum only, as
/// PyTorch's scatter to the pooling indices does: a NaN or infinite
/// output gradient reaches no other element, ties go to the first, and
/// the rows and columns past the last window get zero. Windows that tile
/// the input (this test) and overlapping ones (the next) take two paths.
#[test]
fn tiled_max_pool_gradient_reaches_only_the_first_maximum() {
    // One channel of 3 x 5: windows of 2 x 2 cover rows 0-1, columns 0-3.
    #[rustfmt::skip]
    let x = [
        1.0, 5.0, 2.0, 2.0, 9.0,
        3.0, 4.0, 2.0, 0.0, 9.0,
        7.0, 7.0, 7.0, 7.0, 7.0f32,
    ];
    #[rustfmt::skip]
    let want = [
        0.0, f32::NAN, f32::INFINITY, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0,
    ];
    for (dev, got) in max_pool_gradients(&x, (3, 5), 2, &[f32::NAN, f32::INFINITY]) {
        for (i, (a, e)) in got.iter().zip(&want).enumerate() {
            assert!(
                a == e || (a.is_nan() && e.is_nan()),
                "element {i} on {dev}: {a}, want {e} ({got:?})"
            );
        }
    }
}

/// Overlapping windows (2 x 2, stride 1) whose maximum is the same
/// element: their gradients, one of them NaN, all reach it and nothing
/// else.
#[test]
fn overlapping_max_pool_gradient_reaches_only_the_maxima() {
    #[rustfmt::skip]
    let x = [
        1.0, 2.0, 0.0,
        0.0, 9.0, 0.0,
        0.0, 0.0, 0.0f32,
    ];
    for (dev, got) in max_pool_gradients(&x, (3, 3), 1, &[f32::NAN, 1.0, 2.0, 3.0]) {
        for (i, a) in got.iter().enumerate() {
            assert!(
                if i == 4 { a.is_nan() } else { *a == 0.0 },
                "element {i} on {dev}: {a} ({got:?})"
            );
        }
    }
}

#[test]
fn gradients_accumulate_and_flow_through_shared_inputs() {
    // y = x*x + x uses x three times: dy/dx = 2x + 1.
    check("shared", &[vec![5]], 11, &|x: &[Tensor]| {
        &x[0] * &x[0] + &x[0]
    });
    let dev = Device::cpu();
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2], &dev).unwrap();
    x.requires_grad_(true);
    (&x * 3.0).sum_all().backward();
    (&x * &x).sum_all().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![5.0, 7.0]);
    x.zero_grad();
    assert!(x.grad().is_none());
}

#[test]
fn no_grad_detach_and_leaves() {
    let dev = Device::cpu();
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2], &dev).unwrap();
    x.requires_grad_(true);
    let y = no_grad(|| &x * 2.0);
    assert!(!y.requires_grad());
    let z = (&x * 2.0).detach();
    assert!(!z.requires_grad() && z.is_leaf());
    let w = &x * 2.0;
    assert!(w.requires_grad() && !w.is_leaf());
    assert_eq!(w.grad_fn_name(), Some("mul"));
    let ints = Tensor::from_vec(vec![1i32, 2], &[2], &dev).unwrap();
    assert!(
        (&x * &ints.cast(lazywgpu::DType::F32))
            .sum_all()
            .requires_grad()
    );
    assert!(!ints.cast(lazywgpu::DType::F32).requires_grad());
}

#[test]
#[should_panic(expected = "in-place ops are not differentiated")]
fn inplace_on_leaf_requiring_grad_panics() {
    let dev = Device::cpu();
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2], &dev).unwrap();
    x.requires_grad_(true);
    x.add_(1.0f32);
}

#[test]
fn saved_values_survive_inplace_updates() {
    // The forward value of w is what the gradient uses, even after w is
    // updated in place before backward (the IR is functional).
    let dev = Device::cpu();
    let w = Tensor::from_vec(vec![2.0f32, 3.0], &[2], &dev).unwrap();
    w.requires_grad_(true);
    let x = Tensor::from_vec(vec![1.0f32, 1.0], &[2], &dev).unwrap();
    x.requires_grad_(true);
    let loss = (&w * &x).sum_all();
    no_grad(|| w.sub_(1.0f32));
    loss.backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
}

#[test]
#[should_panic(expected = "already freed")]
fn backward_twice_needs_retain_graph() {
    let dev = Device::cpu();
    let x = Tensor::from_vec(vec![1.0f32], &[1], &dev).unwrap();
    x.requires_grad_(true);
    let y = (&x * 2.0).sum_all();
    y.backward_retain_graph();
    y.backward();
    assert_eq!(x.grad().unwrap().item::<f32>().unwrap(), 4.0);
    y.backward();
}

#[test]
fn long_chains_differentiate_and_drop_without_deep_recursion() {
    // 20,000 recorded ops: backward and the graph's destruction must not
    // recurse once per op (a test thread has a 2 MiB stack).
    let dev = Device::cpu();
    let x = Tensor::from_vec(vec![1.0f32], [1], &dev).unwrap();
    x.requires_grad_(true);
    let mut y = x.clone();
    for _ in 0..10_000 {
        y = y * 1.0001 + 0.0001;
    }
    y.sum_all().backward();
    let g = x.grad().unwrap().item::<f32>().unwrap() as f64;
    let want = 1.0001f64.powi(10_000);
    assert!((g - want).abs() <= 1e-3 * want, "{g} vs {want}");
    // A chain that is dropped without running backward.
    let mut z = x.clone();
    for _ in 0..10_000 {
        z = z * 1.0001 + 0.0001;
    }
    drop(z);
}

/// A 0-dim tensor through every view op keeps its gradient: each is the
/// identity on its one element, so `d(3 * view(x)) / dx` is 3 (PyTorch's
/// value; `t()` of a 0-dim tensor lost the gradient once).
#[test]
fn zero_dim_views_keep_their_gradient() {
    let mut devs = vec![Device::cpu()];
    devs.extend(gpu());
    for dev in devs {
        type View = Box<dyn Fn(&Tensor) -> Tensor>;
        let views: Vec<(&str, View)> = vec![
            ("t", Box::new(|x| x.t())),
            ("transpose(0, -1)", Box::new(|x| x.transpose(0, -1))),
            ("permute([])", Box::new(|x| x.permute(Vec::<isize>::new()))),
            ("reshape([1])", Box::new(|x| x.reshape([1]))),
            ("unsqueeze(0)", Box::new(|x| x.unsqueeze(0))),
            ("flatten", Box::new(|x| x.flatten())),
            ("expand([2])", Box::new(|x| x.expand([2]))),
            ("deep_clone", Box::new(|x| x.deep_clone())),
        ];
        for (name, view) in views {
            let x = Tensor::scalar(2.0f32, &dev);
            x.requires_grad_(true);
            let y = view(&x) * 3.0;
            y.sum_all().backward();
            let n = y.numel() as f32;
            let grad = x
                .grad()
                .unwrap_or_else(|| panic!("{name} on {dev:?}: no gradient"));
            assert_eq!(grad.shape(), &[] as &[usize], "{name} on {dev:?}");
            assert_eq!(
                grad.to_vec::<f32>().unwrap(),
                vec![3.0 * n],
                "{name} on {dev:?}"
            );
        }
    }
}

#[test]
fn erf_and_activations() {
    check("erf", &[vec![3, 5]], 11, &|x: &[Tensor]| x[0].erf());
    check("gelu", &[vec![2, 7]], 12, &|x: &[Tensor]| x[0].gelu());
    check("gelu_tanh", &[vec![2, 7]], 13, &|x: &[Tensor]| {
        x[0].gelu_tanh()
    });
    check("silu", &[vec![2, 7]], 14, &|x: &[Tensor]| x[0].silu());
    check("tril", &[vec![2, 3, 4]], 15, &|x: &[Tensor]| {
        x[0].tril(0) * &x[0]
    });
    check("triu", &[vec![4, 3]], 16, &|x: &[Tensor]| {
        x[0].triu(1) * &x[0]
    });
}

#[test]
fn layer_norm_backward() {
    use lazywgpu::nn::functional::layer_norm;
    check(
        "layer_norm affine",
        &[vec![3, 6], vec![6], vec![6]],
        17,
        &|x: &[Tensor]| layer_norm(&x[0], &[6], Some(&x[1]), Some(&x[2]), 1e-5),
    );
    check(
        "layer_norm plain 2-D",
        &[vec![2, 3, 4]],
        18,
        &|x: &[Tensor]| layer_norm(&x[0], &[3, 4], None, None, 1e-5),
    );
}

#[test]
fn embedding_backward_accumulates_repeated_ids() {
    use lazywgpu::nn::functional::embedding;
    check("embedding", &[vec![5, 3]], 19, &|x: &[Tensor]| {
        let ids = Tensor::from_vec(vec![1i32, 4, 1, 0, 1, 3], &[2, 3], x[0].device()).unwrap();
        embedding(&ids, &x[0])
    });
}

#[test]
fn attention_backward_causal_and_masked() {
    use lazywgpu::nn::functional::scaled_dot_product_attention as sdpa;
    // Lengths 5 and 7: not multiples of any tile size.
    check(
        "sdpa causal",
        &[vec![2, 5, 3], vec![2, 5, 3], vec![2, 5, 2]],
        20,
        &|x: &[Tensor]| sdpa(&x[0], &x[1], &x[2], None, true),
    );
    check(
        "sdpa full, L != S",
        &[vec![1, 2, 4, 3], vec![1, 2, 7, 3], vec![1, 2, 7, 2]],
        21,
        &|x: &[Tensor]| sdpa(&x[0], &x[1], &x[2], None, false),
    );
    check(
        "sdpa float mask",
        &[vec![3, 2], vec![5, 2], vec![5, 2], vec![3, 5]],
        22,
        &|x: &[Tensor]| sdpa(&x[0], &x[1], &x[2], Some(&x[3]), false),
    );
}
