//! A GPU's reduction stages (`ReduceSplit::GPU`: split from 4,096
//! elements, 32 a part, up to four stages) run on the adapter the tests
//! have (lavapipe in CI, whose own policy splits only from 65,536), and
//! checked against f64 loops: sums, means, products, maxima and minima of
//! all elements and of a few long rows, at sizes around each stage's
//! threshold, with a NaN where one must win. And the GPU's lowering of
//! long scans and sorts, node by node.

use crate::kernel::{ReduceSplit, Target};
use crate::{Device, Tensor};

fn gpu_policy_device() -> Option<Device> {
    let mut target = Target::lavapipe();
    target.reduce_split = ReduceSplit::GPU;
    Device::gpu_for_target(target)
}

/// Values in [0.5, 1.5): products of thousands stay finite.
fn values(n: usize, seed: u64) -> Vec<f32> {
    crate::test_values::spread(n, seed, 0.5, 1.0)
}

fn close(got: f32, want: f64, what: &str) {
    close_within(got, want, 1e-5, what);
}

/// `got` within `rel` of `want` (relative, at least absolute `rel`).
fn close_within(got: f32, want: f64, rel: f64, what: &str) {
    let tol = rel * want.abs().max(1.0);
    assert!(
        (f64::from(got) - want).abs() <= tol || (got.is_nan() && want.is_nan()),
        "{what}: {got} where {want}"
    );
}

#[test]
fn reductions_split_into_a_gpus_stages_match_f64_loops() {
    let Some(dev) = gpu_policy_device() else {
        return;
    };
    for &n in &[4095usize, 4096, 8192, 49_152, 131_073, 1 << 20] {
        let host = values(n, n as u64);
        let x = Tensor::from_vec(host.clone(), [n], &dev).unwrap();
        let sum: f64 = host.iter().map(|&v| f64::from(v)).sum();
        close(
            x.sum_all().item::<f32>().unwrap(),
            sum,
            &format!("sum of {n}"),
        );
        close(
            x.mean_all().item::<f32>().unwrap(),
            sum / n as f64,
            &format!("mean of {n}"),
        );
        let max = host.iter().copied().fold(f32::MIN, f32::max);
        let min = host.iter().copied().fold(f32::MAX, f32::min);
        close(
            x.max_all().item::<f32>().unwrap(),
            f64::from(max),
            &format!("max of {n}"),
        );
        close(
            x.min_all().item::<f32>().unwrap(),
            f64::from(min),
            &format!("min of {n}"),
        );
        // A product near 1: each value scaled so the logs cancel.
        let scaled: Vec<f32> = host.iter().map(|&v| 1.0 + (v - 1.0) * 1e-3).collect();
        let prod: f64 = scaled.iter().map(|&v| f64::from(v)).product();
        let xs = Tensor::from_vec(scaled, [n], &dev).unwrap();
        // f32 products round at each of n steps: n * 2^-24 at worst.
        let got = xs.prod(Vec::<isize>::new(), false).item::<f32>().unwrap();
        close_within(got, prod, n as f64 * 6e-8, &format!("prod of {n}"));
        // A NaN anywhere wins the maximum and the sum.
        let mut nan = host.clone();
        nan[n * 2 / 3] = f32::NAN;
        let xn = Tensor::from_vec(nan, [n], &dev).unwrap();
        assert!(
            xn.max_all().item::<f32>().unwrap().is_nan(),
            "max with a NaN, {n}"
        );
        assert!(
            xn.sum_all().item::<f32>().unwrap().is_nan(),
            "sum with a NaN, {n}"
        );
    }
    // Three long rows, summed along the row (few outputs: split), and
    // along the strided axis of the transpose.
    let (rows, cols) = (3usize, 70_001usize);
    let host = values(rows * cols, 7);
    let x = Tensor::from_vec(host.clone(), [rows, cols], &dev).unwrap();
    let got = x.sum([1], false).to_vec::<f32>().unwrap();
    let by_t = x.t().sum([0], false).to_vec::<f32>().unwrap();
    for r in 0..rows {
        let want: f64 = host[r * cols..(r + 1) * cols]
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        close(got[r], want, &format!("row {r}"));
        close(by_t[r], want, &format!("row {r} through the transpose"));
    }
}

#[test]
fn split_parts_are_powers_of_two_shared_by_a_range_of_sizes() {
    use super::split::split_parts;
    use crate::graph::op::ReduceOp;
    let parts = |n| split_parts(ReduceOp::Sum, n, 1, ReduceSplit::GPU);
    assert_eq!(parts(4095), None, "below the threshold");
    assert_eq!(parts(4096), Some(128));
    for n in [5000, 6000, 7000, 8191] {
        assert_eq!(parts(n), Some(128), "{n} elements");
    }
    assert_eq!(parts(8192), Some(256));
    assert_eq!(parts(1 << 30), Some(1 << 17), "at most 2^17 parts");
    assert_eq!(
        split_parts(ReduceOp::ArgMax, 1 << 20, 1, ReduceSplit::GPU),
        None
    );
    for n in (4096..200_000).step_by(997) {
        let p = parts(n).unwrap();
        assert!(p.is_power_of_two(), "{n}: {p}");
        assert!(n / p >= 32 && n / p < 64, "{n} elements in {p} parts");
    }
}

/// A sum over a size marked dynamic, split into a GPU's stages, at four
/// sizes that share a power of two of parts: the first compiles, the
/// others reuse its kernels (each value checked against an f64 sum).
#[test]
fn a_marked_long_sum_compiles_once_over_sizes_that_share_their_parts() {
    let Some(dev) = gpu_policy_device() else {
        return;
    };
    let mut after_first = None;
    for &n in &[5000usize, 6000, 7000, 8000] {
        let host = values(n, n as u64);
        let x = Tensor::from_vec(host.clone(), [n], &dev)
            .unwrap()
            .mark_dynamic(0);
        let sum: f64 = host.iter().map(|&v| f64::from(v)).sum();
        close(
            x.sum_all().item::<f32>().unwrap(),
            sum,
            &format!("sum of {n}"),
        );
        let compiled = dev.metrics().counter("kernels_compiled");
        after_first.get_or_insert(compiled);
    }
    assert_eq!(
        dev.metrics().counter("kernels_compiled"),
        after_first.unwrap_or(0),
        "kernels compiled after the first size"
    );
}

/// The ops and shapes of the nodes `key` computes, in order.
fn ops_of(key: &crate::graph::GraphKey) -> Vec<(crate::graph::op::Op, Vec<usize>)> {
    key.nodes
        .iter()
        .filter_map(|n| match &n.kind {
            crate::graph::GKind::Op { op, .. } => Some((op.clone(), n.shape.clone())),
            _ => None,
        })
        .collect()
}

/// The graph of `f` applied to an f32 input of `shape`.
fn graph_of(shape: &[usize], f: impl Fn(&Tensor) -> Tensor) -> crate::graph::Graph {
    let n: usize = shape.iter().product();
    let x = Tensor::from_vec(vec![0.5f32; n], shape, &Device::cpu()).expect("input");
    crate::graph::Graph::collect(&[f(&x).node()], true)
}

#[test]
fn a_long_scan_lowers_to_chunk_scans_their_running_values_and_one_combine() {
    use crate::graph::op::{Op, ReduceOp};
    use crate::kernel::ScanSplit;
    use crate::shape::Layout;
    let mut gpu = Target::lavapipe();
    gpu.scan_split = ScanSplit::GPU;
    let graph = graph_of(&[8, 50_257], |x| x.cumsum(1));
    let scan = |chunk| Op::Scan {
        op: ReduceOp::Sum,
        axis: 1,
        chunk,
    };
    // 197 chunks of 256: the 196 before the last end at 255, 511, ...
    let ends = Op::AsStrided(Layout {
        strides: vec![50_257, 256],
        offset: 255,
    });
    assert_eq!(
        ops_of(&super::lower_for_gpu(&graph.key, &gpu).key),
        vec![
            (scan(256), vec![8, 50_257]),
            (ends, vec![8, 196]),
            (scan(0), vec![8, 196]),
            (scan(256), vec![8, 50_257]),
        ]
    );
    // Lavapipe's policy leaves lines within its loop limit whole.
    let whole = super::lower_for_gpu(&graph.key, &Target::lavapipe());
    assert_eq!(ops_of(&whole.key), vec![(scan(0), vec![8, 50_257])]);
}

#[test]
fn a_long_sort_lowers_to_sorted_runs_and_a_merge_per_doubling() {
    use crate::graph::op::Op;
    use crate::kernel::SortSplit;
    let mut gpu = Target::lavapipe();
    gpu.sort_split = SortSplit::GPU;
    // 5,000 elements: runs of 1,024, merged into 2,048, 4,096, 8,192.
    let graph = graph_of(&[3, 5_000], |x| x.argsort(1, true));
    let lowered = super::lower_for_gpu(&graph.key, &gpu);
    let merge = |run| Op::MergeRuns {
        axis: 1,
        descending: true,
        run,
    };
    let sort = Op::Sort {
        axis: 1,
        descending: true,
        run: 1024,
    };
    let shape = vec![3, 5_000];
    assert_eq!(
        ops_of(&lowered.key),
        vec![
            (sort, shape.clone()),
            (merge(1024), shape.clone()),
            (merge(2048), shape.clone()),
            (merge(4096), shape),
        ]
    );
    // Each merge reads the input's values and the runs before it.
    let n = lowered.key.nodes.len();
    assert_eq!(lowered.key.nodes[n - 1].inputs, vec![0, n - 2]);
    assert!(lowered.origin.iter().all(|&o| o < graph.key.nodes.len()));
}

/// Lavapipe's policy sorts a line of 5,000 by eight radix passes (four
/// bits each, from the least significant), each the counts of its blocks
/// of 512, their running sum along the line (a scan; 160 of them, short
/// enough to stay whole) and the order moved; each pass after the first
/// walks the order before it. Lines shorter than 2,048 stay whole.
#[test]
fn a_long_sort_on_a_cpu_adapter_lowers_to_eight_radix_passes() {
    use crate::graph::op::{Op, RadixPass, ReduceOp};
    let graph = graph_of(&[3, 5_000], |x| x.argsort(1, true));
    let lowered = super::lower_for_gpu(&graph.key, &Target::lavapipe());
    let pass = |shift| RadixPass {
        axis: 1,
        descending: true,
        shift,
        block: 512,
    };
    let sum = Op::Scan {
        op: ReduceOp::Sum,
        axis: 1,
        chunk: 0,
    };
    let mut want = Vec::new();
    for shift in (0..32).step_by(4) {
        want.push((Op::RadixCount(pass(shift)), vec![3, 160]));
        want.push((sum.clone(), vec![3, 160]));
        want.push((Op::RadixScatter(pass(shift)), vec![3, 5_000]));
    }
    assert_eq!(ops_of(&lowered.key), want);
    // The second pass counts and moves the first pass's order.
    let (first_order, counts) = (3, 4);
    assert_eq!(lowered.key.nodes[counts].inputs, vec![0, first_order]);
    assert_eq!(lowered.key.nodes[6].inputs, vec![0, first_order, counts, 5]);
    let short = graph_of(&[3, 2_000], |x| x.argsort(1, true));
    let whole = super::lower_for_gpu(&short.key, &Target::lavapipe());
    let sort = Op::Sort {
        axis: 1,
        descending: true,
        run: 0,
    };
    assert_eq!(ops_of(&whole.key), vec![(sort, vec![3, 2_000])]);
}

/// Which scatter-adds lower through a sort (`sort_scatters`): an index
/// broadcast along the other dims (`index_add`) over at least eight rows
/// does, into the index's stable sort, where each row's run starts (one
/// more than the rows), and the sum over runs; an index that varies
/// along every dim, a few rows, and anomaly mode keep the scan.
#[test]
fn scatter_adds_of_an_axis_only_index_lower_through_a_sort() {
    use crate::graph::op::Op;
    let dev = Device::cpu();
    let ids: Vec<i32> = (0..40).map(|t| t % 12).collect();
    let src = Tensor::from_vec(vec![0.5f32; 40 * 6], [40, 6], &dev).expect("src");
    let index_add = |rows: usize, checked: bool| {
        let base = Tensor::zeros([rows, 6], &dev);
        let ids = Tensor::from_vec(ids.clone(), [40], &dev).expect("ids");
        let out = base.index_add(0, &ids, &src);
        let mut key = crate::graph::Graph::collect(&[out.node()], true).key;
        key.checked = checked;
        key
    };
    let scans = |key: &crate::graph::GraphKey| {
        ops_of(&super::lower_for_gpu(key, &Target::lavapipe()).key)
            .iter()
            .any(|(op, _)| matches!(op, Op::ScatterAdd(_)))
    };
    let ops = ops_of(&super::lower_for_gpu(&index_add(12, false), &Target::lavapipe()).key);
    assert!(
        !ops.iter().any(|(op, _)| matches!(op, Op::ScatterAdd(_))),
        "{ops:?}"
    );
    assert!(ops.contains(&(Op::SortedStarts, vec![13])), "{ops:?}");
    assert!(
        ops.contains(&(Op::SortedScatterAdd(0), vec![12, 6])),
        "{ops:?}"
    );
    let sort = |op: &Op| {
        matches!(
            op,
            Op::Sort {
                axis: 0,
                run: 0,
                ..
            }
        )
    };
    assert!(
        ops.iter().any(|(op, s)| sort(op) && s == &vec![40]),
        "{ops:?}"
    );
    for key in [index_add(7, false), index_add(12, true)] {
        assert!(scans(&key));
    }
    let full: Vec<i32> = (0..40 * 6).map(|k| k % 12).collect();
    let full = Tensor::from_vec(full, [40, 6], &dev).expect("index");
    let out = Tensor::zeros([12, 6], &dev).scatter_add(0, &full, &src);
    let key = crate::graph::Graph::collect(&[out.node()], true).key;
    assert!(scans(&key));
}
