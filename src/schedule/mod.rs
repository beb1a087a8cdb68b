//! Scheduling: which nodes of a graph are written to memory, and how the
//! written nodes are grouped into kernels.
//!
//! Elementwise and movement ops are pure functions of an element index, so
//! any of them can be recomputed inside any kernel that needs it: a node is
//! written only when it must be (a graph output), and written nodes of the
//! same element count share one kernel (several outputs); everything else
//! is inlined as expressions and index arithmetic.
//!
//! Reductions, softmax and matmul are kernel roots: each gets a kernel of
//! its own, which inlines the elementwise work feeding it (its prologue)
//! and computes, at the same index, the written nodes that need nothing
//! but its result there (its epilogue: `mean = sum * (1/n)`, `relu(x @ w +
//! b)`). A root is itself written only if something else reads it.
//!
//! With fusion off every computing op is written by its own kernel
//! (movement ops stay index arithmetic: views never copy).

mod donation;
mod plan;
mod split;
mod written;

pub(crate) use donation::Donations;
pub(crate) use plan::{KernelPlan, Plan, plan};
#[cfg(test)]
pub(crate) use split::split_reductions;
pub(crate) use split::{Lowered, lower_for_gpu};

use crate::graph::op::Op;
use crate::graph::{GKind, GraphKey};
use crate::shape::numel;
use written::{Written, written_nodes};

/// What a kernel computes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KernelKind {
    /// Elementwise work writing `outputs`.
    Elementwise,
    /// A kernel root (reduction, softmax, matmul) and its epilogue outputs.
    Root {
        node: usize,
        /// Whether the root's own value is written.
        write_root: bool,
    },
}

/// One kernel: the graph nodes it writes, all with `numel` elements.
#[derive(Clone, Debug)]
pub(crate) struct KernelGroup {
    pub kind: KernelKind,
    pub numel: usize,
    /// Written nodes: for a root kernel, its epilogue outputs (the root,
    /// when written, is not listed here).
    pub outputs: Vec<usize>,
}

impl KernelGroup {
    /// The nodes it writes, in binding order: its root where it writes
    /// it, then its other outputs.
    pub fn writes(&self) -> impl Iterator<Item = usize> + '_ {
        let root = match self.kind {
            KernelKind::Root {
                node,
                write_root: true,
            } => Some(node),
            _ => None,
        };
        root.into_iter().chain(self.outputs.iter().copied())
    }
}

/// The kernels of a graph in execution order.
#[derive(Clone, Debug)]
pub(crate) struct Schedule {
    pub kernels: Vec<KernelGroup>,
}

/// Whether node `n` is a kernel root (a reduction, softmax, matmul...).
fn is_root(key: &GraphKey, n: usize) -> bool {
    op_of(key, n).is_some_and(Op::is_kernel_root)
}

fn op_of(key: &GraphKey, n: usize) -> Option<&Op> {
    match &key.nodes[n].kind {
        GKind::Op { op, .. } => Some(op),
        GKind::Input { .. } => None,
    }
}

/// Ops that read their inputs at their own element index.
pub(super) fn index_preserving(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast(_) | Op::Reshape
    )
}

/// Groups the written nodes of `key` into kernels.
///
/// `max_outputs` bounds the outputs per kernel so that bindings stay under
/// the adapter's storage-buffer limit.
pub(crate) fn schedule(key: &GraphKey, max_outputs: usize) -> Schedule {
    let Written {
        nodes: written,
        draws,
    } = written_nodes(key);
    let epilogue_of = if key.fused {
        epilogues(key, &written)
    } else {
        vec![None; key.nodes.len()]
    };
    let write_root = roots_read_elsewhere(key, &written, &epilogue_of);
    Schedule {
        kernels: group_kernels(
            key,
            (&written, &draws),
            &epilogue_of,
            &write_root,
            max_outputs,
        ),
    }
}

/// Epilogues: a written non-root node whose every path down to a root
/// keeps the element index joins that root's kernel (`Some(root)`).
fn epilogues(key: &GraphKey, written: &[bool]) -> Vec<Option<usize>> {
    let nodes = &key.nodes;
    let count = nodes.len();
    // Whether a node's value depends on any kernel root (then it cannot be
    // recomputed before that root's kernel).
    let mut under_root = vec![false; count];
    for i in 0..count {
        under_root[i] = nodes[i]
            .inputs
            .iter()
            .any(|&j| is_root(key, j) || under_root[j]);
    }
    let (reached, _) = roots_reached_at_same_index(key, &under_root, None);
    let (past_stored, latest_stored) = roots_reached_at_same_index(key, &under_root, Some(written));
    let mut epilogue_of: Vec<Option<usize>> = vec![None; count];
    for w in 0..count {
        if !written[w] || is_root(key, w) || !under_root[w] {
            continue;
        }
        // A value written by an earlier kernel (a forward activation that
        // a ReLU's gradient reads beside a matmul's) is loaded there.
        let root = match (reached[w], past_stored[w]) {
            (RootsReached::One(r), _) => Some(r),
            (_, RootsReached::One(r)) if latest_stored[w].is_none_or(|j| j < r) => Some(r),
            _ => None,
        };
        if let Some(r) = root {
            if takes_epilogues(key, r) && numel(&nodes[r].shape) == numel(&nodes[w].shape) {
                epilogue_of[w] = Some(r);
                log::debug!("node {w}: epilogue of kernel root {r}");
            }
        }
    }
    epilogue_of
}

/// Whether root `r`'s kernel can compute epilogues from its result: not
/// a reduction's first stage (its results are partial) nor a kernel that
/// works in its own output.
pub(super) fn takes_epilogues(key: &GraphKey, r: usize) -> bool {
    match op_of(key, r) {
        Some(Op::Reduce { parts, .. }) => *parts == 1,
        Some(op) => !op.works_in_its_output(),
        None => true,
    }
}

/// Per node: the nodes that read it, each once, in graph order.
pub(super) fn readers_of(key: &GraphKey) -> Vec<Vec<usize>> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); key.nodes.len()];
    for (n, node) in key.nodes.iter().enumerate() {
        for &i in &node.inputs {
            // All of `n`'s pushes happen here: a repeat is the last entry.
            if readers[i].last() != Some(&n) {
                readers[i].push(n);
            }
        }
    }
    readers
}

/// Per node: whether it is a kernel root whose value some consumer needs
/// other than from the register of its own kernel (see
/// `readers_outside_kernel`), or whose kernel works in its output
/// (`Op::works_in_its_output`), so that it must be written.
fn roots_read_elsewhere(
    key: &GraphKey,
    written: &[bool],
    epilogue_of: &[Option<usize>],
) -> Vec<bool> {
    let count = key.nodes.len();
    let consumers = readers_of(key);
    let readers = readers_outside_kernel(key, &consumers, written, epilogue_of);
    (0..count)
        .map(|r| {
            // A kernel that works in its own output always writes it.
            let works_in_output = op_of(key, r).is_some_and(Op::works_in_its_output);
            is_root(key, r)
                && (works_in_output
                    || consumers[r].iter().any(|&c| match readers[c] {
                        RootsReached::None => false,
                        RootsReached::One(e) => e != r,
                        RootsReached::Many => true,
                    }))
        })
        .collect()
}

/// The kernels, in graph order (the written random `draws` moved to
/// before their first reader, `visiting_order`): one per kernel root (with its epilogue nodes), and written elementwise
/// nodes joined into the latest kernel of the same element count that
/// they may follow (after every root they read), up to `max_outputs`
/// outputs a kernel.
fn group_kernels(
    key: &GraphKey,
    (written, draws): (&[bool], &[usize]),
    epilogue_of: &[Option<usize>],
    read_elsewhere: &[bool],
    max_outputs: usize,
) -> Vec<KernelGroup> {
    let nodes = &key.nodes;
    let count = nodes.len();
    let mut kernels: Vec<KernelGroup> = Vec::new();
    let mut root_kernel: Vec<Option<usize>> = vec![None; count];
    // The first kernel index a node may join: after every root it needs.
    let mut earliest = vec![0usize; count];
    for i in visiting_order(key, draws) {
        earliest[i] = nodes[i]
            .inputs
            .iter()
            .map(|&j| {
                root_kernel[j]
                    .map_or(earliest[j], |k| k + 1)
                    .max(earliest[j])
            })
            .max()
            .unwrap_or(0);
        if is_root(key, i) && numel(&nodes[i].shape) == 0 {
            // An empty result has nothing to compute, like an empty
            // elementwise group below (its epilogue is empty too, and the
            // runtime allocates empty outputs without a kernel).
            continue;
        }
        if is_root(key, i) {
            let write_root = written[i] || read_elsewhere[i];
            log::debug!(
                "node {i} ({}): kernel root, {}",
                op_of(key, i).map_or("?", Op::name),
                if write_root {
                    "written (read elsewhere or an output)"
                } else {
                    "kept in registers for its epilogue"
                }
            );
            root_kernel[i] = Some(kernels.len());
            kernels.push(KernelGroup {
                kind: KernelKind::Root {
                    node: i,
                    write_root,
                },
                numel: numel(&nodes[i].shape),
                outputs: Vec::new(),
            });
            continue;
        }
        if let Some(k) = epilogue_of[i].and_then(|r| root_kernel[r]) {
            kernels[k].outputs.push(i);
            continue;
        }
        let count_i = numel(&nodes[i].shape);
        if !written[i] || count_i == 0 {
            continue; // not written, or nothing to compute (allocated empty)
        }
        let joinable = if key.fused {
            (earliest[i]..kernels.len()).rev().find(|&k| {
                kernels[k].kind == KernelKind::Elementwise
                    && kernels[k].numel == count_i
                    && kernels[k].outputs.len() < max_outputs
            })
        } else {
            None
        };
        match joinable {
            Some(k) => kernels[k].outputs.push(i),
            None => kernels.push(KernelGroup {
                kind: KernelKind::Elementwise,
                numel: count_i,
                outputs: vec![i],
            }),
        }
    }
    kernels
}

/// The order `group_kernels` visits nodes in: graph order, each written
/// random draw (which reads no root) moved to just before the first
/// kernel that may read it, so that its readers load it and it is held
/// no longer than they need (a checkpointed block's mask is drawn with
/// its recomputation, not at the start of the step). That kernel is
/// placed at a reader's node, or at the last root the reader depends on
/// (whose epilogue may compute the reader), whichever is first.
fn visiting_order(key: &GraphKey, draws: &[usize]) -> Vec<usize> {
    let nodes = &key.nodes;
    let count = nodes.len();
    let mut is_draw = vec![false; count];
    for &d in draws {
        is_draw[d] = true;
    }
    // Per node: the last kernel root it depends on (one topological pass).
    let mut last_root: Vec<Option<usize>> = vec![None; count];
    let mut anchor: Vec<usize> = vec![usize::MAX; count];
    for i in 0..count {
        for &j in &nodes[i].inputs {
            let root = if is_root(key, j) {
                Some(j)
            } else {
                last_root[j]
            };
            last_root[i] = last_root[i].max(root);
        }
        for &j in &nodes[i].inputs {
            if is_draw[j] {
                anchor[j] = anchor[j].min(last_root[i].unwrap_or(i));
            }
        }
    }
    let mut before: Vec<Vec<usize>> = vec![Vec::new(); count];
    for &d in draws {
        // A draw nothing reads (an output read twice by outputs) stays.
        before[anchor[d].min(d)].push(d);
    }
    let mut order = Vec::with_capacity(count);
    for i in 0..count {
        order.extend_from_slice(&before[i]);
        if !is_draw[i] {
            order.push(i);
        }
    }
    order
}

/// Which kernel roots a node reaches, summarised so that combining two
/// summaries is constant time: every walk of the scheduler is one pass in
/// topological order (graphs reuse values, and a walk per node that
/// follows every path is exponential in the depth of the reuse).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RootsReached {
    /// No root.
    None,
    /// Exactly this root, and every path to it qualifies.
    One(usize),
    /// Two roots, or a path that does not qualify.
    Many,
}

impl RootsReached {
    fn join(self, other: RootsReached) -> RootsReached {
        match (self, other) {
            (RootsReached::None, x) | (x, RootsReached::None) => x,
            (RootsReached::One(a), RootsReached::One(b)) if a == b => RootsReached::One(a),
            _ => RootsReached::Many,
        }
    }
}

/// Per node: the one kernel root it reaches, if every path from it down to
/// a root keeps the element index (so the node at index i needs that root
/// at index i only, and can be computed in the root's kernel). Nodes
/// independent of roots are `None`; one pass in topological order.
///
/// With `stored` (the written nodes), a written node that is or depends
/// on a root is read from memory instead, as no root, and each node also
/// gets the latest such node it reads through inlined work: a root after
/// it in graph order runs after the kernel that writes it.
fn roots_reached_at_same_index(
    key: &GraphKey,
    under_root: &[bool],
    stored: Option<&[bool]>,
) -> (Vec<RootsReached>, Vec<Option<usize>>) {
    let nodes = &key.nodes;
    let mut reached = vec![RootsReached::None; nodes.len()];
    let mut latest_stored: Vec<Option<usize>> = vec![None; nodes.len()];
    for n in 0..nodes.len() {
        if !under_root[n] || is_root(key, n) {
            continue;
        }
        if !op_of(key, n).is_some_and(index_preserving) {
            reached[n] = RootsReached::Many;
            continue;
        }
        let mut acc = RootsReached::None;
        for &j in &nodes[n].inputs {
            let computed = is_root(key, j) || under_root[j];
            if computed && stored.is_some_and(|w| w[j]) {
                latest_stored[n] = latest_stored[n].max(Some(j));
                continue;
            }
            latest_stored[n] = latest_stored[n].max(latest_stored[j]);
            acc = acc.join(match op_of(key, j) {
                Some(op) if op.is_kernel_root() => RootsReached::One(j),
                _ if under_root[j] => reached[j],
                _ => RootsReached::None, // independent of roots: inlined as usual
            });
        }
        reached[n] = acc;
    }
    (reached, latest_stored)
}

/// Per node, read as a consumer of a kernel root's value: which roots'
/// kernels can compute everything that needs the value through it.
/// An epilogue node of root `r` is `One(r)` (computed in r's kernel from
/// its register); a written or index-changing node is `Many` (it needs the
/// root in memory); an inlined index-preserving node joins its consumers.
/// A root is written when a consumer is neither `None` nor `One(itself)`.
/// One pass in reverse topological order.
fn readers_outside_kernel(
    key: &GraphKey,
    consumers: &[Vec<usize>],
    written: &[bool],
    epilogue_of: &[Option<usize>],
) -> Vec<RootsReached> {
    let nodes = &key.nodes;
    let mut readers = vec![RootsReached::None; nodes.len()];
    for c in (0..nodes.len()).rev() {
        readers[c] = if let Some(r) = epilogue_of[c] {
            RootsReached::One(r)
        } else if written[c] || !op_of(key, c).is_some_and(index_preserving) {
            RootsReached::Many
        } else {
            consumers[c]
                .iter()
                .fold(RootsReached::None, |acc, &d| acc.join(readers[d]))
        };
    }
    readers
}

#[cfg(test)]
mod split_test;
/// Fusion decisions as pure functions of a graph: kernel counts and kinds
/// for the patterns the library promises, traced on the CPU device and
/// scheduled without any GPU.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;
    use crate::kernel::ReduceSplit;
    use crate::{Device, DeviceConfig, Tensor};

    fn cpu() -> Device {
        Device::cpu_with(DeviceConfig::default())
    }

    fn input(shape: &[usize], dev: &Device) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_vec(
            (0..n).map(|i| i as f32 * 0.01).collect::<Vec<_>>(),
            shape,
            dev,
        )
        .expect("input")
    }

    /// The kernels that compute `outputs`, fused.
    fn kernels_of(outputs: &[&Tensor]) -> Vec<KernelGroup> {
        let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
        let graph = Graph::collect(&nodes, true);
        schedule(&graph.key, 30).kernels
    }

    fn is_root(k: &KernelGroup) -> bool {
        matches!(k.kind, KernelKind::Root { .. })
    }

    #[test]
    fn an_elementwise_chain_is_one_kernel() {
        let dev = cpu();
        let x = input(&[1024], &dev);
        let y = ((&x * 2.0 + 1.0).tanh() - &x).sigmoid() * &x + 0.5;
        let k = kernels_of(&[&y]);
        assert_eq!(k.len(), 1, "{k:?}");
        assert_eq!(k[0].kind, KernelKind::Elementwise);
    }

    #[test]
    fn mean_squared_error_is_one_kernel() {
        let dev = cpu();
        let (x, y) = (input(&[64, 10], &dev), input(&[64, 10], &dev));
        let d = &x - &y;
        let loss = (&d * &d).mean_all();
        let k = kernels_of(&[&loss]);
        assert_eq!(k.len(), 1, "{k:?}");
        // The reduction writes only the scaled mean (its epilogue).
        assert!(
            matches!(
                k[0].kind,
                KernelKind::Root {
                    write_root: false,
                    ..
                }
            ),
            "{k:?}"
        );
        assert_eq!(k[0].outputs.len(), 1, "{k:?}");
    }

    #[test]
    fn a_linear_layer_with_relu_is_one_kernel() {
        let dev = cpu();
        let (x, w, b) = (
            input(&[64, 784], &dev),
            input(&[128, 784], &dev),
            input(&[128], &dev),
        );
        let y = (x.matmul(&w.t()) + &b).relu();
        let k = kernels_of(&[&y]);
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(is_root(&k[0]));
    }

    #[test]
    fn a_relu_gradient_is_the_epilogue_of_the_product_it_masks() {
        let dev = cpu();
        let (x, w1, w2, g) = (
            input(&[64, 784], &dev),
            input(&[784, 128], &dev),
            input(&[128, 10], &dev),
            input(&[64, 10], &dev),
        );
        // The hidden activation is written (the second product reads
        // it), by the first product's kernel.
        let h = x.matmul(&w1).relu();
        let y = h.matmul(&w2);
        // Its gradient: the output gradient through the second product,
        // masked where the activation is zero. The mask reads `h` from
        // memory inside the product's kernel: two products, no third
        // kernel.
        let gh = h.le(0.0f32).where_cond(0.0f32, g.matmul(&w2.t()));
        let k = kernels_of(&[&y, &gh]);
        assert_eq!(k.len(), 3, "{k:?}");
        assert!(k.iter().all(is_root), "{k:?}");
        // A value written after the product (here, by a kernel that reads
        // the product) cannot be read in its epilogue.
        let p = g.matmul(&w2.t());
        let later = p.softmax(1);
        let masked = (&p * &later).relu();
        let k = kernels_of(&[&masked, &later]);
        assert!(k.iter().any(|k| k.kind == KernelKind::Elementwise), "{k:?}");
    }

    #[test]
    fn softmax_is_one_kernel() {
        let dev = cpu();
        let y = input(&[32, 100], &dev).softmax(-1);
        let k = kernels_of(&[&y]);
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(is_root(&k[0]));
    }

    #[test]
    fn conv2d_with_bias_and_relu_is_one_kernel() {
        let dev = cpu();
        let (img, wt, bias) = (
            input(&[2, 3, 12, 12], &dev),
            input(&[8, 3, 3, 3], &dev),
            input(&[8], &dev),
        );
        let y = img.conv2d(&wt, Some(&bias), (1, 1), (1, 1), (1, 1)).relu();
        let k = kernels_of(&[&y]);
        assert_eq!(k.len(), 1, "{k:?}");
        assert!(is_root(&k[0]));
    }

    #[test]
    fn a_huge_sum_is_two_stages_on_the_gpu_and_one_in_the_trace() {
        let dev = cpu();
        let x = input(&[1 << 20], &dev);
        let graph = Graph::collect(&[x.sum_all().node()], true);
        // The traced graph (the cache key, the CPU reference): one stage.
        assert_eq!(schedule(&graph.key, 30).kernels.len(), 1);
        // Lowered for the GPU: partial sums, their sum, a reshape.
        let lowered = split_reductions(&graph.key, ReduceSplit::CPU);
        assert_eq!(lowered.key.nodes.len(), graph.key.nodes.len() + 2);
        assert_eq!(lowered.origin.len(), lowered.key.nodes.len());
        let k = schedule(&lowered.key, 30).kernels;
        assert_eq!(k.len(), 2, "{k:?}");
        assert!(k.iter().all(is_root));
        let partial = lowered
            .key
            .nodes
            .iter()
            .find(|n| matches!(n.kind, GKind::Op { op: Op::Reduce { parts, .. }, .. } if parts > 1))
            .expect("a partial reduction");
        assert_eq!(partial.shape, vec![1, 1 << 13], "8,192 parts of 128");
        let out = lowered.key.outputs[0];
        assert_eq!(lowered.key.nodes[out].shape, Vec::<usize>::new());
    }

    #[test]
    fn on_a_gpu_shorter_sums_split_and_long_ones_split_again() {
        use crate::schedule::split::lower_for_gpu;
        let dev = cpu();
        let mut gpu = crate::kernel::Target::lavapipe();
        gpu.loop_limit = None;
        gpu.reduce_split = ReduceSplit::GPU;
        let reductions = |key: &GraphKey| -> Vec<(usize, Vec<usize>)> {
            key.nodes
                .iter()
                .filter_map(|n| match &n.kind {
                    GKind::Op {
                        op: Op::Reduce { parts, .. },
                        ..
                    } => Some((*parts, n.shape.clone())),
                    _ => None,
                })
                .collect()
        };
        // 8,192 elements (a gradient's sum of squares): left whole on
        // lavapipe, 256 parts of 32 on a GPU.
        let small = Graph::collect(&[input(&[64, 128], &dev).sum_all().node()], true);
        assert_eq!(
            lower_for_gpu(&small.key, &crate::kernel::Target::lavapipe()).key,
            small.key
        );
        let stages = reductions(&lower_for_gpu(&small.key, &gpu).key);
        assert_eq!(stages, vec![(256, vec![1, 1, 256]), (1, vec![1, 1, 1])]);
        // 16M: 131,072 parts, whose sum splits again into 4,096 of 32,
        // then a last stage of 4,096 (four stages at most).
        let big = Graph::collect(&[input(&[1 << 24], &dev).sum_all().node()], true);
        let lowered = lower_for_gpu(&big.key, &gpu);
        let parts: Vec<usize> = reductions(&lowered.key).iter().map(|r| r.0).collect();
        assert_eq!(
            parts,
            vec![1 << 17, 1 << 12, 128, 1],
            "{:?}",
            reductions(&lowered.key)
        );
        assert_eq!(lowered.origin.len(), lowered.key.nodes.len());
        let out = lowered.key.outputs[0];
        assert_eq!(lowered.key.nodes[out].shape, Vec::<usize>::new());
    }

    #[test]
    fn a_scatter_add_is_written_once_for_all_its_readers() {
        let dev = cpu();
        let base = input(&[65, 8], &dev);
        let ids = Tensor::from_vec(
            (0..96i32).map(|i| i * 7 % 65).collect::<Vec<_>>(),
            [96],
            &dev,
        )
        .unwrap();
        let src = input(&[96, 8], &dev);
        let grad = base.index_add(0, &ids, &src) * 2.0;
        let norm = (&grad * &grad).sum_all();
        let graph = Graph::collect(&[grad.node(), norm.node()], true);
        let scatter = graph
            .key
            .nodes
            .iter()
            .position(|n| {
                matches!(
                    n.kind,
                    GKind::Op {
                        op: Op::ScatterAdd(_),
                        ..
                    }
                )
            })
            .expect("a scatter-add");
        let kernels = schedule(&graph.key, 30).kernels;
        let writers: Vec<_> = kernels
            .iter()
            .filter(|k| k.outputs.contains(&scatter))
            .collect();
        assert_eq!(writers.len(), 1, "{kernels:?}");
    }

    #[test]
    fn short_or_wide_reductions_stay_one_stage() {
        let dev = cpu();
        let long_rows = input(&[128, 1 << 16], &dev).sum([1], false);
        let short = input(&[1000], &dev).sum_all();
        let argmax = input(&[1 << 17], &dev).argmax(0, false);
        for t in [&long_rows, &short, &argmax] {
            let graph = Graph::collect(&[t.node()], true);
            let lowered = split_reductions(&graph.key, ReduceSplit::CPU);
            assert_eq!(lowered.key, graph.key, "{:?}", t.shape());
        }
    }

    #[test]
    fn empty_roots_and_their_epilogues_get_no_kernel() {
        let dev = cpu();
        let empty = input(&[0, 5], &dev);
        let soft = (empty.softmax(-1) * 2.0).exp();
        let rows = input(&[0, 7], &dev).matmul(&input(&[7, 4], &dev));
        assert!(kernels_of(&[&soft]).is_empty());
        assert!(kernels_of(&[&rows]).is_empty());
        // K = 0 is a sum of no terms: the front end writes zeros, and the
        // only kernel is the elementwise fill of the (non-empty) output.
        let prod = input(&[3, 0], &dev).matmul(&input(&[0, 4], &dev));
        let k = kernels_of(&[&prod]);
        assert_eq!(k.len(), 1, "{k:?}");
        assert_eq!(k[0].kind, KernelKind::Elementwise);
    }

    #[test]
    fn without_fusion_every_computing_op_is_a_kernel() {
        let dev = cpu();
        let x = input(&[256], &dev);
        let y = ((&x * 2.0).exp() + 1.0).t();
        let graph = Graph::collect(&[y.node()], false);
        // mul, exp, add: three kernels; the scalars and the view are none.
        assert_eq!(schedule(&graph.key, 30).kernels.len(), 3);
    }
}
