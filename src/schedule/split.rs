//! Splitting long reductions in two, for the GPU: a reduction of many
//! elements into few results would run on few workgroups, so it becomes
//! a first stage of partial results spread over many invocations
//! (`Op::Reduce` with `parts`) and a second that reduces those. This is a
//! decision about the GPU's kernels, taken here on the graph lowered for
//! it: the traced graph, its cache key and the CPU reference keep plain
//! one-stage reductions.

use crate::dtype::DType;
use crate::graph::op::{BinaryOp, Op, RadixPass, ReduceOp};
use crate::graph::{GKind, GNode, GraphKey};
use crate::kernel::{ReduceSplit, ScanSplit, SortSplit, Target};
use crate::shape::{Layout, contiguous_strides, numel};

/// Outputs up to which a long reduction is split (more outputs already
/// spread over enough workgroups).
const SPLIT_MAX_OUTPUTS: usize = 64;

/// A graph lowered for the GPU, and for each of its nodes the node of the
/// traced graph it computes (part of), for source lines in messages.
pub(crate) struct Lowered {
    pub key: GraphKey,
    pub origin: Vec<usize>,
}

/// The parts a reduction of `reduced` elements into `outer` results is
/// split into under `policy`, or `None` to keep it in one stage: a power
/// of two, so that each part takes `per_part` to `2 * per_part` elements
/// (more past 2^17 parts) and the first stage runs one invocation per
/// part (no workgroup tree), neighbours reading neighbouring elements. A
/// power of two rather than `reduced / per_part` keeps the lowered
/// graph's shapes (the partial results') and its kernels' literals the
/// same over a range of sizes, so a size marked dynamic does not compile
/// its reduction again at each value.
pub(crate) fn split_parts(
    op: ReduceOp,
    reduced: usize,
    outer: usize,
    policy: ReduceSplit,
) -> Option<usize> {
    (reduced >= policy.threshold && outer <= SPLIT_MAX_OUTPUTS && !op.is_arg()).then(|| {
        let parts = (reduced / policy.per_part).clamp(2, 1 << 17);
        1 << (usize::BITS - 1 - parts.leading_zeros())
    })
}

/// `key` with every long reduction split in two stages (see the module
/// doc): the partial reduction (keepdim shape plus a trailing dim of
/// `parts`), the reduction of that dim, and a reshape back to the
/// original node's shape. One pass; nodes keep their order.
pub(crate) fn split_reductions(key: &GraphKey, policy: ReduceSplit) -> Lowered {
    lower_each(key, |lowering, i, node, inputs| {
        let GKind::Op {
            op: Op::Reduce { op, axes, parts: 1 },
            ..
        } = &node.kind
        else {
            return None;
        };
        let in_shape = &key.nodes[node.inputs[0]].shape;
        let reduced: usize = axes.iter().map(|&d| in_shape[d]).product();
        let parts = split_parts(*op, reduced, numel(&node.shape), policy)?;
        let mut partial_shape = node.shape.clone();
        partial_shape.push(parts);
        let last = partial_shape.len() - 1;
        let mut total_shape = node.shape.clone();
        total_shape.push(1);
        let reduce = |axes, parts| Op::Reduce {
            op: *op,
            axes,
            parts,
        };
        let dtype = node.dtype;
        let partial = reduce(axes.clone(), parts);
        let partial = lowering.push(i, partial, partial_shape, dtype, inputs.to_vec());
        let total = lowering.push(i, reduce(vec![last], 1), total_shape, dtype, vec![partial]);
        Some(lowering.push(i, Op::Reshape, node.shape.clone(), dtype, vec![total]))
    })
}

/// Inner dimensions from which a matmul is split on adapters whose loops
/// stop early (`Target::loop_limit`): the blocked kernel, which takes
/// every K past the lane kernel's textures, loops over K in steps of 16,
/// and past about a million the steps alone pass lavapipe's 65,535.
const SPLIT_K_THRESHOLD: usize = 1 << 19;

/// The inner dimension of each part of a split matmul (8,192 K steps).
const SPLIT_K_CHUNK: usize = 1 << 17;

/// `key` with every matmul over an inner dimension of at least
/// `SPLIT_K_THRESHOLD` split along K, where the target's loops are
/// limited (`loop_limit`): `P` chunks of `SPLIT_K_CHUNK` as one batched
/// matmul over strided views of both operands (no copy), their partial
/// products summed, plus a matmul of the remaining columns when K is not
/// a whole number of chunks. Matmuls whose operands' batch dims differ
/// are left whole. One pass; nodes keep their order.
pub(crate) fn split_long_matmuls(key: &GraphKey, loop_limit: Option<usize>) -> Lowered {
    lower_each(key, |lowering, i, node, inputs| {
        if loop_limit.is_none() || !is_long_matmul(key, node) {
            return None;
        }
        let a_shape = &key.nodes[node.inputs[0]].shape;
        let b_shape = &key.nodes[node.inputs[1]].shape;
        let r = a_shape.len();
        let (m, k, n) = (a_shape[r - 2], a_shape[r - 1], b_shape[r - 1]);
        let batch = &a_shape[..r - 2];
        let (sa, sb) = (contiguous_strides(a_shape), contiguous_strides(b_shape));
        let parts = k / SPLIT_K_CHUNK;
        let rest = k % SPLIT_K_CHUNK;
        let with_batch = |tail: &[usize]| [batch, tail].concat();
        let batch_strides = |s: &[usize], tail: &[usize]| [&s[..r - 2], tail].concat();
        let view = |offset, strides| Op::AsStrided(Layout { strides, offset });
        let c = SPLIT_K_CHUNK;
        // Chunk p of A's row: (.., p, i, j) -> A(.., i, p c + j); of B's
        // column: (.., p, j, l) -> B(.., p c + j, l).
        let a_chunks = lowering.push(
            i,
            view(0, batch_strides(&sa, &[c, k, 1])),
            with_batch(&[parts, m, c]),
            node.dtype,
            vec![inputs[0]],
        );
        let b_chunks = lowering.push(
            i,
            view(0, batch_strides(&sb, &[c * n, n, 1])),
            with_batch(&[parts, c, n]),
            node.dtype,
            vec![inputs[1]],
        );
        let dtype = node.dtype;
        let partial = lowering.push(
            i,
            Op::Matmul,
            with_batch(&[parts, m, n]),
            dtype,
            vec![a_chunks, b_chunks],
        );
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![r - 2],
            parts: 1,
        };
        let summed = lowering.push(i, sum, with_batch(&[1, m, n]), dtype, vec![partial]);
        let mut out = lowering.push(i, Op::Reshape, node.shape.clone(), dtype, vec![summed]);
        if rest > 0 {
            let last = remainder_matmul(lowering, (i, node), (inputs[0], inputs[1]), parts * c);
            let add = Op::Binary(BinaryOp::Add);
            out = lowering.push(i, add, node.shape.clone(), dtype, vec![out, last]);
        }
        Some(out)
    })
}

/// The matmul of the columns of A and rows of B from `done` on (the
/// inner dimension's remainder past the whole chunks) of traced matmul
/// `node` (number `i`), over strided views of operands `a` and `b`.
fn remainder_matmul(
    lowering: &mut Lowering,
    (i, node): (usize, &GNode),
    (a, b): (usize, usize),
    done: usize,
) -> usize {
    let a_shape = &lowering.nodes[a].shape.clone();
    let b_shape = &lowering.nodes[b].shape.clone();
    let r = a_shape.len();
    let (m, k, n) = (a_shape[r - 2], a_shape[r - 1], b_shape[r - 1]);
    let rest = k - done;
    let (sa, sb) = (contiguous_strides(a_shape), contiguous_strides(b_shape));
    let view = |offset, s: &[usize], tail: &[usize]| {
        let strides = [&s[..r - 2], tail].concat();
        Op::AsStrided(Layout { strides, offset })
    };
    let with_batch = |tail: &[usize]| [&a_shape[..r - 2], tail].concat();
    let dtype = node.dtype;
    let a_rest = lowering.push(
        i,
        view(done, &sa, &[k, 1]),
        with_batch(&[m, rest]),
        dtype,
        vec![a],
    );
    let b_view = view(done * n, &sb, &[n, 1]);
    let b_rest = lowering.push(i, b_view, with_batch(&[rest, n]), dtype, vec![b]);
    lowering.push(
        i,
        Op::Matmul,
        node.shape.clone(),
        dtype,
        vec![a_rest, b_rest],
    )
}

/// Whether `node` is a matmul over at least `SPLIT_K_THRESHOLD` inner
/// elements whose operands have the same batch dims.
fn is_long_matmul(key: &GraphKey, node: &GNode) -> bool {
    let GKind::Op { op: Op::Matmul, .. } = node.kind else {
        return false;
    };
    let a_shape = &key.nodes[node.inputs[0]].shape;
    let b_shape = &key.nodes[node.inputs[1]].shape;
    let r = a_shape.len();
    r >= 2
        && b_shape.len() == r
        && a_shape[..r - 2] == b_shape[..r - 2]
        && a_shape[r - 1] >= SPLIT_K_THRESHOLD
}

/// `key` with every long scan over few lines split into chunks
/// (`ScanSplit::chunk`): each chunk scanned alone (`Op::Scan` with
/// `chunk`, one input), the running values of each line's chunks but its
/// last (a scan along the chunks of their scans' last elements, read
/// through a strided view: no copy), and each element's chunk scan
/// combined with the running value of the chunks before it (`Op::Scan`
/// with `chunk`, two inputs). A chunk's last element and the running
/// value after it are then one and the same combine, so running sums of
/// non-negative values never decrease. Chunk scans and running values
/// are kept in the compute dtype (f32 for half inputs), as the unsplit
/// scan's running value is. One pass; nodes keep their order.
pub(crate) fn split_long_scans(key: &GraphKey, policy: ScanSplit) -> Lowered {
    lower_each(key, |lowering, i, node, inputs| {
        let GKind::Op {
            op: Op::Scan { op, axis, chunk: 0 },
            ..
        } = node.kind
        else {
            return None;
        };
        let shape = &node.shape;
        let chunk = policy.chunk(shape[axis], numel(shape) / shape[axis].max(1))?;
        let before_last = shape[axis].div_ceil(chunk) - 1;
        let with_axis = |middle: usize| [&shape[..axis], &[middle], &shape[axis + 1..]].concat();
        let dtype = node.dtype.compute();
        let scan = |chunk| Op::Scan { op, axis, chunk };
        let local = lowering.push(i, scan(chunk), shape.clone(), dtype, vec![inputs[0]]);
        let mut strides = contiguous_strides(shape);
        let s = strides[axis];
        strides[axis] = chunk * s;
        let ends = Op::AsStrided(Layout {
            strides,
            offset: (chunk - 1) * s,
        });
        let ends = lowering.push(i, ends, with_axis(before_last), dtype, vec![local]);
        let carry = lowering.push(i, scan(0), with_axis(before_last), dtype, vec![ends]);
        let sources = vec![local, carry];
        Some(lowering.push(i, scan(chunk), shape.clone(), node.dtype, sources))
    })
}

/// `key` with every sort of long lines over few of them split into runs
/// (`SortSplit::run`): the runs sorted apart (`Op::Sort` with `run`),
/// then merged in pairs (`Op::MergeRuns`), one node a doubling of the
/// run, the last holding the line's order. One pass; nodes keep their
/// order.
pub(crate) fn split_long_sorts(key: &GraphKey, policy: SortSplit) -> Lowered {
    lower_each(key, |lowering, i, node, inputs| {
        let GKind::Op {
            op:
                Op::Sort {
                    axis,
                    descending,
                    run: 0,
                },
            ..
        } = node.kind
        else {
            return None;
        };
        let (shape, dtype, x) = (&node.shape, node.dtype, inputs[0]);
        let keyed = matches!(
            key.nodes[node.inputs[0]].dtype.compute(),
            DType::F32 | DType::I32 | DType::U32
        );
        if let (Some(block), true) = (policy.radix(shape[axis]), keyed) {
            let sort = (x, shape.as_slice(), dtype);
            return Some(radix_sort(lowering, i, sort, (axis, descending, block)));
        }
        let mut run = policy.run(shape[axis], numel(shape) / shape[axis].max(1))?;
        let runs = Op::Sort {
            axis,
            descending,
            run,
        };
        let mut sorted = lowering.push(i, runs, shape.clone(), dtype, vec![x]);
        while run < shape[axis] {
            let merge = Op::MergeRuns {
                axis,
                descending,
                run,
            };
            sorted = lowering.push(i, merge, shape.clone(), dtype, vec![x, sorted]);
            run *= 2;
        }
        Some(sorted)
    })
}

/// The order of `x` (`shape`) along `axis` by eight radix passes, four
/// bits of the key each from the least significant: per pass the counts
/// of each block's digits (`Op::RadixCount`), their running sum along the
/// line (`Op::Scan`, split like any long scan), and the order moved
/// (`Op::RadixScatter`). Nodes of traced node `i`; the last holds the
/// order (`dtype`, the sort's).
fn radix_sort(
    lowering: &mut Lowering,
    i: usize,
    (x, shape, dtype): (usize, &[usize], DType),
    (axis, descending, block): (usize, bool, usize),
) -> usize {
    let len = shape[axis];
    let counted = vec![numel(shape) / len, RadixPass::DIGITS * len.div_ceil(block)];
    let mut order = None;
    for shift in (0..32).step_by(RadixPass::DIGIT_BITS) {
        let pass = RadixPass {
            axis,
            descending,
            shift,
            block,
        };
        let walked: Vec<usize> = std::iter::once(x).chain(order).collect();
        let count = Op::RadixCount(pass);
        let counts = lowering.push(i, count, counted.clone(), DType::I32, walked.clone());
        let sum = Op::Scan {
            op: ReduceOp::Sum,
            axis: 1,
            chunk: 0,
        };
        let sums = lowering.push(i, sum, counted.clone(), DType::I32, vec![counts]);
        let inputs = [walked, vec![counts, sums]].concat();
        let scatter = Op::RadixScatter(pass);
        order = Some(lowering.push(i, scatter, shape.to_vec(), dtype, inputs));
    }
    order.expect("eight passes")
}

/// Output rows along the scattered axis from which a scatter-add of an
/// axis-only index is lowered through a sort (`sort_scatters`): below
/// it, the scan of the source for each output row costs less than the
/// sort's kernels.
const SORTED_SCATTER_MIN_ROWS: usize = 8;

/// `key` with every scatter-add whose index varies along the scattered
/// axis alone (an embedding's or `index_select`'s gradient, `index_add`)
/// lowered through the index's sorted order: a stable `Sort` of the
/// index line, `SortedStarts` (where each output row's run of the order
/// starts) and `SortedScatterAdd`, which sums each row's run. The traced
/// `ScatterAdd` scans the whole source for each output element, work
/// proportional to the source times the output's rows along the axis (a
/// vocabulary of 78 rows made a GPT step's embedding gradient 10 ms on
/// lavapipe; a vocabulary of 32,000 would take seconds); through the
/// sort each source element is added once, in the same order. Anomaly
/// mode keeps the scan, whose index checks report what the user wrote.
/// One pass; nodes keep their order.
pub(crate) fn sort_scatters(key: &GraphKey) -> Lowered {
    lower_each(key, |lowering, i, node, inputs| {
        let GKind::Op {
            op: Op::ScatterAdd(axis),
            ..
        } = node.kind
        else {
            return None;
        };
        let src_len = key.nodes[node.inputs[2]].shape[axis];
        let rows = node.shape[axis];
        let src_numel = numel(&key.nodes[node.inputs[2]].shape);
        if key.checked || rows < SORTED_SCATTER_MIN_ROWS || src_numel == 0 {
            return None;
        }
        if !axis_only_index(key, node.inputs[1], axis) {
            return None;
        }
        // The index's values along `axis` at position 0 of every other
        // dim, as a line (a strided view of the index's elements).
        let along: usize = key.nodes[node.inputs[1]].shape[axis + 1..].iter().product();
        let line = Layout {
            strides: vec![along],
            offset: 0,
        };
        let keys = lowering.push(
            i,
            Op::AsStrided(line),
            vec![src_len],
            DType::I32,
            vec![inputs[1]],
        );
        let sort = Op::Sort {
            axis: 0,
            descending: false,
            run: 0,
        };
        let order = lowering.push(i, sort, vec![src_len], DType::I64, vec![keys]);
        let starts = Op::SortedStarts;
        let starts = lowering.push(i, starts, vec![rows + 1], DType::I32, vec![keys, order]);
        let sum = Op::SortedScatterAdd(axis);
        let sources = vec![inputs[0], inputs[2], order, starts];
        Some(lowering.push(i, sum, node.shape.clone(), node.dtype, sources))
    })
}

/// Whether index node `index`'s value depends on its position along
/// `axis` alone: a stored index broadcast along every other dim, a line
/// along `axis` (size 1 elsewhere), or such a line expanded.
fn axis_only_index(key: &GraphKey, index: usize, axis: usize) -> bool {
    let node = &key.nodes[index];
    let is_line = |shape: &[usize]| {
        shape.len() == node.shape.len()
            && shape[axis] == node.shape[axis]
            && shape.iter().enumerate().all(|(d, &n)| d == axis || n == 1)
    };
    let broadcast_elsewhere = |layout: &Layout| {
        (0..node.shape.len()).all(|d| d == axis || node.shape[d] == 1 || layout.strides[d] == 0)
    };
    node.dtype == DType::I32
        && (is_line(&node.shape)
            || match &node.kind {
                GKind::Input { layout, .. } => broadcast_elsewhere(layout),
                GKind::Op { op: Op::Expand, .. } => is_line(&key.nodes[node.inputs[0]].shape),
                GKind::Op { .. } => false,
            })
}

/// `key` with each node that `rewrite` lowers (given the lowering so
/// far, the node's number and the new numbers of its inputs) replaced by
/// the nodes it pushes, the last of which it returns; the others kept as
/// they are. One pass; nodes keep their order.
fn lower_each(
    key: &GraphKey,
    mut rewrite: impl FnMut(&mut Lowering, usize, &GNode, &[usize]) -> Option<usize>,
) -> Lowered {
    let mut lowering = Lowering::new(key);
    for (i, node) in key.nodes.iter().enumerate() {
        let inputs: Vec<usize> = node.inputs.iter().map(|&j| lowering.new_index[j]).collect();
        match rewrite(&mut lowering, i, node, &inputs) {
            Some(out) => lowering.new_index.push(out),
            None => lowering.keep(i, node, inputs),
        }
    }
    lowering.finish(key)
}

impl Lowered {
    /// This lowering followed by `pass` over the graph it made, each node
    /// still mapped to the traced node it computes (part of).
    fn then(self, pass: impl FnOnce(&GraphKey) -> Lowered) -> Lowered {
        let next = pass(&self.key);
        let origin = next.origin.iter().map(|&o| self.origin[o]).collect();
        Lowered {
            key: next.key,
            origin,
        }
    }
}

/// A graph being lowered node by node: the nodes so far, the traced node
/// each computes (part of), and where each traced node's value went.
struct Lowering {
    nodes: Vec<GNode>,
    origin: Vec<usize>,
    new_index: Vec<usize>,
}

impl Lowering {
    fn new(key: &GraphKey) -> Lowering {
        Lowering {
            nodes: Vec::with_capacity(key.nodes.len()),
            origin: Vec::with_capacity(key.nodes.len()),
            new_index: Vec::with_capacity(key.nodes.len()),
        }
    }

    /// Traced node `i` as it is, reading `inputs`.
    fn keep(&mut self, i: usize, node: &GNode, inputs: Vec<usize>) {
        self.nodes.push(GNode {
            inputs,
            ..node.clone()
        });
        self.origin.push(i);
        self.new_index.push(self.nodes.len() - 1);
    }

    /// A new node computing part of traced node `i`; returns its index.
    fn push(
        &mut self,
        i: usize,
        op: Op,
        shape: Vec<usize>,
        dtype: crate::dtype::DType,
        inputs: Vec<usize>,
    ) -> usize {
        self.nodes.push(GNode {
            kind: GKind::Op { op, param_base: 0 },
            shape,
            dtype,
            inputs,
        });
        self.origin.push(i);
        self.nodes.len() - 1
    }

    fn finish(self, key: &GraphKey) -> Lowered {
        Lowered {
            key: GraphKey {
                nodes: self.nodes,
                outputs: key.outputs.iter().map(|&o| self.new_index[o]).collect(),
                fused: key.fused,
                checked: key.checked,
                donatable: key.donatable.clone(),
                buffer_group: key.buffer_group.clone(),
            },
            origin: self.origin,
        }
    }
}

/// The graph lowered for `target`: scatter-adds of an axis-only index
/// through a sort (`sort_scatters`), long matmuls split along K where
/// loops are limited (`split_long_matmuls`), long scans over few lines
/// into chunks (`split_long_scans`), long sorts into runs and merges
/// (`split_long_sorts`), then long reductions split
/// into stages (`split_reductions`, again on the stages it made while a
/// later stage is still long, up to the target's `max_stages`); `origin`
/// maps to the traced graph. Each pass is linear in the graph.
pub(crate) fn lower_for_gpu(key: &GraphKey, target: &Target) -> Lowered {
    let mut lowered = sort_scatters(key)
        .then(|k| split_long_matmuls(k, target.loop_limit))
        // Sorts first: a radix sort's running sums are scans to split.
        .then(|k| split_long_sorts(k, target.sort_split))
        .then(|k| split_long_scans(k, target.scan_split));
    for _ in 1..target.reduce_split.max_stages.max(2) {
        let before = lowered.key.nodes.len();
        lowered = lowered.then(|k| split_reductions(k, target.reduce_split));
        if lowered.key.nodes.len() == before {
            break;
        }
    }
    lowered
}
