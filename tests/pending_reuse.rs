//! Values that are still pending must never read a buffer that an earlier
//! run overwrote (donation) or handed to another value (reuse).
//!
//! Oracle: a host model kept in the test. Every tensor the program holds
//! is mirrored by a `[4, 4]` array of f64 values (aliases share one array;
//! a transposed view reads it transposed), and every op, read, drop,
//! in-place write and step is applied to the model by plain loops. The
//! programs are random (proptest) and run on the CPU reference and on the
//! GPU. Tolerance: rtol 1e-4 / atol 1e-5 (f32 arithmetic against f64).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, devices, gpu};
use lazywgpu::{Device, Tensor};
use proptest::prelude::*;

/// The first program of the issue: reading `z` must not let it overwrite
/// the buffer that the still pending `y` is computed from.
#[test]
fn reading_one_value_keeps_the_inputs_of_another_pending_value() {
    for dev in devices() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2], &dev).unwrap();
        let y = &x * 3.0;
        drop(x);
        let z = &y + 1.0;
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![4.0, 7.0], "z on {dev:?}");
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0, 6.0], "y on {dev:?}");
    }
}

/// The second program: an in-place write leaves the tensor pending on its
/// old buffer; a read of another value computed from it must not take
/// that buffer over.
#[test]
fn reading_a_value_derived_from_an_inplace_write_keeps_the_written_tensor() {
    for dev in devices() {
        let base = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4], &dev).unwrap();
        base.add_(1.0);
        assert_eq!(
            (&base * 10.0).to_vec::<f32>().unwrap(),
            vec![20.0, 30.0, 40.0, 50.0],
            "base * 10 on {dev:?}"
        );
        assert_eq!(
            base.to_vec::<f32>().unwrap(),
            vec![2.0, 3.0, 4.0, 5.0],
            "base on {dev:?}"
        );
    }
}

/// A pending value read through a chain of other pending values (not
/// directly) still protects the stored input at the chain's start.
#[test]
fn a_pending_chain_keeps_its_stored_input() {
    for dev in devices() {
        let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3], &dev).unwrap();
        let a = &x + 1.0;
        let b = &a * 2.0;
        drop(x);
        drop(a);
        let c = (&b - 1.0).relu();
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![3.0, 0.0, 7.0]);
        assert_eq!(b.to_vec::<f32>().unwrap(), vec![4.0, -2.0, 8.0]);
    }
}

/// Donation still happens where it is legal: an update `w -= 0.5 * g`
/// whose old value nothing else can read writes into `w`'s buffer.
#[test]
fn an_update_nothing_else_reads_still_donates() {
    if let Some(dev) = gpu() {
        let w = Tensor::from_vec(vec![1.0f32; 64], &[64], &dev).unwrap();
        let g = Tensor::from_vec(vec![2.0f32; 64], &[64], &dev).unwrap();
        dev.mark_step().unwrap();
        let before = dev.metrics().counter("buffers_donated");
        w.sub_(&g * 0.5);
        dev.mark_step().unwrap();
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.0f32; 64]);
        assert!(
            dev.metrics().counter("buffers_donated") > before,
            "the update should write into w's old buffer"
        );
    }
}

const N: usize = 4;

/// A buffer a run gives back to the pool while it is encoded (an
/// intermediate past its last reader) must not reach another thread
/// before the run is submitted: an upload there that took it and queued
/// its write first had its data overwritten by the run's kernels (55 to
/// 90 of this program's 400 uploads, before the pool kept the queue's
/// order; the ResNet example's loader thread lost batches so, and its
/// runs differed). Oracle: the uploaded data itself.
#[test]
fn uploads_on_another_thread_keep_their_data_while_a_run_is_encoded() {
    let Some(dev) = gpu() else { return };
    let n = 256 * 256;
    let loader = dev.clone();
    let uploads = std::thread::spawn(move || {
        let mut corrupted = 0;
        for i in 0..400 {
            let data: Vec<f32> = (0..n).map(|j| (i * 31 + j) as f32).collect();
            let t = Tensor::from_vec(data.clone(), [n], &loader).unwrap();
            std::thread::yield_now();
            if t.to_vec::<f32>().unwrap() != data {
                corrupted += 1;
            }
        }
        corrupted
    });
    // Intermediates of the uploads' size class, released mid-encoding.
    let x = Tensor::ones([256, 256], &dev);
    let w = Tensor::ones([256, 256], &dev) * 0.01;
    for _ in 0..400 {
        let mut y = x.clone();
        for _ in 0..12 {
            y = y.matmul(&w).tanh();
        }
        dev.mark_step().unwrap();
    }
    assert_eq!(uploads.join().unwrap(), 0, "uploads overwritten");
}

/// One step of a random program. Operands name entries of the program's
/// list of live tensors modulo its length.
#[derive(Clone, Debug)]
enum Action {
    New(u32),
    /// `tanh(a) * k + b * 0.5` (bounded, so long programs stay finite).
    Combine(usize, usize, f32),
    /// `a * tanh(b)`.
    Product(usize, usize),
    /// `a - mean(a)` (a reduction feeding an elementwise kernel).
    Center(usize),
    /// `tanh(a @ b * 0.25)`.
    Matmul(usize, usize),
    /// A second handle to the same tensor (`Clone`).
    Alias(usize),
    /// The transposed view (aliases its base).
    Transpose(usize),
    Drop(usize),
    /// `a.add_(b)`.
    AddInPlace(usize, usize),
    /// `a.mul_(k)`.
    ScaleInPlace(usize, f32),
    /// `a.slice(0, 1, 3, 1).add_(k)`: a write through a temporary view.
    SliceAdd(usize, f32),
    /// `a.copy_(b)`.
    Copy(usize, usize),
    Read(usize),
    MarkStep,
}

fn action() -> impl Strategy<Value = Action> {
    let k = -2.0f32..2.0;
    prop_oneof![
        any::<u32>().prop_map(Action::New),
        (any::<usize>(), any::<usize>(), k.clone()).prop_map(|(a, b, k)| Action::Combine(a, b, k)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Action::Product(a, b)),
        any::<usize>().prop_map(Action::Center),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Action::Matmul(a, b)),
        any::<usize>().prop_map(Action::Alias),
        any::<usize>().prop_map(Action::Transpose),
        any::<usize>().prop_map(Action::Drop),
        any::<usize>().prop_map(Action::Drop),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Action::AddInPlace(a, b)),
        (any::<usize>(), -1.5f32..1.5).prop_map(|(a, k)| Action::ScaleInPlace(a, k)),
        (any::<usize>(), k).prop_map(|(a, k)| Action::SliceAdd(a, k)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Action::Copy(a, b)),
        any::<usize>().prop_map(Action::Read),
        any::<usize>().prop_map(Action::Read),
        Just(Action::MarkStep),
    ]
}

/// A live tensor of the program and where its model values are.
struct Entry {
    tensor: Tensor,
    model: usize,
    transposed: bool,
}

/// The host model: one `[N, N]` array per aliasing family.
struct Model {
    arrays: Vec<Vec<f64>>,
}

impl Model {
    /// Position in the family's array of element `(i, j)` of an entry.
    fn pos(e: &Entry, i: usize, j: usize) -> usize {
        if e.transposed { j * N + i } else { i * N + j }
    }

    fn values(&self, e: &Entry) -> Vec<f64> {
        let a = &self.arrays[e.model];
        (0..N * N).map(|k| a[Model::pos(e, k / N, k % N)]).collect()
    }

    fn write(&mut self, e: &Entry, values: &[f64], rows: std::ops::Range<usize>) {
        for i in rows {
            for j in 0..N {
                self.arrays[e.model][Model::pos(e, i, j)] = values[i * N + j];
            }
        }
    }

    fn fresh(&mut self, values: Vec<f64>) -> usize {
        self.arrays.push(values);
        self.arrays.len() - 1
    }

    /// A new tensor with a family of its own holding `values`.
    fn entry(&mut self, tensor: Tensor, values: Vec<f64>) -> Entry {
        Entry {
            tensor,
            model: self.fresh(values),
            transposed: false,
        }
    }
}

fn seeded(seed: u32) -> Vec<f32> {
    common::data(N * N, seed as u64 % 1000)
}

fn check(e: &Entry, model: &Model, what: &str) {
    let got = e.tensor.to_vec::<f32>().unwrap();
    let want: Vec<f32> = model.values(e).iter().map(|&v| v as f32).collect();
    assert_close(&got, &want, 1e-4, 1e-5, what);
}

fn run_program(dev: &Device, steps: &[Action]) {
    let mut model = Model { arrays: Vec::new() };
    // A stored tensor of `seeded(seed)` values, in a family of its own.
    let stored = |model: &mut Model, seed: u32| {
        let v = seeded(seed);
        let t = Tensor::from_vec(v.clone(), [N, N], dev).unwrap();
        model.entry(t, v.iter().map(|&x| x as f64).collect())
    };
    let mut live = vec![stored(&mut model, 7)];
    for (n, s) in steps.iter().enumerate() {
        let what = format!("step {n} ({s:?}) on {dev:?}");
        let at = |i: usize| i % live.len().max(1);
        if live.is_empty() && !matches!(s, Action::New(_)) {
            continue;
        }
        match *s {
            Action::New(seed) => live.push(stored(&mut model, seed)),
            Action::Combine(a, b, k) => {
                let (ea, eb) = (&live[at(a)], &live[at(b)]);
                let t = ea.tensor.tanh() * k + &eb.tensor * 0.5;
                let (va, vb) = (model.values(ea), model.values(eb));
                let v = va
                    .iter()
                    .zip(&vb)
                    .map(|(x, y)| (*x as f32).tanh() as f64 * k as f64 + y * 0.5)
                    .collect();
                live.push(model.entry(t, v));
            }
            Action::Product(a, b) => {
                let (ea, eb) = (&live[at(a)], &live[at(b)]);
                let t = &ea.tensor * eb.tensor.tanh();
                let v = model
                    .values(ea)
                    .iter()
                    .zip(&model.values(eb))
                    .map(|(x, y)| x * y.tanh())
                    .collect();
                live.push(model.entry(t, v));
            }
            Action::Center(a) => {
                let ea = &live[at(a)];
                let t = &ea.tensor - ea.tensor.mean([0, 1], true);
                let va = model.values(ea);
                let mean = va.iter().sum::<f64>() / (N * N) as f64;
                live.push(model.entry(t, va.iter().map(|x| x - mean).collect()));
            }
            Action::Matmul(a, b) => {
                let (ea, eb) = (&live[at(a)], &live[at(b)]);
                let t = (ea.tensor.matmul(&eb.tensor) * 0.25).tanh();
                let (va, vb) = (model.values(ea), model.values(eb));
                let v = (0..N * N)
                    .map(|e| {
                        let (i, j) = (e / N, e % N);
                        let dot: f64 = (0..N).map(|k| va[i * N + k] * vb[k * N + j]).sum();
                        (dot * 0.25).tanh()
                    })
                    .collect();
                live.push(model.entry(t, v));
            }
            Action::Alias(a) => {
                let e = &live[at(a)];
                live.push(Entry {
                    tensor: e.tensor.clone(),
                    model: e.model,
                    transposed: e.transposed,
                });
            }
            Action::Transpose(a) => {
                let e = &live[at(a)];
                live.push(Entry {
                    tensor: e.tensor.t(),
                    model: e.model,
                    transposed: !e.transposed,
                });
            }
            Action::Drop(a) => {
                let i = at(a);
                live.remove(i);
            }
            Action::AddInPlace(a, b) => {
                let (ea, eb) = (&live[at(a)], &live[at(b)]);
                ea.tensor.add_(&eb.tensor);
                let v: Vec<f64> = model
                    .values(ea)
                    .iter()
                    .zip(&model.values(eb))
                    .map(|(x, y)| x + y)
                    .collect();
                model.write(ea, &v, 0..N);
            }
            Action::ScaleInPlace(a, k) => {
                let ea = &live[at(a)];
                ea.tensor.mul_(k);
                let v: Vec<f64> = model.values(ea).iter().map(|x| x * k as f64).collect();
                model.write(ea, &v, 0..N);
            }
            Action::SliceAdd(a, k) => {
                let ea = &live[at(a)];
                ea.tensor.slice(0, 1, 3, 1).add_(k);
                let v: Vec<f64> = model.values(ea).iter().map(|x| x + k as f64).collect();
                model.write(ea, &v, 1..3);
            }
            Action::Copy(a, b) => {
                let (ea, eb) = (&live[at(a)], &live[at(b)]);
                ea.tensor.copy_(&eb.tensor);
                let v = model.values(eb);
                model.write(ea, &v, 0..N);
            }
            Action::Read(a) => check(&live[at(a)], &model, &what),
            Action::MarkStep => dev.mark_step().unwrap(),
        }
    }
    for (i, e) in live.iter().enumerate() {
        check(e, &model, &format!("live tensor {i} at the end on {dev:?}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Random programs of reads, drops, aliases, views, in-place writes
    /// and steps: every value read equals the host model's.
    #[test]
    fn random_programs_read_what_the_model_says(steps in prop::collection::vec(action(), 1..60)) {
        for dev in devices() {
            run_program(&dev, &steps);
        }
    }
}
