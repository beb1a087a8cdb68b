//! Turning the live nodes of a step into a `Graph`: a topologically ordered,
//! index-addressed copy of the structure (the cache key) plus the runtime
//! values that feed it (stored inputs and scalar parameters).

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};

use rustc_hash::{FxHashMap, FxHasher};
use std::panic::Location;
use std::sync::Arc;

use super::node::{Node, NodeState};
use super::op::Op;
use crate::dtype::DType;
use crate::runtime::storage::{DataBuffer, Storage};
use crate::shape::Layout;

/// One node of a collected graph. Inputs are indices of earlier nodes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GNode {
    pub kind: GKind,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub inputs: Vec<usize>,
}

impl GNode {
    /// Whether `other` (the same position of another graph) is this node
    /// but for its sizes: both inputs, or the same op, of one dtype and
    /// rank, on the same inputs.
    pub fn same_but_sizes(&self, other: &GNode) -> bool {
        let same_kind = match (&self.kind, &other.kind) {
            (GKind::Input { .. }, GKind::Input { .. }) => true,
            (GKind::Op { op: a, .. }, GKind::Op { op: b, .. }) => {
                std::mem::discriminant(a) == std::mem::discriminant(b)
            }
            _ => false,
        };
        same_kind
            && self.dtype == other.dtype
            && self.inputs == other.inputs
            && self.shape.len() == other.shape.len()
    }

    /// Whether `other` is this node but for its numbers (see
    /// `GraphKey::same_but_numbers`).
    fn same_but_numbers(&self, other: &GNode) -> bool {
        let rank = |a: &Layout, b: &Layout| a.strides.len() == b.strides.len();
        let same_kind = match (&self.kind, &other.kind) {
            (
                GKind::Input {
                    slot: a,
                    layout: la,
                },
                GKind::Input {
                    slot: b,
                    layout: lb,
                },
            ) => a == b && rank(la, lb),
            (
                GKind::Op {
                    op: a,
                    param_base: pa,
                },
                GKind::Op {
                    op: b,
                    param_base: pb,
                },
            ) => {
                pa == pb
                    && match (a, b) {
                        (Op::AsStrided(la), Op::AsStrided(lb))
                        | (Op::StridedScatter(la), Op::StridedScatter(lb)) => rank(la, lb),
                        (Op::Pad(pa), Op::Pad(pb)) => pa.len() == pb.len(),
                        _ => a == b,
                    }
            }
            _ => false,
        };
        same_kind
            && self.dtype == other.dtype
            && self.inputs == other.inputs
            && self.shape.len() == other.shape.len()
    }

    /// Elements of the node's buffer that kernels may touch: an input's
    /// furthest element under its layout (a strided view reaches past
    /// its own few elements), else its element count.
    pub fn extent(&self) -> usize {
        let count = crate::shape::numel(&self.shape);
        match &self.kind {
            GKind::Input { layout, .. } if count > 0 => {
                1 + layout.offset
                    + (self.shape.iter().zip(&layout.strides))
                        .map(|(&d, &s)| (d - 1) * s)
                        .sum::<usize>()
            }
            _ => count,
        }
    }

    /// The layout the node carries: an input's, or a strided view's or
    /// window scatter's (the window's place in its base).
    pub fn layout(&self) -> Option<&Layout> {
        match &self.kind {
            GKind::Input { layout, .. } => Some(layout),
            GKind::Op {
                op: Op::AsStrided(layout) | Op::StridedScatter(layout),
                ..
            } => Some(layout),
            GKind::Op { .. } => None,
        }
    }
}

/// Stored data read by the graph, or an op computed in it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum GKind {
    /// Stored data bound at run time as input `slot`, read through `layout`.
    Input { slot: usize, layout: Layout },
    /// An op; its runtime values (if any) start at parameter `param_base`.
    Op { op: Op, param_base: usize },
}

/// The structure of a graph: everything that decides the generated code,
/// nothing that changes from one step to the next (data, scalar values).
/// Two graphs with equal keys run the same kernels.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GraphKey {
    pub nodes: Vec<GNode>,
    pub outputs: Vec<usize>,
    /// Whether fusion was on when it was scheduled.
    pub fused: bool,
    /// Anomaly mode: kernels also report NaN or infinity produced from
    /// finite values, and indices out of range.
    pub checked: bool,
    /// Per input slot: whether its buffer may be taken over by an output
    /// (nothing outside this graph can read the old value again).
    pub donatable: Vec<bool>,
    /// Per input slot: the first slot whose storage shares its buffer
    /// (a parameter and the transposed view its matmul reads), where
    /// nothing outside the graph can read that buffer again; its own slot
    /// otherwise. An output may take over a donatable input's buffer only
    /// once every input of its group has been read.
    pub buffer_group: Vec<usize>,
}

impl GraphKey {
    /// The 64-bit structural hash used to find a cache entry; equality of
    /// the whole key is checked on a hit, so collisions cannot run the wrong
    /// kernels.
    pub fn structural_hash(&self) -> u64 {
        // FxHash: a hit is confirmed by comparing whole keys, so speed
        // matters more than resistance to crafted collisions (SipHash was
        // a tenth of a 1,000-op step's host time).
        let mut h = FxHasher::default();
        self.hash(&mut h);
        h.finish()
    }

    /// Per node: whether it is one of the graph's outputs.
    pub fn output_mask(&self) -> Vec<bool> {
        let mut is_output = vec![false; self.nodes.len()];
        for &o in &self.outputs {
            is_output[o] = true;
        }
        is_output
    }
}

impl GraphKey {
    /// A hash of the graph's structure without its sizes: equal for one
    /// trace at any sizes (shapes, layouts and op parameters left out;
    /// ranks, dtypes, edges and the kind of each op kept). It only picks
    /// which of a trace site's records a new graph is compared with, so a
    /// collision costs a kernel compiled concrete, never a wrong value.
    pub fn size_free_hash(&self) -> u64 {
        let mut h = FxHasher::default();
        (
            self.fused,
            self.checked,
            &self.outputs,
            &self.donatable,
            &self.buffer_group,
        )
            .hash(&mut h);
        for n in &self.nodes {
            (n.dtype, &n.inputs, n.shape.len()).hash(&mut h);
            match &n.kind {
                GKind::Input { layout, .. } => (0u8, layout.strides.len()).hash(&mut h),
                GKind::Op { op, .. } => (1u8, std::mem::discriminant(op)).hash(&mut h),
            }
        }
        h.finish()
    }

    /// Whether `other` is this graph but for its numbers: as many nodes,
    /// each the same op of the same inputs, dtype and rank (the nodes of
    /// one correspond to the other's by index), and the same outputs.
    pub fn same_structure(&self, other: &GraphKey) -> bool {
        self.nodes.len() == other.nodes.len()
            && self.outputs == other.outputs
            && (self.nodes.iter().zip(&other.nodes)).all(|(a, b)| a.same_but_sizes(b))
    }

    /// Whether `other` is this graph but for its numbers (`Leaf`s: each
    /// node's dimensions, an input's or a strided view's strides and
    /// offset, a padding's widths): every op's other parameters (axes,
    /// a sort's runs, a top-k's `k`, a split's parts), every input's
    /// slot and the graph's flags equal. Then its kernels, lowered,
    /// differ from this graph's only where a guard or a number says so:
    /// what a new size that binds a site's kernels unlowered requires.
    pub fn same_but_numbers(&self, other: &GraphKey) -> bool {
        self.nodes.len() == other.nodes.len()
            && self.outputs == other.outputs
            && (self.fused, self.checked) == (other.fused, other.checked)
            && self.donatable == other.donatable
            && self.buffer_group == other.buffer_group
            && (self.nodes.iter().zip(&other.nodes)).all(|(a, b)| a.same_but_numbers(b))
    }
}

/// Nodes of the last collected graph (a capacity hint for the next).
static LAST_GRAPH_NODES: AtomicUsize = AtomicUsize::new(0);

/// A collected graph ready to run.
pub(crate) struct Graph {
    pub key: GraphKey,
    pub hash: u64,
    /// Stored data per input slot.
    pub inputs: Vec<Storage>,
    /// Runtime parameter values (32-bit patterns).
    pub params: Vec<u32>,
    /// The nodes to be written, in the order of `key.outputs`.
    pub output_nodes: Vec<Arc<Node>>,
    /// Source location of each graph node.
    pub locations: Vec<&'static Location<'static>>,
    /// The op the user called, for nodes a composite op recorded
    /// (`Node::user_op`).
    pub user_ops: Vec<Option<&'static str>>,
    /// Sizes the user marked as changing between steps
    /// (`Tensor::mark_dynamic`) on the graph's nodes, largest first, each
    /// once: a first compile makes its kernels generic over them.
    pub dynamic_sizes: Vec<usize>,
}

impl Graph {
    /// The same graph reading other stored data (verification runs a GPU
    /// graph's structure on host copies of its inputs).
    pub fn with_inputs(&self, inputs: Vec<Storage>) -> Graph {
        Graph {
            key: self.key.clone(),
            hash: self.hash,
            inputs,
            params: self.params.clone(),
            output_nodes: Vec::new(),
            locations: self.locations.clone(),
            user_ops: self.user_ops.clone(),
            dynamic_sizes: self.dynamic_sizes.clone(),
        }
    }

    /// The same graph with another structure `key` whose node `i` computes
    /// (part of) this graph's node `origin[i]` (a lowering of it), reading
    /// the same inputs and parameters. It keeps this graph's hash, which
    /// names it in logs, errors and dumps.
    pub fn lowered(&self, key: GraphKey, origin: &[usize]) -> Graph {
        Graph {
            hash: self.hash,
            key,
            inputs: self.inputs.clone(),
            params: self.params.clone(),
            output_nodes: Vec::new(),
            locations: origin.iter().map(|&o| self.locations[o]).collect(),
            user_ops: origin.iter().map(|&o| self.user_ops[o]).collect(),
            dynamic_sizes: self.dynamic_sizes.clone(),
        }
    }

    /// The name of the op node `i` computes, as the user called it: a
    /// composite op's name for the nodes it recorded, else the op's own.
    pub fn op_label(&self, i: usize) -> &'static str {
        self.user_ops[i].unwrap_or(match &self.key.nodes[i].kind {
            GKind::Input { .. } => "input",
            GKind::Op { op, .. } => op.name(),
        })
    }

    /// Collects the graph that computes `outputs`, unchecked.
    pub fn collect(outputs: &[Arc<Node>], fused: bool) -> Graph {
        Graph::collect_with(outputs, fused, false)
    }

    /// Collects the graph that computes `outputs`. Pending nodes become ops;
    /// stored nodes become inputs. Duplicate outputs are kept once.
    /// `checked`: anomaly mode (see `GraphKey::checked`).
    pub fn collect_with(outputs: &[Arc<Node>], fused: bool, checked: bool) -> Graph {
        let mut c = Collector::sized_like_last_graph();
        let mut output_nodes: Vec<Arc<Node>> = Vec::new();
        let mut output_indices = Vec::new();
        for out in outputs {
            if output_nodes.iter().any(|n| n.id == out.id) {
                continue;
            }
            output_indices.push(c.walk(out));
            output_nodes.push(out.clone());
        }
        let output_indices = c.reorder_by_creation(output_indices);
        // A checked run that fails must leave its inputs as they were, to
        // be read again: nothing is donated in anomaly mode.
        let (donatable, buffer_group) = if checked {
            (vec![false; c.inputs.len()], (0..c.inputs.len()).collect())
        } else {
            donatable_inputs(
                &c.nodes,
                &output_indices,
                &c.inputs,
                &c.handles,
                &c.internal_refs,
            )
        };
        LAST_GRAPH_NODES.store(c.nodes.len(), Ordering::Relaxed);
        let mut dynamic_sizes: Vec<usize> =
            c.handles.iter().flat_map(|n| n.dynamic_sizes()).collect();
        dynamic_sizes.sort_unstable_by(|a, b| b.cmp(a));
        dynamic_sizes.dedup();
        let key = GraphKey {
            nodes: c.nodes,
            outputs: output_indices,
            fused,
            checked,
            donatable,
            buffer_group,
        };
        let hash = key.structural_hash();
        Graph {
            key,
            hash,
            inputs: c.inputs,
            params: c.params,
            output_nodes,
            locations: c.locations,
            user_ops: c.user_ops,
            dynamic_sizes,
        }
    }
}

/// The graph being collected: nodes by graph index, and what each needs.
struct Collector {
    /// Graph index of each node collected, by node id (ids are counters:
    /// FxHash of them is a multiply).
    index_of: FxHashMap<u64, usize>,
    nodes: Vec<GNode>,
    locations: Vec<&'static std::panic::Location<'static>>,
    user_ops: Vec<Option<&'static str>>,
    inputs: Vec<Storage>,
    params: Vec<u32>,
    /// For donation: a handle on every collected node (by graph index)
    /// and how many references to each the graph's own pending nodes
    /// hold, so that references from anywhere else can be counted.
    handles: Vec<Arc<Node>>,
    internal_refs: Vec<usize>,
}

impl Collector {
    /// Sized like the last graph: a training loop collects the same graph
    /// every step, and growing these was a tenth of collecting.
    fn sized_like_last_graph() -> Collector {
        let hint = LAST_GRAPH_NODES.load(Ordering::Relaxed);
        Collector {
            index_of: FxHashMap::with_capacity_and_hasher(hint, Default::default()),
            nodes: Vec::with_capacity(hint),
            locations: Vec::with_capacity(hint),
            user_ops: Vec::with_capacity(hint),
            inputs: Vec::new(),
            params: Vec::new(),
            handles: Vec::with_capacity(hint),
            internal_refs: Vec::with_capacity(hint),
        }
    }

    /// Collects `out` and every pending node it reads that is not
    /// collected yet (an iterative post-order walk: chains of thousands of
    /// ops must not overflow the stack); returns `out`'s graph index.
    fn walk(&mut self, out: &Arc<Node>) -> usize {
        let mut stack: Vec<(Arc<Node>, bool)> = vec![(out.clone(), false)];
        while let Some((node, expanded)) = stack.pop() {
            if self.index_of.contains_key(&node.id) {
                continue;
            }
            let state = node.state();
            match &*state {
                NodeState::Ready(storage) => {
                    let slot = self.inputs.len();
                    self.inputs.push(storage.clone());
                    let kind = GKind::Input {
                        slot,
                        layout: storage.layout.clone(),
                    };
                    drop(state);
                    self.push(node, kind, Vec::new());
                }
                NodeState::Pending(p) if !expanded => {
                    stack.push((node.clone(), true));
                    for c in p.inputs.iter().rev() {
                        if !self.index_of.contains_key(&c.id) {
                            stack.push((c.clone(), false));
                        }
                    }
                }
                NodeState::Pending(p) => {
                    let param_base = self.params.len();
                    self.params.extend_from_slice(&p.params);
                    let inputs: Vec<usize> =
                        p.inputs.iter().map(|c| self.index_of[&c.id]).collect();
                    for &c in &inputs {
                        self.internal_refs[c] += 1;
                    }
                    let op = p.op.clone();
                    drop(state);
                    self.push(node, GKind::Op { op, param_base }, inputs);
                }
            }
        }
        self.index_of[&out.id]
    }

    /// Reorders the collected nodes into the order they were created in
    /// (node ids count up, and a node is made after its inputs, so this
    /// is a topological order), renumbering inputs and `outputs`.
    ///
    /// Kernels run in graph order, and the walk's post-order would put a
    /// value wherever its first reader reached it: the forward that
    /// activation checkpointing recomputes inside backward went before
    /// all of backward (every block's recomputed activations live at
    /// once, a larger peak than without checkpointing). In creation
    /// order each block's recomputation comes right before its gradient.
    /// Called once, after every output was walked.
    fn reorder_by_creation(&mut self, outputs: Vec<usize>) -> Vec<usize> {
        let n = self.nodes.len();
        if self.handles.windows(2).all(|w| w[0].id < w[1].id) {
            return outputs; // a chain, or a walk that met nodes in order
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by_key(|&i| self.handles[i].id);
        let mut new_index = vec![0usize; n];
        for (k, &i) in order.iter().enumerate() {
            new_index[i] = k;
        }
        let mut nodes = permuted(std::mem::take(&mut self.nodes), &order);
        for node in &mut nodes {
            for input in &mut node.inputs {
                *input = new_index[*input];
            }
        }
        self.nodes = nodes;
        self.locations = permuted(std::mem::take(&mut self.locations), &order);
        self.user_ops = permuted(std::mem::take(&mut self.user_ops), &order);
        self.handles = permuted(std::mem::take(&mut self.handles), &order);
        self.internal_refs = permuted(std::mem::take(&mut self.internal_refs), &order);
        // `index_of` is left in walk order: nothing is walked after this.
        self.index_of.clear();
        outputs.into_iter().map(|o| new_index[o]).collect()
    }

    /// Appends `node` as the next graph node.
    fn push(&mut self, node: Arc<Node>, kind: GKind, inputs: Vec<usize>) {
        self.index_of.insert(node.id, self.nodes.len());
        self.nodes.push(GNode {
            kind,
            shape: node.shape.clone(),
            // I64 and U8 are I32 and U32 below the front end.
            dtype: node.dtype.storage(),
            inputs,
        });
        self.locations.push(node.location);
        self.user_ops.push(node.user_op);
        self.handles.push(node);
        self.internal_refs.push(0);
    }
}

/// `v`'s elements in `order` (a permutation of its indices).
fn permuted<T>(v: Vec<T>, order: &[usize]) -> Vec<T> {
    let mut old: Vec<Option<T>> = v.into_iter().map(Some).collect();
    order
        .iter()
        .map(|&i| old[i].take().expect("a permutation takes each once"))
        .collect()
}

/// Per input slot: its graph node, and whether nothing outside the graph
/// can read it after the run (see `donatable_inputs`).
fn unread_after_the_run(
    nodes: &[GNode],
    outputs: &[usize],
    slots: usize,
    handles: &[Arc<Node>],
    internal_refs: &[usize],
) -> (Vec<usize>, Vec<bool>) {
    let mut is_output = vec![false; nodes.len()];
    for &o in outputs {
        is_output[o] = true;
    }
    // References from outside the graph: all but `handles`' own and those
    // from the graph's pending nodes.
    let external = |i: usize| Arc::strong_count(&handles[i]) - 1 - internal_refs[i];
    let mut read_later = vec![false; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let pending = matches!(nodes[i].kind, GKind::Op { .. });
        if pending && !is_output[i] && (read_later[i] || external(i) > 0) {
            for &c in &nodes[i].inputs {
                read_later[c] = true;
            }
        }
    }
    let mut node_of = vec![usize::MAX; slots];
    let mut free = vec![false; slots];
    for (i, node) in nodes.iter().enumerate() {
        if let GKind::Input { slot, .. } = node.kind {
            node_of[slot] = i;
            free[slot] = external(i) == 0 && !read_later[i] && !is_output[i];
        }
    }
    (node_of, free)
}

/// Per input slot: whether an output may be written into its buffer.
///
/// Running the graph makes its outputs `Ready` (they drop their inputs),
/// but a pending node that is not an output stays pending and may be
/// computed later from the same inputs: `y = x * 3; drop(x); z = y + 1`,
/// then reading `z` leaves `y` pending on `x`'s buffer. So an input's
/// buffer is donated only when no value that outlives this run can read
/// it: nothing outside the graph holds the input node, no pending node
/// that outlives the run reads it (directly or through other pending
/// nodes), and no other node (a view) shares its buffer.
///
/// A pending node outlives the run when it is not an output and something
/// outside the graph holds it (a tensor handle, a pending node of another
/// graph, an autograd record) or a node that outlives the run reads it.
/// One pass from the outputs back to the inputs decides this for all.
fn donatable_inputs(
    nodes: &[GNode],
    outputs: &[usize],
    inputs: &[Storage],
    handles: &[Arc<Node>],
    internal_refs: &[usize],
) -> (Vec<bool>, Vec<usize>) {
    let (node_of, free) =
        unread_after_the_run(nodes, outputs, inputs.len(), handles, internal_refs);
    // The slots on each buffer: a parameter and the views of it the
    // step read (`w.t()`) are inputs of their own on one buffer.
    let mut first_on: FxHashMap<usize, usize> = FxHashMap::default();
    let mut group: Vec<usize> = (0..inputs.len()).collect();
    let mut members = vec![0usize; inputs.len()];
    let mut all_free = vec![true; inputs.len()];
    for (slot, input) in inputs.iter().enumerate() {
        let DataBuffer::Gpu(buf) = &input.buffer else {
            continue;
        };
        // A buffer held by this node and its `inputs` copy alone is in no
        // other slot: only shared ones are looked up (a step's graph is
        // collected every step).
        let first = if Arc::strong_count(buf) == 2 {
            slot
        } else {
            *first_on.entry(input.buffer.identity()).or_insert(slot)
        };
        group[slot] = first;
        members[first] += 1;
        all_free[first] &= free[slot];
    }
    let mut donatable = vec![false; inputs.len()];
    for (slot, input) in inputs.iter().enumerate() {
        let DataBuffer::Gpu(buf) = &input.buffer else {
            continue;
        };
        let first = group[slot];
        let node = &nodes[node_of[slot]];
        // The buffer: held by each member's node and `inputs` copy only.
        donatable[slot] = all_free[first]
            && Arc::strong_count(buf) == 2 * members[first]
            && input.layout.is_contiguous(&node.shape);
    }
    // A group is recorded only where it can matter: around a donatable
    // slot (otherwise the key would differ with sharing that changes
    // nothing).
    let mut has_donatable = vec![false; inputs.len()];
    for slot in 0..inputs.len() {
        has_donatable[group[slot]] |= donatable[slot];
    }
    for slot in 0..inputs.len() {
        if !has_donatable[group[slot]] {
            group[slot] = slot;
        }
    }
    (donatable, group)
}

#[cfg(test)]
mod same_but_numbers_tests {
    use crate::{Device, Tensor};

    use super::{Graph, GraphKey};

    /// The key of the graph `f` records on a CPU device from a `[rows,
    /// cols]` input.
    fn key_of(rows: usize, cols: usize, f: &dyn Fn(&Tensor) -> Tensor) -> GraphKey {
        let dev = Device::cpu();
        let x = Tensor::from_vec(vec![1.0f32; rows * cols], [rows, cols], &dev).expect("input");
        Graph::collect_with(&[f(&x).node()], true, false).key
    }

    /// Shapes, a strided view's offset and strides, and a padding's widths
    /// are numbers; a reduction's axes, a sort's order and an op are not.
    #[test]
    fn only_numbers_may_differ() {
        let sum = |x: &Tensor| (x.exp() * 2.0).sum([1], false);
        assert!(key_of(4, 8, &sum).same_but_numbers(&key_of(7, 12, &sum)));
        let window = |x: &Tensor| x.slice(1, 1, 3, 1).exp();
        let later = |x: &Tensor| x.slice(1, 2, 4, 1).exp();
        assert!(key_of(4, 8, &window).same_but_numbers(&key_of(4, 9, &later)));
        let padded = |x: &Tensor| x.pad(&[(0, 0), (1, 2)], 0.0).exp();
        let wider = |x: &Tensor| x.pad(&[(0, 0), (3, 0)], 0.0).exp();
        assert!(key_of(4, 8, &padded).same_but_numbers(&key_of(4, 8, &wider)));
        let across = |x: &Tensor| (x.exp() * 2.0).sum([0], false);
        assert!(!key_of(4, 8, &sum).same_but_numbers(&key_of(4, 8, &across)));
        // A top-k of short rows is a sort and a slice: its `k` a shape.
        let top = |k: usize| move |x: &Tensor| x.topk(k, 1, true).0;
        assert!(key_of(4, 8, &top(2)).same_but_numbers(&key_of(4, 8, &top(3))));
        let order = |descending: bool| move |x: &Tensor| x.argsort(1, descending);
        assert!(!key_of(4, 8, &order(true)).same_but_numbers(&key_of(4, 8, &order(false))));
        let log = |x: &Tensor| (x.log() * 2.0).sum([1], false);
        assert!(!key_of(4, 8, &sum).same_but_numbers(&key_of(4, 8, &log)));
    }
}
