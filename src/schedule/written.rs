//! Which nodes of a fused graph are written to memory rather than
//! recomputed in each kernel that reads them: the outputs, and values
//! whose recomputation would cost more than their buffer (a matmul's
//! computed operands, scatter-adds, a merge of roots that would otherwise
//! be held until the backward pass). Each rule is one pass over the graph.

use super::{index_preserving, is_root, op_of, readers_of, takes_epilogues};
use crate::graph::op::Op;
use crate::graph::{GKind, GraphKey};
use crate::shape::numel;

/// Which nodes are written to memory (see `written_nodes`).
pub(super) struct Written {
    /// Per node: whether it is written.
    pub nodes: Vec<bool>,
    /// The written random draws (`realize_shared_draws`), in node order:
    /// they read no root, so their kernels run first and every kernel
    /// that reads them loads them.
    pub draws: Vec<usize>,
}

/// Which nodes are written to memory: the outputs; unfused, every
/// computed node; fused, also the computed operands of matmuls and
/// sorts, random draws read more than once, and others that pay (below).
pub(super) fn written_nodes(key: &GraphKey) -> Written {
    let mut written = vec![false; key.nodes.len()];
    let mut draws = Vec::new();
    for &o in &key.outputs {
        written[o] = true;
    }
    if !key.fused {
        for (i, n) in key.nodes.iter().enumerate() {
            if let GKind::Op { op, .. } = &n.kind {
                if !op.is_movement() && *op != Op::Scalar {
                    written[i] = true;
                }
            }
        }
    } else {
        realize_repeatedly_read_operands(key, &mut written);
        realize_scatters(key, &mut written);
        draws = realize_shared_draws(key, &mut written);
        realize_merges_of_dying_roots(key, &mut written);
        realize_tops_of_dying_roots(key, &mut written);
        realize_operands_of_row_passes(key, &mut written);
    }
    Written {
        nodes: written,
        draws,
    }
}

/// The fewest distinct stored values from which an operand read in
/// several passes is written (two, a scaled gradient `gy * weight`,
/// count a broadcast weight as a full read).
const ROW_PASS_READS_MIN: usize = 3;

/// The most distinct stored reads counted per node: enough to decide
/// for any number of passes (`writes_pay`).
const ROW_PASS_READS_CAP: usize = 4;

/// How many passes over each row the kernel of root `op` makes, if it
/// reads its operands more than once.
fn row_passes(op: &Op) -> Option<usize> {
    match op {
        Op::Normalize { rms } => Some(3 - usize::from(*rms)),
        Op::NormalizeBackward { rms } => Some(4 - usize::from(*rms)),
        Op::Softmax { .. } => Some(2),
        _ => None,
    }
}

/// Whether writing an operand that reads `k` stored values, read in `p`
/// passes, costs fewer loads and stores an element (`k + 1 + p`) than
/// recomputing it in each pass (`k * p`).
fn writes_pay(k: usize, p: usize) -> bool {
    k >= ROW_PASS_READS_MIN && k * p > k + 1 + p
}

/// Marks written the computed operand of a root that reads each row in
/// several passes (a layer or RMS norm: three forward, four backward; a
/// softmax: two or more), where recomputing its inlined work in every
/// pass costs more than writing it once (`writes_pay`): the GPT step's
/// residual stream (token and position embeddings gathered, then each
/// block's two matmul outputs added) was recomputed in every pass of
/// every layer norm, forward and backward, seven loads an element a
/// pass.
///
/// One pass in topological order: each node's stored reads as a set
/// capped at `ROW_PASS_READS_CAP` (a union of capped sets is exact up to
/// the cap). A written operand's set, and its views', become itself;
/// nodes already computed from it keep the reads through it, so a later
/// root may write one of them too (a buffer more than needed, never a
/// wrong value).
fn realize_operands_of_row_passes(key: &GraphKey, written: &mut [bool]) {
    let nodes = &key.nodes;
    let mut reads: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
    for (n, node) in nodes.iter().enumerate() {
        let set = match op_of(key, n) {
            None => vec![n],
            Some(_) if written[n] || is_root(key, n) => vec![n],
            Some(Op::Scalar | Op::Arange) => Vec::new(),
            Some(_) => {
                let mut set: Vec<usize> = Vec::new();
                for &i in &node.inputs {
                    for &r in &reads[i] {
                        if set.len() < ROW_PASS_READS_CAP && !set.contains(&r) {
                            set.push(r);
                        }
                    }
                }
                set
            }
        };
        reads.push(set);
        let Some(passes) = op_of(key, n).and_then(row_passes) else {
            continue;
        };
        for &j in &node.inputs {
            if !writes_pay(reads[j].len(), passes) {
                continue;
            }
            // The value under the views the root reads it through.
            let mut path = vec![j];
            let mut c = j;
            while op_of(key, c).is_some_and(Op::is_movement) {
                c = nodes[c].inputs[0];
                path.push(c);
            }
            if op_of(key, c).is_none() || written[c] || is_root(key, c) {
                continue;
            }
            log::debug!("node {c}: written, recomputed in each row pass of root {n}");
            written[c] = true;
            for &v in &path {
                reads[v] = vec![c];
            }
        }
    }
}

/// Per node: how many nodes read it, plus one for each output (held by
/// the caller).
fn consumer_counts(key: &GraphKey) -> Vec<usize> {
    let mut consumers = vec![0usize; key.nodes.len()];
    for n in &key.nodes {
        for &j in &n.inputs {
            consumers[j] += 1;
        }
    }
    for &o in &key.outputs {
        consumers[o] += 1;
    }
    consumers
}

/// The root of `size` elements that `j` is computed from, through
/// elementwise ops (a bias added; and views, where `views`) each read
/// only by the next, if nothing else reads that root (`consumers`:
/// `consumer_counts`), with how many other values the chain reads on its
/// way (`other_reads`). A chain is walked from its one reader only, so
/// the walks together are linear.
fn chain_root(
    key: &GraphKey,
    (consumers, written): (&[usize], &[bool]),
    (mut j, size): (usize, usize),
    views: bool,
) -> Option<(usize, usize)> {
    let mut other = 0;
    while consumers[j] == 1 && !is_root(key, j) && !written[j] {
        let op = op_of(key, j)?;
        if !(index_preserving(op) || (views && op.is_movement())) {
            return None;
        }
        let next = full_input(key, j, size)?;
        other += other_reads(key, j, next);
        j = next;
    }
    let alone = consumers[j] == 1 && numel(&key.nodes[j].shape) == size;
    (is_root(key, j) && alone).then_some((j, other))
}

/// The one input of node `j` that holds `size` elements, if one does.
fn full_input(key: &GraphKey, j: usize, size: usize) -> Option<usize> {
    let mut full = (key.nodes[j].inputs.iter()).filter(|&&i| holds_elements(key, i) == size);
    match (full.next(), full.next()) {
        (Some(&i), None) => Some(i),
        _ => None,
    }
}

/// The inputs of node `j` other than `next` that hold values (not
/// scalars or positions).
fn other_reads(key: &GraphKey, j: usize, next: usize) -> usize {
    (key.nodes[j].inputs.iter())
        .filter(|&&i| i != next && !matches!(op_of(key, i), Some(Op::Scalar | Op::Arange)))
        .count()
}

/// Elements node `n`'s value is made of: a broadcast (an expand, or a
/// stored input read through zero strides, as a bias is) holds those of
/// its source, not of its shape.
fn holds_elements(key: &GraphKey, n: usize) -> usize {
    let node = &key.nodes[n];
    match &node.kind {
        GKind::Input { layout, .. } => layout.elements_reached(&node.shape),
        GKind::Op { op: Op::Expand, .. } => numel(&key.nodes[node.inputs[0]].shape),
        GKind::Op { .. } => numel(&node.shape),
    }
}

/// Marks written an elementwise node that merges two or more kernel
/// roots of its own size read by nothing else (`conv(h) + skip(x)`), where
/// the node is read more than once (a norm's statistics and its
/// normalisation, forward and backward). Inlined, each reader recomputes
/// it, so both roots stay in memory until its last reader, in a training
/// step until the backward pass; written once, they are released as soon
/// as it is, and its readers load one value instead of two. (The U-Net's
/// output ResBlock held both 0.8 MB convolution outputs through the
/// backward pass at the step's peak.) One pass over the graph.
fn realize_merges_of_dying_roots(key: &GraphKey, written: &mut [bool]) {
    let nodes = &key.nodes;
    let consumers = consumer_counts(key);
    let is_view = |n: usize| op_of(key, n).is_some_and(Op::is_movement);
    // Readers of each node's value that compute (views followed), capped
    // at 2; one pass in reverse topological order.
    let mut readers = vec![0usize; nodes.len()];
    for n in (0..nodes.len()).rev() {
        let inputs = &nodes[n].inputs;
        for (i, &j) in inputs.iter().enumerate() {
            if inputs[..i].contains(&j) {
                continue; // `z * z` reads `z` once
            }
            let through = if is_view(n) { readers[n] } else { 1 };
            readers[j] = (readers[j] + through).min(2);
        }
    }
    for n in 0..nodes.len() {
        if written[n] || readers[n] < 2 || !op_of(key, n).is_some_and(index_preserving) {
            continue;
        }
        let size = numel(&nodes[n].shape);
        let mut roots: Vec<usize> = (nodes[n].inputs.iter())
            .filter_map(|&j| chain_root(key, (&consumers, written), (j, size), true))
            .map(|(root, _)| root)
            .collect();
        roots.dedup();
        if roots.len() >= 2 {
            log::debug!("node {n}: written, it merges roots {roots:?} read by nothing else");
            written[n] = true;
        }
    }
}

/// Marks written the last node of an elementwise chain over a kernel
/// root that reads stored values besides the root (a bias added, then a
/// ReLU) where that node is read through a view or by another root (a
/// pooling window's max and argmax, a norm) and nothing else reads the
/// root or the chain: the root's kernel then stores the chain's value
/// as its epilogue instead of the root's, the same store, and each
/// reader loads one value instead of recomputing the chain from the
/// root and its other reads. (The MNIST CNN's pooling kernels loaded the
/// convolution's output and its bias at each of four window elements,
/// and its pooling gradient both again.) One pass over the graph, each
/// chain walked from its top only.
fn realize_tops_of_dying_roots(key: &GraphKey, written: &mut [bool]) {
    let nodes = &key.nodes;
    let consumers = consumer_counts(key);
    let mut read_apart = vec![false; nodes.len()];
    for (c, node) in nodes.iter().enumerate() {
        let apart = op_of(key, c).is_some_and(|op| !index_preserving(op));
        for &j in &node.inputs {
            read_apart[j] |= apart;
        }
    }
    for n in 0..nodes.len() {
        let chain_top = op_of(key, n).is_some_and(|op| index_preserving(op) && *op != Op::Reshape);
        if written[n] || !read_apart[n] || !chain_top {
            continue;
        }
        let size = numel(&nodes[n].shape);
        let Some(next) = full_input(key, n, size) else {
            continue;
        };
        let chain = chain_root(key, (&consumers, written), (next, size), false);
        if let Some((r, below)) = chain {
            if other_reads(key, n, next) + below > 0 && takes_epilogues(key, r) {
                log::debug!("node {n}: written, the top of a chain over root {r} read apart");
                written[n] = true;
            }
        }
    }
}

/// Marks every scatter-add written. Inlined, a scatter-add is a loop over
/// its whole source at each element it computes, redone in every kernel
/// that reads it: the GPT step's tied embedding gradient (65 x 128, a
/// loop over 768 token ids an element) fed both the optimiser's update
/// and the gradient norm's sum of squares, whose single kernel spent 4.9
/// ms of a 7.5 ms step on an H200 recomputing it. Written once, each
/// reader loads it. The same holds for the lowering of a sorted
/// scatter-add (`split::sort_scatters`): its sum over a run, and the
/// binary search that finds where each run starts.
fn realize_scatters(key: &GraphKey, written: &mut [bool]) {
    for (n, node) in key.nodes.iter().enumerate() {
        if let GKind::Op {
            op: Op::ScatterAdd(_) | Op::SortedScatterAdd(_) | Op::SortedStarts,
            ..
        } = &node.kind
        {
            written[n] = true;
        }
    }
}

/// Marks written the value of a random draw that more than one node
/// reads: the draw itself, or the first value computed from it alone
/// (with constants or positions) that has several readers, such as dropout's mask,
/// read by the forward select and again by the gradient's. Inlined, each
/// reader draws again: ten Philox rounds of 16-bit multiplications an
/// element, which made the MNIST CNN's dropout gradient (fused with the
/// max-pool's and relu's, so drawn at each of a window's four elements)
/// 11 % of its step on lavapipe. Written once, each reader loads it, as
/// PyTorch keeps the mask. Returns the nodes it marks, in node order.
fn realize_shared_draws(key: &GraphKey, written: &mut [bool]) -> Vec<usize> {
    let nodes = &key.nodes;
    let readers = readers_of(key);
    // Values of the element's position alone (scalars among them): a
    // draw combined with them is still a draw's worth of work.
    let positional = positional_nodes(key);
    let mut marked = Vec::new();
    let elementwise = |n: usize| {
        matches!(
            op_of(key, n),
            Some(Op::Unary(_) | Op::Binary(_) | Op::Cast(_) | Op::Where)
        )
    };
    for (r, node) in nodes.iter().enumerate() {
        if !matches!(
            node.kind,
            GKind::Op {
                op: Op::Rand { .. },
                ..
            }
        ) {
            continue;
        }
        // Down the chain of single readers that compute from the draw and
        // constants only (each node is on at most one draw's chain), to
        // the first written one at most. Readers that would all be in one
        // kernel (two selects summed) cost a kernel and a buffer more than
        // drawing once inline, a case left as it is.
        let mut n = r;
        while !written[n]
            && let [next] = readers[n][..]
            && elementwise(next)
            && nodes[next].inputs.iter().all(|&i| i == n || positional[i])
        {
            n = next;
        }
        if readers[n].len() > 1 && !written[n] {
            written[n] = true;
            marked.push(n);
        }
    }
    marked.sort_unstable();
    marked
}

/// Roots whose kernels read an operand element many times: a matmul
/// (once per tile of the other side), a sort and the parts a long one is
/// lowered to, and the top-k select (once per pass over the line, ten,
/// or once per radix kernel, sixteen). The sorting kernels also need
/// every read of an element to give the same bits (a radix pass's
/// counts and its scatter must agree on each key's digit), which a
/// prologue inlined into each, compiled apart, need not.
fn reads_operands_repeatedly(op: &Op) -> bool {
    *op == Op::Matmul || op.works_in_its_output()
}

/// Marks as written the computed values that the roots of
/// `reads_operands_repeatedly` read. A matmul
/// loads each operand element once per tile of the other side (N/64 times
/// for the left operand), so elementwise work inlined into its loads is
/// repeated that often: an activation gradient (relu mask times a pooled
/// gradient) feeding a transposed convolution made it 3x slower than the
/// same matmul over stored data. Movement (reshape, expand, strided
/// windows, flips, padding) stays inlined: it is index arithmetic only,
/// and so is a select by position joining two parts (`Tensor::cat` of
/// two tensors): written, a concatenation copies parts that are held
/// anyway (the U-Net's skip, 0.8 MB at its step's peak).
fn realize_repeatedly_read_operands(key: &GraphKey, written: &mut [bool]) {
    let nodes = &key.nodes;
    let positional = positional_nodes(key);
    // What is decided for a node does not depend on which matmul reached
    // it, so each node is visited once for all of them (linear time).
    let mut seen = vec![false; nodes.len()];
    for (m, node) in nodes.iter().enumerate() {
        if !op_of(key, m).is_some_and(reads_operands_repeatedly) {
            continue;
        }
        let mut stack = node.inputs.clone();
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut seen[n], true) {
                continue;
            }
            let Some(op) = op_of(key, n) else {
                continue; // stored input
            };
            if op.is_kernel_root() || written[n] {
                continue;
            }
            match op {
                Op::Scalar | Op::Arange => {}
                _ if op.is_movement() || matches!(op, Op::Pad(_)) => {
                    stack.extend_from_slice(&nodes[n].inputs);
                }
                // A join of two parts only: each further part is another
                // select, and `select` evaluates both sides, so a cat of k
                // parts inlined would read k padded parts per element at
                // every one of the matmul's repeated loads.
                Op::Where
                    if positional[nodes[n].inputs[0]]
                        && !nodes[n].inputs[1..].iter().any(|&v| {
                            op_of(key, v) == Some(&Op::Where) && positional[nodes[v].inputs[0]]
                        }) =>
                {
                    stack.extend_from_slice(&nodes[n].inputs[1..]);
                }
                _ => {
                    log::debug!(
                        "node {n} ({}): written, read repeatedly by matmul {m}",
                        op.name()
                    );
                    written[n] = true;
                }
            }
        }
    }
}

/// Per node: whether its value depends on the element's position only
/// (an `arange`, scalars, and elementwise or movement ops of those), as
/// the condition of `Tensor::cat`'s selects does. One pass.
fn positional_nodes(key: &GraphKey) -> Vec<bool> {
    let mut positional = vec![false; key.nodes.len()];
    for (n, node) in key.nodes.iter().enumerate() {
        positional[n] = match op_of(key, n) {
            Some(Op::Arange | Op::Scalar) => true,
            Some(op)
                if op.is_movement() || matches!(op, Op::Unary(_) | Op::Binary(_) | Op::Cast(_)) =>
            {
                node.inputs.iter().all(|&i| positional[i])
            }
            _ => false,
        };
    }
    positional
}

/// The rules checked on graphs traced on the CPU device, without a GPU.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;
    use crate::graph::op::BinaryOp;
    use crate::{Device, DeviceConfig, Tensor};

    fn input(shape: &[usize], dev: &Device) -> Tensor {
        let n: usize = shape.iter().product();
        let values = (0..n).map(|i| (i % 7) as f32 * 0.1).collect::<Vec<_>>();
        Tensor::from_vec(values, shape, dev).expect("input")
    }

    /// The written nodes' ops when `outputs` are computed, fused.
    fn written_ops(outputs: &[&Tensor]) -> Vec<Op> {
        let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
        let key = Graph::collect(&nodes, true).key;
        let written = written_nodes(&key).nodes;
        (0..key.nodes.len())
            .filter(|&n| written[n] && !key.outputs.contains(&n))
            .filter_map(|n| op_of(&key, n).cloned())
            .collect()
    }

    /// A ResBlock's end: two convolutions (each with its bias) of `x`.
    fn two_convolutions(dev: &Device) -> (Tensor, Tensor) {
        let x = input(&[2, 4, 6, 6], dev);
        let (w3, w1, b) = (
            input(&[4, 4, 3, 3], dev),
            input(&[4, 4, 1, 1], dev),
            input(&[4], dev),
        );
        let h = x.conv2d(&w3, Some(&b), (1, 1), (1, 1), (1, 1));
        let skip = x.conv2d(&w1, Some(&b), (1, 1), (0, 0), (1, 1));
        (h, skip)
    }

    #[test]
    fn a_random_mask_read_twice_is_written_once_before_its_readers() {
        let dev = Device::cpu_with(DeviceConfig::default());
        let x = input(&[4, 6], &dev);
        // A root recorded before the draw, which reads nothing of it.
        let earlier = input(&[5], &dev).sum_all();
        let keep = Tensor::rand([4, 6], &dev).ge(0.3);
        // Read by two selects: the mask is written, not the draw.
        let (a, b) = (
            keep.where_cond(&x, 0.0f32),
            keep.where_cond(&x * 2.0, 1.0f32),
        );
        let (sa, sb) = (a.sum_all(), b.max_all());
        let outputs = [&earlier, &sa, &sb];
        assert_eq!(written_ops(&outputs), vec![Op::Binary(BinaryOp::Ge)]);
        // Its kernel runs after the earlier root's (it is held from just
        // before its first reader) and before the roots that read it.
        let key = Graph::collect(&outputs.map(|t| t.node()), true).key;
        let kernels = super::super::schedule(&key, 8).kernels;
        let writes_mask = |k: &super::super::KernelGroup| {
            k.kind == super::super::KernelKind::Elementwise
                && (k.outputs.iter()).all(|&o| op_of(&key, o) == Some(&Op::Binary(BinaryOp::Ge)))
        };
        assert_eq!(kernels.iter().position(writes_mask), Some(1), "{kernels:?}");
        // Read once (through a chain of its own): drawn where it is read.
        let once = Tensor::rand([4, 6], &dev)
            .ge(0.3)
            .where_cond(&x, 0.0f32)
            .sum_all();
        assert_eq!(written_ops(&[&once]), vec![]);
    }

    #[test]
    fn a_sum_of_two_dying_convolutions_read_twice_is_written() {
        let dev = Device::cpu_with(DeviceConfig::default());
        let (h, skip) = two_convolutions(&dev);
        let z = &h + &skip;
        let (total, squares) = (z.sum_all(), (&z * &z).mean_all());
        let ops = written_ops(&[&total, &squares]);
        assert_eq!(ops, vec![Op::Binary(BinaryOp::Add)], "{ops:?}");
    }

    #[test]
    fn a_sum_read_once_or_of_a_root_read_elsewhere_stays_inlined() {
        let dev = Device::cpu_with(DeviceConfig::default());
        let (h, skip) = two_convolutions(&dev);
        // One reader: computed where it is read, nothing held longer.
        let once = (&h + &skip).sum_all();
        assert_eq!(written_ops(&[&once]), vec![]);
        // One reader reading it twice is still one reader.
        let z = &h + &skip;
        assert_eq!(written_ops(&[&(&z * &z).sum_all()]), vec![]);
        // `h` is read elsewhere (by another root), so it stays in memory
        // either way: its bias added by its convolution's kernel
        // (`realize_tops_of_dying_roots`), not by each reader.
        let z = &h + &skip;
        let (total, squares, other) = (z.sum_all(), (&z * &z).mean_all(), h.max_all());
        let add = Op::Binary(BinaryOp::Add);
        assert_eq!(written_ops(&[&total, &squares, &other]), vec![add]);
    }

    #[test]
    fn a_norm_or_softmax_operand_is_written_where_its_passes_pay_for_it() {
        use crate::nn::functional as F;
        let dev = Device::cpu_with(DeviceConfig::default());
        let [a, b, c, d] = [0; 4].map(|_| input(&[6, 8], &dev));
        let add = Op::Binary(BinaryOp::Add);
        // Three stored reads a pass in a layer norm's three passes (9
        // loads inlined, 7 written): written once, read by each pass.
        let three = &(&a + &b) + &c;
        let y = F::layer_norm(&three, &[8], None, None, 1e-5);
        assert_eq!(written_ops(&[&y]), vec![add.clone()]);
        // A softmax's two passes pay for it from four reads (8 against 7),
        // not from three (6 against 6).
        assert_eq!(written_ops(&[&three.softmax(1)]), vec![]);
        let four = &three + &d;
        assert_eq!(written_ops(&[&four.softmax(1)]), vec![add.clone()]);
        // Through a view, the value under it is written.
        let viewed = four.reshape([3, 16]);
        assert_eq!(written_ops(&[&viewed.log_softmax(1)]), vec![add.clone()]);
        // Two reads (a residual and its branch) stay inlined, as does a
        // value read three times over the same stored input.
        let two = &a + &b;
        let y = F::layer_norm(&two, &[8], None, None, 1e-5);
        assert_eq!(written_ops(&[&y]), vec![]);
        let same = &(&a * 2.0) + &(&a * &a);
        let y = F::layer_norm(&same, &[8], None, None, 1e-5);
        assert_eq!(written_ops(&[&y]), vec![]);
    }

    /// A sort, or the top-k select, reads its operand in many passes:
    /// a computed operand is written once, a view of a stored one not.
    #[test]
    fn a_computed_operand_of_a_sort_or_a_top_k_is_written() {
        let dev = Device::cpu_with(DeviceConfig::default());
        let x = input(&[3, 2000], &dev);
        let sorted = (&x * 0.5f32).argsort(1, false);
        let picked = (&x - 1.0f32).topk(5, 1, true).1;
        let ops = written_ops(&[&sorted, &picked]);
        assert!(ops.contains(&Op::Binary(BinaryOp::Mul)), "{ops:?}");
        assert!(ops.contains(&Op::Binary(BinaryOp::Sub)), "{ops:?}");
        let of_view = x.t().argsort(0, true);
        let ops = written_ops(&[&of_view]);
        assert!(
            !ops.iter().any(|op| matches!(op, Op::AsStrided(_))),
            "{ops:?}"
        );
    }

    #[test]
    fn a_concatenation_read_by_a_matmul_is_not_copied() {
        let dev = Device::cpu_with(DeviceConfig::default());
        let (h, skip) = two_convolutions(&dev);
        let joined = Tensor::cat(&[&h, &skip], 1); // [2, 8, 6, 6]
        let w = input(&[3, 8, 1, 1], &dev);
        let y = joined.conv2d(&w, None, (1, 1), (0, 0), (1, 1)).sum_all();
        let ops = written_ops(&[&y]);
        assert!(!ops.contains(&Op::Where), "{ops:?}");
        // Three parts are written once: inlined, each load would read
        // all three. Its parts, read through the padding that places
        // them, are the convolutions with their biases added, each
        // stored by its convolution's kernel in place of the product.
        let three = Tensor::cat(&[&h, &skip, &h], 1); // [2, 12, 6, 6]
        let w3 = input(&[3, 12, 1, 1], &dev);
        let y = three.conv2d(&w3, None, (1, 1), (0, 0), (1, 1)).sum_all();
        let add = Op::Binary(BinaryOp::Add);
        assert_eq!(written_ops(&[&y]), vec![add.clone(), add, Op::Where]);
        // A select by data, not by position, is computed once for the
        // matmul's repeated reads.
        let picked = h.gt(0.5f32).where_cond(&h, &skip);
        let y = picked.conv2d(&w.slice(1, 0, 4, 1), None, (1, 1), (0, 0), (1, 1));
        assert_eq!(written_ops(&[&y.sum_all()]), vec![Op::Where]);
    }

    #[test]
    fn a_biased_activation_read_through_windows_is_stored_by_its_root() {
        let dev = Device::cpu_with(DeviceConfig::default());
        let (h, _) = two_convolutions(&dev);
        let relu = Op::Unary(crate::graph::op::UnaryOp::Relu);
        // The convolution, its bias and a ReLU, read by a pooling's
        // windows: the ReLU is written (by the convolution's kernel), so
        // the pooling loads one value a window element, not two.
        let pooled = h.relu().max_pool2d((2, 2), (2, 2), (0, 0));
        assert_eq!(written_ops(&[&pooled]), vec![relu.clone()]);
        let (root, key) = stored_in_place_of_its_root(&pooled);
        assert!(root.is_some(), "{key:?}");
        // With no read besides the convolution's own, the chain is
        // recomputed by its readers as before.
        let x = input(&[2, 4, 6, 6], &dev);
        let bare = x.conv2d(&input(&[4, 4, 3, 3], &dev), None, (1, 1), (1, 1), (1, 1));
        let pooled = bare.relu().max_pool2d((2, 2), (2, 2), (0, 0));
        assert_eq!(written_ops(&[&pooled]), vec![]);
        // A convolution read elsewhere too (before its bias) keeps its own
        // buffer, and its chain stays inlined.
        let biased = &bare + &input(&[4], &dev).reshape([1, 4, 1, 1]);
        let pooled = biased.relu().max_pool2d((2, 2), (2, 2), (0, 0));
        let both = [&pooled, &bare.sum_all()];
        assert_eq!(written_ops(&both), vec![]);
        // Without it, the biased ReLU is written.
        assert_eq!(written_ops(&[&pooled]), vec![relu]);
    }

    /// For the one written non-output node of `y`'s graph: the kernel root
    /// whose epilogue computes it, where that root is not itself written.
    fn stored_in_place_of_its_root(y: &Tensor) -> (Option<usize>, GraphKey) {
        let key = Graph::collect(&[y.node()], true).key;
        let written = written_nodes(&key).nodes;
        let top = (0..key.nodes.len()).find(|&n| written[n] && !key.outputs.contains(&n));
        let schedule = crate::schedule::schedule(&key, 8);
        let root = schedule.kernels.iter().find_map(|k| match k.kind {
            crate::schedule::KernelKind::Root {
                node,
                write_root: false,
            } => top.filter(|t| k.outputs.contains(t)).map(|_| node),
            _ => None,
        });
        (root, key)
    }
}
