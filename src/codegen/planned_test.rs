//! The plan (`schedule::plan`) against the code generated from it, on
//! chosen graphs and on random programs: each kernel's planned reads are
//! the values its code loads (never fewer), its code binds no more than
//! the plan allowed (within the adapter's storage-binding limit where
//! the plan could divide it), and no kernel reads a value after an
//! output took its buffer.

use std::collections::BTreeSet;

use super::{CodegenContext, generate};
use crate::graph::{GKind, Graph, GraphKey};
use crate::kernel::{ReduceSplit, Target};
use crate::schedule::{plan, split_reductions};
use crate::{Device, DeviceConfig, Tensor};

fn input(shape: &[usize], seed: f32, dev: &Device) -> Tensor {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| ((i as f32 + seed) * 0.37).sin()).collect();
    Tensor::from_vec(data, shape, dev).expect("input")
}

/// Plans and generates the graph of `outputs` on `target`, checks every
/// kernel against its plan, and returns (kernels, kernels whose planned
/// reads are more than their code's, donations).
fn check(outputs: &[&Tensor], target: &Target, what: &str) -> (usize, usize, usize) {
    let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
    let graph = Graph::collect(&nodes, true);
    let key = &split_reductions(&graph.key, ReduceSplit::CPU).key;
    check_key(key, target, what)
}

/// `check` with the inputs a step could give up given up (as a training
/// step's old parameters are): each contiguous input alone on its
/// storage that no output is (the collector groups the views of one GPU
/// buffer, `GraphKey::buffer_group`; a CPU device's storage is grouped
/// here by hand).
fn check_donating(outputs: &[&Tensor], target: &Target, what: &str) -> (usize, usize, usize) {
    let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
    let graph = Graph::collect(&nodes, true);
    let mut key = split_reductions(&graph.key, ReduceSplit::CPU).key;
    let storage = |slot: usize| graph.inputs[slot].buffer.identity();
    let shared =
        |slot: usize| (0..key.donatable.len()).any(|s| s != slot && storage(s) == storage(slot));
    let mut giveable = vec![false; key.donatable.len()];
    for node in &key.nodes {
        if let GKind::Input { slot, layout } = &node.kind {
            giveable[*slot] =
                layout.offset == 0 && layout.is_row_major(&node.shape) && !shared(*slot);
        }
    }
    for &o in &key.outputs {
        if let GKind::Input { slot, .. } = key.nodes[o].kind {
            giveable[slot] = false;
        }
    }
    key.donatable = giveable;
    check_key(&key, target, what)
}

fn check_key(key: &GraphKey, target: &Target, what: &str) -> (usize, usize, usize) {
    let mut plan = plan(key, target);
    let sources = generate(key, &CodegenContext::plain(target), &mut plan);
    assert_eq!(sources.len(), plan.kernels.len(), "{what}");
    let mut wider = 0;
    for (k, (kernel, source)) in plan.kernels.iter().zip(&sources).enumerate() {
        let planned: BTreeSet<usize> = kernel.reads.iter().copied().collect();
        // A value an output writes over is read through that output's
        // binding.
        let aliased = kernel.aliases.iter().map(|&(x, _)| x);
        let loaded: BTreeSet<usize> = source.all_reads().chain(aliased).collect();
        assert!(
            loaded.is_subset(&planned),
            "{what}, kernel {k}: its code loads {loaded:?}, planned {planned:?}"
        );
        wider += usize::from(loaded != planned);
        assert_eq!(
            source.writes,
            kernel.group.writes().collect::<Vec<_>>(),
            "{what}, kernel {k}: writes"
        );
        let allowed = plan.bindings_bound(key, k, target);
        for dispatch in source.dispatches() {
            // As the runtime counts them: every binding but textures.
            let bound = dispatch.buffer_bindings();
            assert!(
                bound <= allowed,
                "{what}, kernel {k}: {bound} storage bindings, planned at most {allowed}"
            );
            assert!(
                bound <= target.max_storage_buffers,
                "{what}, kernel {k}: {bound} storage bindings, limit {}",
                target.max_storage_buffers
            );
        }
        for &(x, _) in &kernel.aliases {
            assert!(
                plan.kernels[k + 1..]
                    .iter()
                    .all(|later| !later.reads.contains(&x)),
                "{what}: kernel {k} takes n{x}'s buffer, which a later kernel reads"
            );
        }
    }
    let donations = plan.donations(key);
    (
        sources.len(),
        wider,
        donations.inputs.len() + donations.intermediates.len(),
    )
}

/// A step of a two-layer MLP: forward, backward, SGD updates.
fn mlp_step(dev: &Device) -> Vec<Tensor> {
    let x = input(&[16, 24], 1.0, dev);
    let w1 = input(&[24, 32], 2.0, dev);
    let w2 = input(&[32, 8], 3.0, dev);
    w1.requires_grad_(true);
    w2.requires_grad_(true);
    let loss = x.matmul(&w1).relu().matmul(&w2).log_softmax(-1).mean_all();
    loss.backward();
    let step = |w: &Tensor| w.detach() - w.grad().expect("grad") * 0.1;
    vec![loss, step(&w1), step(&w2)]
}

#[test]
fn planned_reads_cover_every_load_and_kernels_fit_their_bindings() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let x = input(&[64, 128], 0.0, &dev);
    let many: Vec<Tensor> = (0..40).map(|i| input(&[8, 8], i as f32, &dev)).collect();
    let sum_of_many = many.iter().skip(1).fold(many[0].clone(), |acc, t| acc + t);
    let sum_of_sums = (many.iter())
        .map(|t| t.sum([1], false))
        .reduce(|acc, s| acc + s)
        .expect("sums");
    let outputs_of_many: Vec<Tensor> = many.iter().map(|t| (t * 2.0).exp()).collect();
    let step = mlp_step(&dev);
    let softmax_t = x.t().softmax(-1);
    // A softmax reading its input again in its epilogue (by elements,
    // where its rows are read as vec4s): two bindings of one value.
    let softmax_times_x = x.softmax(-1) * &x;
    // Views of stored values made contiguous: outputs that are graph
    // inputs, read by the kernel that writes them.
    let views: Vec<Tensor> = many.iter().map(|t| t.t()).collect();
    // A computed matrix times a batch of matrices: A is broadcast over
    // the batch (an expand), its computed matrix written, the lane kernel
    // packing it once for the batch.
    let b = input(&[4, 128, 32], 5.0, &dev);
    let batched = (&x * 2.0).matmul(&b);
    // Roots whose epilogues read 40 stored values: a row sum, a softmax
    // and a matmul, each plus 40 values of its output's rows or columns.
    let rows: Vec<Tensor> = (0..40).map(|i| input(&[64], i as f32, &dev)).collect();
    let plus_rows = |root: Tensor, shape: &[usize]| {
        (rows.iter()).fold(root, |acc, r| acc + r.reshape(shape.to_vec()))
    };
    let sum_plus = plus_rows(x.sum([1], false), &[64]);
    let softmax_plus = plus_rows(x.softmax(-1), &[64, 1]);
    let w = input(&[128, 64], 6.0, &dev);
    let matmul_plus = plus_rows(x.matmul(&w), &[1, 64]);
    let cases: Vec<(Vec<&Tensor>, &str)> = vec![
        (step.iter().collect(), "MLP step"),
        (vec![&sum_of_many], "a sum of 40 inputs"),
        (vec![&sum_of_sums], "a sum of 40 row sums"),
        (outputs_of_many.iter().collect(), "40 outputs of one size"),
        (vec![&softmax_t], "softmax of a transposed view"),
        (vec![&softmax_times_x], "softmax times its input"),
        (views.iter().collect(), "40 views made contiguous"),
        (vec![&batched], "batched matmul of an expand"),
        (vec![&sum_plus], "a row sum plus 40 values"),
        (vec![&softmax_plus], "a softmax plus 40 columns"),
        (vec![&matmul_plus], "a matmul plus 40 rows"),
    ];
    let lavapipe = Target::lavapipe();
    let eight = Target {
        max_storage_buffers: 8,
        ..Target::lavapipe()
    };
    let mut widened = 0;
    for (outputs, what) in &cases {
        let (kernels, wider, _) = check(outputs, &lavapipe, what);
        assert!(kernels > 0, "{what}");
        widened += wider;
        let (divided, _, _) = check(outputs, &eight, &format!("{what}, 8 bindings"));
        assert!(
            divided >= kernels,
            "{what}: {divided} kernels at 8 bindings"
        );
    }
    // The walk on the graph is the code's own loads in these graphs.
    assert_eq!(widened, 0, "planned reads wider than the code's loads");
    let (at_32, _, _) = check(&[&sum_of_many], &lavapipe, "a sum of 40 inputs");
    let (at_8, _, _) = check(&[&sum_of_many], &eight, "a sum of 40 inputs");
    assert!(at_8 > at_32, "{at_8} kernels at 8 bindings, {at_32} at 32");
}

/// Bindings of 1 KiB: ten reads of 2 KiB take twenty, which the plan
/// counts (one binding each would fit 32).
#[test]
fn reads_in_binding_parts_count_each_part() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let lavapipe = Target::lavapipe();
    let parts = Target {
        max_storage_buffers: 16,
        binding_part_bytes: 1024,
        ..Target::lavapipe()
    };
    let ten: Vec<Tensor> = (0..10).map(|i| input(&[16, 32], i as f32, &dev)).collect();
    let sum_of_ten = ten.iter().skip(1).fold(ten[0].clone(), |acc, t| acc + t);
    let (whole, _, _) = check(&[&sum_of_ten], &lavapipe, "a sum of 10 inputs");
    let (in_parts, _, _) = check(&[&sum_of_ten], &parts, "a sum of 10 inputs in parts");
    assert_eq!(whole, 1);
    assert!(in_parts > 1, "{in_parts} kernels");
}

#[test]
fn an_update_in_place_writes_into_its_donated_input() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let w = input(&[32, 32], 0.0, &dev);
    let g = input(&[32, 32], 1.0, &dev);
    let updated = &w - &g * 0.1;
    let nodes = [updated.node()];
    let mut graph = Graph::collect(&nodes, true);
    // Both inputs may be given up (as a step's old parameters are).
    graph.key.donatable = vec![true; graph.key.donatable.len()];
    let target = Target::lavapipe();
    let mut plan = plan(&graph.key, &target);
    let inputs: Vec<usize> = (graph.key.nodes.iter().enumerate())
        .filter(|(_, n)| matches!(n.kind, GKind::Input { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(plan.kernels.len(), 1);
    let donations = plan.donations(&graph.key);
    assert_eq!(donations.inputs.len(), 1, "{donations:?}");
    let (output, taken) = donations.inputs[0];
    assert_eq!(output, graph.key.outputs[0]);
    assert!(inputs.contains(&taken));
    assert_eq!(plan.kernels[0].aliases, vec![(taken, 0)]);
    // The code reads the donated input through the output's binding.
    let sources = generate(&graph.key, &CodegenContext::plain(&target), &mut plan);
    assert!(!sources[0].reads.contains(&taken), "{:?}", sources[0].reads);
    // A transposed read of the input is not at its own element: no alias.
    let transposed = &w.t() - &g * 0.1;
    let nodes = [transposed.node()];
    let mut graph = Graph::collect(&nodes, true);
    graph.key.donatable = vec![true; graph.key.donatable.len()];
    let plan = crate::schedule::plan(&graph.key, &target);
    let w_node = (graph.key.nodes.iter())
        .position(
            |n| matches!(&n.kind, GKind::Input { layout, .. } if !layout.is_row_major(&n.shape)),
        )
        .expect("the transposed input");
    assert!(
        !plan
            .donations(&graph.key)
            .inputs
            .iter()
            .any(|&(_, x)| x == w_node),
        "{:?}",
        plan.donations(&graph.key)
    );
}

/// One op of a random program over 8 x 8 values: which earlier values it
/// reads (indices taken modulo the values made so far).
#[derive(Clone, Copy, Debug)]
enum RandomOp {
    Exp(usize),
    Add(usize, usize),
    Mul(usize, usize),
    Transpose(usize),
    RowSum(usize),
    Softmax(usize),
    Matmul(usize, usize),
    Flip(usize),
}

fn random_op() -> impl proptest::strategy::Strategy<Value = RandomOp> {
    use proptest::prelude::*;
    let i = 0usize..64;
    prop_oneof![
        i.clone().prop_map(RandomOp::Exp),
        (i.clone(), i.clone()).prop_map(|(a, b)| RandomOp::Add(a, b)),
        (i.clone(), i.clone()).prop_map(|(a, b)| RandomOp::Mul(a, b)),
        i.clone().prop_map(RandomOp::Transpose),
        i.clone().prop_map(RandomOp::RowSum),
        i.clone().prop_map(RandomOp::Softmax),
        (i.clone(), i.clone()).prop_map(|(a, b)| RandomOp::Matmul(a, b)),
        i.prop_map(RandomOp::Flip),
    ]
}

/// The values of a random program: `inputs` stored values, then one per op.
fn run_random(ops: &[RandomOp], inputs: usize, dev: &Device) -> Vec<Tensor> {
    let mut values: Vec<Tensor> = (0..inputs).map(|i| input(&[8, 8], i as f32, dev)).collect();
    for op in ops {
        let at = |i: usize| values[i % values.len()].clone();
        let next = match *op {
            RandomOp::Exp(a) => (at(a) * 0.1).exp(),
            RandomOp::Add(a, b) => at(a) + at(b),
            RandomOp::Mul(a, b) => at(a) * at(b),
            RandomOp::Transpose(a) => at(a).t(),
            RandomOp::RowSum(a) => at(a).sum([1], true) + at(a),
            RandomOp::Softmax(a) => at(a).softmax(-1),
            RandomOp::Matmul(a, b) => at(a).matmul(&at(b)),
            RandomOp::Flip(a) => at(a).flip([0]),
        };
        values.push(next);
    }
    values
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Random programs (views, reductions, softmax, matmuls, reused
    /// values), a random set of their values read, the inputs a step
    /// could give up given up, planned at 32 bindings and at 6: each
    /// kernel's code loads no value its plan does not list and binds no
    /// more than its plan allows, and no kernel reads a value after
    /// another's output took its buffer.
    #[test]
    fn random_programs_keep_to_their_plans(
        ops in proptest::collection::vec(random_op(), 1..24),
        picks in proptest::collection::vec(0usize..64, 1..6),
        inputs in 1usize..4,
    ) {
        let dev = Device::cpu_with(DeviceConfig::default());
        let values = run_random(&ops, inputs, &dev);
        let outputs: Vec<&Tensor> = picks.iter().map(|&p| &values[p % values.len()]).collect();
        let six = Target {
            max_storage_buffers: 6,
            ..Target::lavapipe()
        };
        for target in [Target::lavapipe(), six] {
            check_donating(&outputs, &target, "random program");
        }
    }
}
