//! In-place ops and aliasing views (functionalization), checked against a
//! host model: a plain `Vec<f32>` to which the same writes are applied
//! through explicitly computed element positions.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, devices, gpu};
use lazywgpu::{Device, Tensor};
use proptest::prelude::*;

/// One view op, applied to the current view.
#[derive(Clone, Debug)]
enum ViewOp {
    Slice {
        dim: usize,
        start: usize,
        len: usize,
        step: usize,
    },
    Select {
        dim: usize,
        index: usize,
    },
    Transpose,
}

/// One write through a view.
#[derive(Clone, Debug)]
enum Write {
    Fill(f32),
    AddScalar(f32),
    MulScalar(f32),
    /// copy_ of a tensor of the view's shape, values from a seed.
    Copy(u32),
    /// add_ of a tensor of the view's shape.
    AddTensor(u32),
}

#[derive(Clone, Debug)]
struct Case {
    views: Vec<ViewOp>,
    write: Write,
    step_after: bool,
}

/// The host model of a view: its shape and, for each of its elements in
/// row-major order, the position in the base.
#[derive(Clone, Debug)]
struct ModelView {
    shape: Vec<usize>,
    pos: Vec<usize>,
}

impl ModelView {
    fn base(shape: &[usize]) -> ModelView {
        ModelView {
            shape: shape.to_vec(),
            pos: (0..shape.iter().product()).collect(),
        }
    }

    /// The element at multi-index `idx`.
    fn at(&self, idx: &[usize]) -> usize {
        let mut lin = 0;
        for (d, &i) in idx.iter().enumerate() {
            lin = lin * self.shape[d] + i;
        }
        self.pos[lin]
    }

    fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
        let mut out = vec![vec![]];
        for &d in shape {
            out = out
                .into_iter()
                .flat_map(|p| (0..d).map(move |i| [p.clone(), vec![i]].concat()))
                .collect();
        }
        out
    }

    /// Applies `op` if it fits this view's shape; returns None otherwise.
    fn apply(&self, op: &ViewOp) -> Option<ModelView> {
        let rank = self.shape.len();
        match *op {
            ViewOp::Slice {
                dim,
                start,
                len,
                step,
            } => {
                if dim >= rank || start + (len.max(1) - 1) * step >= self.shape[dim] {
                    return None;
                }
                let mut shape = self.shape.clone();
                shape[dim] = len;
                let pos = Self::indices(&shape)
                    .into_iter()
                    .map(|mut i| {
                        i[dim] = start + i[dim] * step;
                        self.at(&i)
                    })
                    .collect();
                Some(ModelView { shape, pos })
            }
            ViewOp::Select { dim, index } => {
                if dim >= rank || index >= self.shape[dim] {
                    return None;
                }
                let mut shape = self.shape.clone();
                shape.remove(dim);
                let pos = Self::indices(&shape)
                    .into_iter()
                    .map(|mut i| {
                        i.insert(dim, index);
                        self.at(&i)
                    })
                    .collect();
                Some(ModelView { shape, pos })
            }
            ViewOp::Transpose => {
                if rank < 2 {
                    return None;
                }
                let mut shape = self.shape.clone();
                shape.swap(0, rank - 1);
                let pos = Self::indices(&shape)
                    .into_iter()
                    .map(|mut i| {
                        i.swap(0, rank - 1);
                        self.at(&i)
                    })
                    .collect();
                Some(ModelView { shape, pos })
            }
        }
    }
}

fn apply_view(t: &Tensor, op: &ViewOp) -> Tensor {
    match *op {
        ViewOp::Slice {
            dim,
            start,
            len,
            step,
        } => {
            let end = if len == 0 {
                start
            } else {
                start + (len - 1) * step + 1
            };
            t.slice(dim as isize, start, end, step)
        }
        ViewOp::Select { dim, index } => t.select(dim as isize, index),
        ViewOp::Transpose => t.transpose(0, -1),
    }
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32 * 37 + seed * 11) % 23) as f32 - 11.0)
        .collect()
}

fn view_op() -> impl Strategy<Value = ViewOp> {
    prop_oneof![
        (0usize..3, 0usize..4, 0usize..4, 1usize..3).prop_map(|(dim, start, len, step)| {
            ViewOp::Slice {
                dim,
                start,
                len,
                step,
            }
        }),
        (0usize..3, 0usize..4).prop_map(|(dim, index)| ViewOp::Select { dim, index }),
        Just(ViewOp::Transpose),
    ]
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        (-4i32..4).prop_map(|v| Write::Fill(v as f32)),
        (-4i32..4).prop_map(|v| Write::AddScalar(v as f32)),
        (-2i32..3).prop_map(|v| Write::MulScalar(v as f32)),
        any::<u32>().prop_map(|s| Write::Copy(s % 1000)),
        any::<u32>().prop_map(|s| Write::AddTensor(s % 1000)),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(view_op(), 0..=3),
        write(),
        any::<bool>(),
    )
        .prop_map(|(views, write, step_after)| Case {
            views,
            write,
            step_after,
        })
}

/// Runs `cases` on `dev` and on the model; compares the base and every
/// view made along the way (views must track writes made after them).
fn run(base_shape: &[usize], cases: &[Case], dev: &Device) {
    let n: usize = base_shape.iter().product();
    let mut model: Vec<f32> = values(n, 7);
    let base = Tensor::from_vec(model.clone(), base_shape, dev).unwrap();
    let mut kept: Vec<(Tensor, ModelView)> = Vec::new();
    for c in cases {
        let mut t = base.clone();
        let mut m = ModelView::base(base_shape);
        for op in &c.views {
            if let Some(next) = m.apply(op) {
                t = apply_view(&t, op);
                m = next;
            }
        }
        assert_eq!(t.shape(), &m.shape[..]);
        let k = m.pos.len();
        match c.write {
            Write::Fill(v) => {
                t.fill_(v);
                m.pos.iter().for_each(|&p| model[p] = v);
            }
            Write::AddScalar(v) => {
                t.add_(v);
                m.pos.iter().for_each(|&p| model[p] += v);
            }
            Write::MulScalar(v) => {
                t.mul_(v);
                m.pos.iter().for_each(|&p| model[p] *= v);
            }
            Write::Copy(s) => {
                let src = values(k, s);
                t.copy_(&Tensor::from_vec(src.clone(), &m.shape, dev).unwrap());
                m.pos.iter().zip(&src).for_each(|(&p, &v)| model[p] = v);
            }
            Write::AddTensor(s) => {
                let src = values(k, s);
                t += &Tensor::from_vec(src.clone(), &m.shape, dev).unwrap();
                m.pos.iter().zip(&src).for_each(|(&p, &v)| model[p] += v);
            }
        }
        kept.push((t, m));
        if c.step_after {
            dev.mark_step().unwrap();
        }
    }
    let what = format!("{cases:?} on {dev:?}");
    assert_close(
        &base.to_vec::<f32>().unwrap(),
        &model,
        0.0,
        0.0,
        &format!("base after {what}"),
    );
    for (t, m) in &kept {
        let expected: Vec<f32> = m.pos.iter().map(|&p| model[p]).collect();
        assert_close(
            &t.to_vec::<f32>().unwrap(),
            &expected,
            0.0,
            0.0,
            &format!("view {:?} after {what}", m.shape),
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_views_and_writes_match_a_host_model(cases in prop::collection::vec(case(), 1..=5)) {
        for dev in devices() {
            run(&[3, 4, 5], &cases, &dev);
        }
    }
}

#[test]
fn mark_step_keeps_views_aliased() {
    for dev in devices() {
        // PyTorch's regression test, in spirit: write the view, read the base.
        let base = Tensor::zeros(&[4, 4], &dev);
        let v = base.slice(0, 1, 3, 1);
        dev.mark_step().unwrap();
        v.add_(1.0);
        dev.mark_step().unwrap();
        let b = base.to_vec::<f32>().unwrap();
        let expected: Vec<f32> = (0..16)
            .map(|i| if (4..12).contains(&i) { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(b, expected, "on {dev:?}");
        // And the reverse: write the base, read the view.
        base.add_(2.0);
        dev.mark_step().unwrap();
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![3.0; 8]);
        // The handle keeps its identity across in-place ops.
        let alias = base.clone();
        base.mul_(2.0);
        assert_eq!(alias.to_vec::<f32>().unwrap()[0], 4.0);
        assert!(base.version() >= 3);
    }
}

#[test]
fn writing_through_views_updates_siblings_and_transposes() {
    for dev in devices() {
        let x =
            Tensor::from_vec((0..6).map(|v| v as f32).collect::<Vec<_>>(), &[2, 3], &dev).unwrap();
        let t = x.t(); // [3, 2]
        let row = x.select(0, 1); // [3]
        t.select(0, 2).fill_(-1.0); // column 2 of x
        assert_eq!(row.to_vec::<f32>().unwrap(), vec![3.0, 4.0, -1.0]);
        let d = x.diagonal(0, 0, 1);
        d.zero_();
        assert_eq!(
            x.to_vec::<f32>().unwrap(),
            vec![0.0, 1.0, -1.0, 3.0, 0.0, -1.0]
        );
        x.slice_assign(
            &[0..1, 1..3],
            &Tensor::from_vec(vec![10.0f32, 20.0], &[1, 2], &dev).unwrap(),
        );
        assert_eq!(
            x.to_vec::<f32>().unwrap(),
            vec![0.0, 10.0, 20.0, 3.0, 0.0, -1.0]
        );
        let r = x.reshape([6]);
        r.clamp_(0.0, 5.0);
        assert_eq!(
            x.to_vec::<f32>().unwrap(),
            vec![0.0, 5.0, 5.0, 3.0, 0.0, 0.0]
        );
        let mut w = x.deep_clone();
        w -= 1.0;
        w *= &x;
        assert_eq!(
            x.to_vec::<f32>().unwrap()[1],
            5.0,
            "deep_clone is independent"
        );
        assert_eq!(
            w.to_vec::<f32>().unwrap(),
            vec![-0.0, 20.0, 20.0, 6.0, -0.0, -0.0]
        );
    }
}

#[test]
fn writing_through_an_expanded_view_panics_at_the_caller() {
    let dev = Device::cpu();
    let x = Tensor::zeros(&[1, 3], &dev);
    let e = x.expand([4, 3]);
    let line = line!() + 1;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.fill_(1.0)));
    let payload = r.expect_err("writing through expand must panic");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(msg.contains("expanded") && msg.contains("fill_"), "{msg}");
    assert!(msg.contains(&format!("{}:{line}", file!())), "{msg}");
}

#[test]
fn in_place_dtype_change_panics() {
    let dev = Device::cpu();
    let i = Tensor::from_vec(vec![1i32, 2], &[2], &dev).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| i.add_(0.5f32)));
    assert!(r.is_err(), "i32 += 0.5 would change the dtype");
}

#[test]
fn slice_assign_of_an_elementwise_result_is_one_kernel() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(vec![0.0f32; 64], &[8, 8], &dev).unwrap();
    let y = Tensor::from_vec((0..16).map(|v| v as f32).collect::<Vec<_>>(), &[4, 4], &dev).unwrap();
    dev.reset_metrics();
    x.slice_assign(&[2..6, 4..8], (&y * 2.0 + 1.0).relu());
    dev.mark_step().unwrap();
    let m = dev.metrics();
    assert_eq!(m.counter("kernel_launches"), 1, "{m}");
    let v = x.to_vec::<f32>().unwrap();
    for r in 0..8 {
        for c in 0..8 {
            let expected = if (2..6).contains(&r) && (4..8).contains(&c) {
                (((r - 2) * 4 + (c - 4)) as f32) * 2.0 + 1.0
            } else {
                0.0
            };
            assert_eq!(v[r * 8 + c], expected, "({r}, {c})");
        }
    }
}
