//! Graphs where values are reused compile in work linear in their size.
//!
//! Every pass over a graph (collection, keying, scheduling, vectorisation
//! checks, code generation, autograd) must visit each node a bounded
//! number of times: a walk that follows every path is exponential in the
//! depth of the reuse. Values are checked against f64 loops, and the work
//! is counted, never timed (a time bound fails on a slow machine): the
//! nodes of the graphs collected (`graph_nodes`, both backends), and on the
//! GPU the kernels compiled and the lines of WGSL generated, read from
//! `LAZYWGPU_DUMP`'s files. Each is bounded by a small multiple of the ops
//! recorded (measured at about a third of the bound or less), so growth
//! faster than linear that still finishes fails here on any machine. A
//! walk along every path does not finish at these depths (2^30 to 2^40
//! paths; the window writes below once emitted a kernel exponential in
//! the windows and ran out of memory at 12): the test then runs until
//! stopped, which `cargo test` reports after 60 s, instead of failing a
//! time bound that a slow machine also fails.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use std::path::{Path, PathBuf};

use common::assert_close;
use lazywgpu::{Device, DeviceConfig, Tensor};

/// Graph nodes allowed per op recorded: an op is a node or a few (an
/// in-place write through a view is a scatter into its base, a gradient
/// a few nodes per forward op), never a number that grows with depth.
const NODES_PER_OP: u64 = 8;

/// Lines of WGSL allowed per op recorded (a kernel's header, bindings and
/// loop skeleton, then about one line per node it computes; where 40 sums
/// each read through the chain of earlier window writes, 68 measured on
/// lavapipe and 202 on an H200, whose reductions are workgroup trees).
const WGSL_LINES_PER_OP: u64 = 300;

/// Kernels allowed per op recorded.
const KERNELS_PER_OP: u64 = 2;

/// The CPU reference device and, where there is an adapter (see
/// `common::gpu`), a GPU device that writes what it compiles into a fresh
/// directory named after `test`, to count the WGSL.
fn counted_devices(test: &str) -> Vec<(Device, Option<PathBuf>)> {
    let mut devs = vec![(Device::cpu(), None)];
    if common::gpu().is_some() {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("graph_scale")
            .join(test);
        // A dump left by an earlier run would be counted too.
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("remove the last run's dump");
        }
        let config = DeviceConfig {
            dump_dir: Some(dir.clone()),
            ..DeviceConfig::from_env()
        };
        let dev = Device::gpu_with(config).expect("a GPU device on the adapter common::gpu found");
        devs.push((dev, Some(dir)));
    }
    devs
}

/// Asserts that the work `dev` did since its creation (and `dump`'s WGSL)
/// stays within the per-op bounds for `ops` recorded ops.
#[track_caller]
fn assert_linear_work(dev: &Device, dump: Option<&Path>, ops: u64, what: &str) {
    let metrics = dev.metrics();
    let nodes = metrics.counter("graph_nodes");
    let kernels = metrics.counter("kernels_compiled");
    let wgsl_lines: u64 = dump.map_or(0, |dir| {
        std::fs::read_dir(dir)
            .expect("the dump directory")
            .map(|entry| entry.expect("a dump entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "wgsl"))
            .map(|path| {
                let text = std::fs::read_to_string(&path).expect("a dumped kernel");
                text.lines().count() as u64
            })
            .sum()
    });
    eprintln!(
        "{what} on {dev:?}: {ops} ops recorded, {nodes} graph nodes, {kernels} kernels, {wgsl_lines} lines of WGSL"
    );
    assert!(nodes > 0, "{what}: no graph was collected");
    assert!(
        nodes <= NODES_PER_OP * ops,
        "{what} on {dev:?}: {nodes} graph nodes for {ops} ops"
    );
    assert!(
        kernels <= KERNELS_PER_OP * ops,
        "{what} on {dev:?}: {kernels} kernels for {ops} ops"
    );
    if dump.is_some() {
        assert!(wgsl_lines > 0, "{what} on {dev:?}: no kernel was dumped");
        assert!(
            wgsl_lines <= WGSL_LINES_PER_OP * ops,
            "{what} on {dev:?}: {wgsl_lines} lines of WGSL for {ops} ops"
        );
    }
}

/// `y = y * y + y`, 40 times, from a value small enough to stay finite.
#[test]
fn a_chain_that_reuses_every_value_compiles_at_once() {
    for (dev, dump) in counted_devices("reuse_chain") {
        let x0 = [-0.5f32, -0.25, 0.001, -0.9];
        let x = Tensor::from_vec(x0.to_vec(), [4], &dev).unwrap();
        let mut y = x.clone();
        for _ in 0..40 {
            y = &y * &y + &y;
        }
        let got = y.to_vec::<f32>().unwrap();
        let want: Vec<f32> = x0
            .iter()
            .map(|&v| {
                // The same f32 operations as the kernel, in order.
                let mut y = v;
                for _ in 0..40 {
                    y = y * y + y;
                }
                y
            })
            .collect();
        assert_close(&got, &want, 1e-5, 1e-6, "y = y * y + y, depth 40");
        assert_linear_work(&dev, dump.as_deref(), 80, "depth-40 reuse chain");
    }
}

/// A tiny deterministic generator for the random DAG (no dependence on
/// the library's own random numbers).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One node of the random DAG: which earlier nodes it reads and how.
#[derive(Clone, Copy, Debug)]
enum DagOp {
    Tanh(usize),
    Add(usize, usize),
    Mul(usize, usize),
    Avg(usize, usize),
}

/// A random 300-node DAG where each node reads one or two random earlier
/// nodes, every node an output of the last one's graph through a final
/// sum, compiled and run, against f64.
#[test]
fn a_random_dag_of_300_nodes_compiles_at_once() {
    let mut rng = SplitMix(12345);
    let n_inputs = 4;
    let ops: Vec<DagOp> = (n_inputs..300)
        .map(|i| {
            let (a, b) = (rng.below(i), rng.below(i));
            match rng.below(4) {
                0 => DagOp::Tanh(a),
                1 => DagOp::Add(a, b),
                2 => DagOp::Mul(a, b),
                _ => DagOp::Avg(a, b),
            }
        })
        .collect();
    let len = 8;
    let inputs: Vec<Vec<f32>> = (0..n_inputs)
        .map(|s| common::data(len, s as u64 + 3))
        .collect();
    // Oracle: the same DAG in f64; tanh after every few ops keeps values
    // bounded, and a product of values in [-1, 1] stays in it.
    let mut want: Vec<Vec<f64>> = inputs
        .iter()
        .map(|v| v.iter().map(|&x| x as f64).collect())
        .collect();
    for op in &ops {
        let v: Vec<f64> = (0..len)
            .map(|e| match *op {
                DagOp::Tanh(a) => want[a][e].tanh(),
                DagOp::Add(a, b) => (want[a][e] + want[b][e]).tanh(),
                DagOp::Mul(a, b) => want[a][e] * want[b][e],
                DagOp::Avg(a, b) => (want[a][e] + want[b][e]) * 0.5,
            })
            .collect();
        want.push(v);
    }
    for (dev, dump) in counted_devices("random_dag") {
        let mut vals: Vec<Tensor> = inputs
            .iter()
            .map(|v| Tensor::from_vec(v.clone(), [len], &dev).unwrap())
            .collect();
        for op in &ops {
            let t = match *op {
                DagOp::Tanh(a) => vals[a].tanh(),
                DagOp::Add(a, b) => (&vals[a] + &vals[b]).tanh(),
                DagOp::Mul(a, b) => &vals[a] * &vals[b],
                DagOp::Avg(a, b) => (&vals[a] + &vals[b]) * 0.5,
            };
            vals.push(t);
        }
        // Read the last node alone first (one graph through the whole DAG),
        // then every node in one step.
        let last = vals.last().unwrap().to_vec::<f32>().unwrap();
        let want_last: Vec<f32> = want.last().unwrap().iter().map(|&v| v as f32).collect();
        assert_close(&last, &want_last, 1e-4, 1e-5, "last DAG node");
        dev.mark_step().unwrap();
        // Up to three ops per DAG node (add, tanh; the sum's scalar).
        assert_linear_work(&dev, dump.as_deref(), 3 * 300, "random 300-node DAG");
        for (i, (t, w)) in vals.iter().zip(&want).enumerate() {
            let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
            assert_close(
                &t.to_vec::<f32>().unwrap(),
                &w,
                1e-4,
                1e-5,
                &format!("DAG node {i} on {dev:?}"),
            );
        }
    }
}

/// Differentiating a graph that reuses every value is linear too: the
/// gradient of the depth-30 chain against the derivative by the chain
/// rule in f64.
#[test]
fn the_gradient_of_a_reuse_chain_is_computed_at_once() {
    for (dev, dump) in counted_devices("reuse_chain_gradient") {
        let x0 = [-0.5f32, -0.25, 0.01];
        let x = Tensor::from_vec(x0.to_vec(), [3], &dev).unwrap();
        x.requires_grad_(true);
        let mut y = x.clone();
        for _ in 0..30 {
            y = &y * &y + &y;
        }
        y.sum_all().backward();
        let grad = x.grad().expect("x has a gradient").to_vec::<f32>().unwrap();
        let want: Vec<f32> = x0
            .iter()
            .map(|&v| {
                let (mut y, mut dy) = (v as f64, 1.0f64);
                for _ in 0..30 {
                    dy *= 2.0 * y + 1.0;
                    y = y * y + y;
                }
                dy as f32
            })
            .collect();
        assert_close(&grad, &want, 1e-3, 1e-5, "d/dx of the reuse chain");
        // 60 forward ops and the sum.
        assert_linear_work(&dev, dump.as_deref(), 61, "gradient of the depth-30 chain");
    }
}

/// 40 windows of 5 elements of one buffer, each written in place in turn
/// (`w = w * 0.5 + c`); with `sums`, `c` is 0.001 times the sum of every
/// window up to this one (as written so far), else `0.01 * k`. Checked
/// against the same updates in f64; returns the ops recorded.
fn window_writes(dev: &Device, sums: bool) -> u64 {
    let (windows, len) = (40, 5);
    let init: Vec<f32> = (0..windows * len)
        .map(|i| (i % 7) as f32 * 0.25 - 0.5)
        .collect();
    let flat = Tensor::from_vec(init.clone(), [windows * len], dev).unwrap();
    let views: Vec<Tensor> = (0..windows).map(|k| flat.narrow(0, k * len, len)).collect();
    for (k, v) in views.iter().enumerate() {
        if sums {
            // Summed before this window is written.
            let earlier = flat.narrow(0, 0, (k + 1) * len).sum_all();
            v.mul_(0.5).add_(&earlier * 0.001);
        } else {
            v.mul_(0.5).add_(k as f32 * 0.01);
        }
    }
    let got = flat.to_vec::<f32>().unwrap();
    let mut want: Vec<f64> = init.iter().map(|&v| v as f64).collect();
    for k in 0..windows {
        let c = if sums {
            want[..(k + 1) * len].iter().sum::<f64>() * 0.001
        } else {
            (k as f32 * 0.01) as f64
        };
        for v in &mut want[k * len..(k + 1) * len] {
            *v = *v * 0.5 + c;
        }
    }
    let want: Vec<f32> = want.into_iter().map(|v| v as f32).collect();
    assert_close(
        &got,
        &want,
        1e-5,
        1e-6,
        &format!("window writes (sums: {sums}) on {dev:?}"),
    );
    // Per window: the view and two in-place ops, and with sums the
    // earlier windows' view, their sum and its scaling.
    windows as u64 * if sums { 6 } else { 3 }
}

/// One in-place op through each of 40 windows of one buffer: each write
/// is a strided scatter into the base, and each window's new value reads
/// the base the previous write made. Reading the base there and at the
/// scattered element once (not once per path) keeps the kernel linear in
/// the number of windows; it was exponential (8 windows took 1.6 s, 12
/// ran out of memory).
#[test]
fn in_place_ops_through_many_windows_of_one_buffer_compile_at_once() {
    for (dev, dump) in counted_devices("window_writes") {
        let ops = window_writes(&dev, false);
        assert_linear_work(&dev, dump.as_deref(), ops, "40 in-place window writes");
    }
}

/// Window writes where each window's new value also reads the sum of
/// every earlier window: the reduction of window 40 reads, through the
/// chain of writes, 31 sums stored by earlier kernels, past the binding
/// limit, so part of its prologue is written first. It failed to compile
/// ("kernel needs 33 storage buffers") before.
#[test]
fn window_writes_that_read_every_earlier_window_split_their_kernels() {
    for (dev, dump) in counted_devices("window_writes_with_sums") {
        let ops = window_writes(&dev, true);
        assert_linear_work(
            &dev,
            dump.as_deref(),
            ops,
            "40 window writes reading earlier sums",
        );
    }
}

/// One value that reads 40 reductions (a sum of many losses): more stored
/// values than a kernel may bind (32 on lavapipe), so part of the sum is
/// written by a kernel of its own first; it failed to compile before.
#[test]
fn a_value_that_reads_more_reductions_than_a_kernel_may_bind_is_split() {
    let parts = 40;
    for dev in common::devices() {
        let data: Vec<Vec<f32>> = (0..parts)
            .map(|k| {
                (0..7)
                    .map(|i| ((i * 3 + k) % 11) as f32 * 0.5 - 2.0)
                    .collect()
            })
            .collect();
        let sums: Vec<Tensor> = data
            .iter()
            .map(|d| Tensor::from_vec(d.clone(), [7], &dev).unwrap().sum_all())
            .collect();
        let mut total = sums[0].clone();
        for (k, s) in sums.iter().enumerate().skip(1) {
            total = &total + &(s * (k as f32 + 1.0));
        }
        let got = total.to_vec::<f32>().unwrap();
        let want: f64 = data
            .iter()
            .enumerate()
            .map(|(k, d)| d.iter().map(|&v| v as f64).sum::<f64>() * (k as f64 + 1.0))
            .sum();
        assert_close(
            &got,
            &[want as f32],
            1e-5,
            1e-4,
            &format!("sum of {parts} reductions on {dev:?}"),
        );
    }
}

/// A row sum, a softmax and a matmul, each plus 40 values laid along its
/// output's rows or columns: the epilogue fused into the root's kernel
/// reads more stored values than a kernel may bind (32 on lavapipe), so
/// the epilogue gets a kernel of its own (and is divided again there).
/// Each failed to compile ("kernel needs 42 storage buffers") before.
#[test]
fn roots_whose_epilogues_read_more_values_than_a_kernel_may_bind_are_split() {
    let (m, k, n, extra) = (6usize, 9usize, 5usize, 40usize);
    let value = |i: usize, seed: usize| ((i * 7 + seed * 3) % 13) as f64 * 0.25 - 1.5;
    let x: Vec<f64> = (0..m * k).map(|i| value(i, 1)).collect();
    let w: Vec<f64> = (0..k * n).map(|i| value(i, 2)).collect();
    let adds: Vec<Vec<f64>> = (0..extra)
        .map(|e| (0..m.max(n)).map(|i| value(i, e + 3)).collect())
        .collect();
    let column_sum = |i: usize, len: usize| (adds.iter()).map(|a| a[i % len]).sum::<f64>();
    // The f64 oracle: each root, then its 40 additions.
    let sums: Vec<f64> = (0..m)
        .map(|r| x[r * k..(r + 1) * k].iter().sum::<f64>() + column_sum(r, m))
        .collect();
    let mut softmax = vec![0.0; m * k];
    for r in 0..m {
        let row = &x[r * k..(r + 1) * k];
        let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = row.iter().map(|v| (v - max).exp()).sum();
        for c in 0..k {
            softmax[r * k + c] = (row[c] - max).exp() / total + column_sum(r, m);
        }
    }
    let f32s = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
    let product: Vec<f64> = common::matmul_f64(&f32s(&x), &f32s(&w), (1, m, k, n))
        .iter()
        .enumerate()
        .map(|(e, &dot)| f64::from(dot) + column_sum(e % n, n))
        .collect();
    for dev in common::devices() {
        let xt = Tensor::from_vec(f32s(&x), [m, k], &dev).unwrap();
        let wt = Tensor::from_vec(f32s(&w), [k, n], &dev).unwrap();
        let add = |root: Tensor, len: usize, shape: [usize; 2]| {
            (adds.iter()).fold(root, |acc, a| {
                let t = Tensor::from_vec(f32s(&a[..len]), [len], &dev).unwrap();
                acc + t.reshape(shape.to_vec())
            })
        };
        let cases = [
            (
                "row sum",
                add(xt.sum([1], false), m, [1, m]).reshape([m]),
                sums.clone(),
            ),
            ("softmax", add(xt.softmax(-1), m, [m, 1]), softmax.clone()),
            ("matmul", add(xt.matmul(&wt), n, [1, n]), product.clone()),
        ];
        for (what, got, want) in cases {
            assert_close(
                &got.to_vec::<f32>().unwrap(),
                &f32s(&want),
                1e-5,
                1e-4,
                &format!("{what} plus {extra} values on {dev:?}"),
            );
        }
    }
}
