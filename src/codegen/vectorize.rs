//! Which values a kernel computes four elements at a time: the ops that
//! can by themselves, the views whose groups of four lie as aligned
//! groups of their input, and, in a kernel working on vectors, the nodes
//! computed a lane at a time and gathered (`lanes_gathered`).

use super::emit::read_from_memory;
use super::source::CodegenContext;
use crate::graph::op::Op;
use crate::graph::{GKind, GNode};
use crate::kernel::layouts::{SzLayout, elements};
use crate::kernel::{Guards, Sz};
use crate::shape::numel;

/// Whether node `n`'s value can be computed four elements at a time with
/// every read at the output's own position, a single splatted value, or
/// a row broadcast along leading dims read four at a time (views read
/// one element at a time: only kernels that gather, `lanes_gathered`,
/// take aligned views as vectors).
///
/// One walk over the nodes `n` reads, each decided once (graphs reuse
/// values: a walk that follows every path is exponential in the depth of
/// the reuse, and `y = y * y + y` eighteen times took 14 s here).
pub(crate) fn vectorizable(
    nodes: &[GNode],
    n: usize,
    stored: &dyn Fn(usize) -> bool,
    is_root: bool,
    guards: &mut Guards,
) -> bool {
    vectorizable_given(nodes, n, stored, (is_root, None), guards)
}

/// `vectorizable` for an epilogue of node `given` (a matmul whose
/// accumulators hold four adjacent outputs): `given`'s own value is there
/// four elements at a time.
pub(crate) fn vectorizable_over(
    nodes: &[GNode],
    n: usize,
    stored: &dyn Fn(usize) -> bool,
    given: usize,
    guards: &mut Guards,
) -> bool {
    vectorizable_given(nodes, n, stored, (false, Some(given)), guards)
}

fn vectorizable_given(
    nodes: &[GNode],
    n: usize,
    stored: &dyn Fn(usize) -> bool,
    (is_root, given): (bool, Option<usize>),
    guards: &mut Guards,
) -> bool {
    let mut own = |m: usize, root: bool| match given == Some(m) {
        true => Some(true),
        false => computes_in_fours(nodes, m, stored, (root, None), guards),
    };
    if let Some(v) = own(n, is_root) {
        return v;
    }
    // Iterative depth-first search for a node that is not vectorizable;
    // `seen` keeps every node to one visit.
    let mut seen: rustc_hash::FxHashSet<usize> = Default::default();
    let mut stack: Vec<usize> = nodes[n].inputs.clone();
    while let Some(m) = stack.pop() {
        if !seen.insert(m) {
            continue;
        }
        match own(m, false) {
            Some(true) => {}
            Some(false) => return false,
            None => stack.extend_from_slice(&nodes[m].inputs),
        }
    }
    true
}

/// Whether views and scatters into windows whose groups of four lie as
/// aligned groups of their input count as computed four at a time, and
/// where: `None`, nowhere (the prologues and epilogues of reductions,
/// norms and matmuls keep reading views one element at a time);
/// `Some(cx)`, except a view or window whose last dimension changes
/// between the site's graphs (`CodegenContext::last_dim_changes`), whose
/// alignment a later size could break.
type AlignedViews<'a> = Option<&'a CodegenContext<'a>>;

/// What node `m` decides by itself about being computed four elements
/// at a time, or `None`: it can be where all its inputs can. Only the
/// root (`root`) may be computed where it is stored.
fn computes_in_fours(
    nodes: &[GNode],
    m: usize,
    stored: &dyn Fn(usize) -> bool,
    (root, views): (bool, AlignedViews),
    guards: &mut Guards,
) -> Option<bool> {
    let node = &nodes[m];
    if node.dtype.is_half() {
        // Kept scalar: a bf16 vec4 would be a pair of words, an f16
        // one a `vec4<f16>`; neither is written yet.
        return Some(false);
    }
    match &node.kind {
        GKind::Input { layout, .. } => {
            let (shape, layout) = (Sz::shape(m, &node.shape), SzLayout::of(m, layout));
            Some(
                guards.equals(&elements(&shape), 1, "a single value splatted")
                    || layout.row_major_in_fours(&shape, guards)
                    || layout.reads_in_aligned_fours(&shape, guards),
            )
        }
        GKind::Op { .. } if read_from_memory(nodes, m, root, stored) => Some(true),
        GKind::Op { op, .. } => match (op, views) {
            (Op::AsStrided(_) | Op::StridedScatter(_), Some(cx)) => {
                aligned_view(nodes, m, cx, guards)
            }
            _ => op_vectorizable(nodes, (m, op), guards),
        },
    }
}

/// Whether view or window scatter `m` is computed four at a time where
/// its inputs can be (`None`), or cannot (`Some(false)`): a view whose
/// groups of four lie as aligned groups of its input (an attention
/// head's rows, a row-major slice from a multiple of four), and a
/// scatter into such a window, non-empty, whose groups of four are then
/// wholly inside or outside it; neither with a last dimension that
/// changes between the site's graphs. A single value viewed everywhere
/// is splatted (`Some(true)`).
fn aligned_view(
    nodes: &[GNode],
    m: usize,
    cx: &CodegenContext,
    guards: &mut Guards,
) -> Option<bool> {
    let changing = |n: usize| cx.last_dim_changes(n);
    let node = &nodes[m];
    let single = |n: usize, g: &mut Guards| {
        let one = elements(&Sz::shape(n, &nodes[n].shape));
        g.equals(&one, 1, "a single value splatted")
    };
    let aligned = match &node.kind {
        GKind::Op {
            op: Op::AsStrided(_),
            ..
        } if single(node.inputs[0], guards) => return Some(true),
        GKind::Op {
            op: Op::AsStrided(layout),
            ..
        } => {
            let (shape, layout) = (Sz::shape(m, &node.shape), SzLayout::of(m, layout));
            !changing(m)
                && (layout.row_major_in_fours(&shape, guards)
                    || layout.reads_in_aligned_fours(&shape, guards))
        }
        GKind::Op {
            op: Op::StridedScatter(layout),
            ..
        } => {
            let window = node.inputs[1];
            let (shape, layout) = (
                Sz::shape(window, &nodes[window].shape),
                SzLayout::of(m, layout),
            );
            !guards.equals(&elements(&shape), 0, "an empty window")
                && !changing(m)
                && !changing(window)
                && layout.reads_in_aligned_fours(&shape, guards)
        }
        _ => false,
    };
    match aligned {
        true => None,
        false => Some(false),
    }
}

/// The nodes an elementwise kernel computing `outputs` four elements at
/// a time (`are_roots`: computed, not read where they are stored) reads
/// one lane at a time (`Gen::gather_lanes`): those that cannot be
/// computed four at a time themselves (a transposed view, a column
/// broadcast, a mask made of `arange`s), each computed at its four
/// elements and gathered into a vector while the rest of the kernel
/// works on vectors. `None` where the kernel cannot work on vectors at
/// all: a 16-bit float on the vector path, an op that loops per element
/// (`gathers`), an input donated to an output (`aliased`) that would be
/// read a lane at a time from the output's vector binding, or a value
/// read both as vectors and a lane at a time (`x + x.t()`), which would
/// bind its buffer twice where the plan counted one binding.
///
/// One walk over the nodes on the vector path and one over those the
/// gathered lanes read, each node decided once.
pub(crate) fn lanes_gathered(
    nodes: &[GNode],
    (outputs, are_roots): (&[usize], bool),
    (stored, aliased): (&dyn Fn(usize) -> bool, &dyn Fn(usize) -> bool),
    (cx, guards): (&CodegenContext, &mut Guards),
) -> Option<Vec<usize>> {
    let loads = |m: usize, root: bool| read_from_memory(nodes, m, root, stored);
    let mut gathered = Vec::new();
    let mut vector_reads: rustc_hash::FxHashSet<usize> = Default::default();
    // Nodes whose inputs are read one element at a time: gathered ones,
    // and single values splatted.
    let mut by_element: Vec<(usize, bool)> = Vec::new();
    let mut seen: rustc_hash::FxHashSet<(usize, bool)> = Default::default();
    let mut stack: Vec<(usize, bool)> = outputs.iter().map(|&o| (o, are_roots)).collect();
    while let Some((m, root)) = stack.pop() {
        if !seen.insert((m, root)) {
            continue;
        }
        if nodes[m].dtype.is_half() {
            return None;
        }
        match computes_in_fours(nodes, m, stored, (root, Some(cx)), guards) {
            Some(true) if loads(m, root) && numel(&nodes[m].shape) > 1 => {
                vector_reads.insert(m);
            }
            Some(true) => by_element.push((m, root)),
            Some(false) if aliased(m) || !gathers(&nodes[m]) => return None,
            Some(false) => {
                gathered.push(m);
                by_element.push((m, root));
            }
            None => stack.extend(nodes[m].inputs.iter().map(|&i| (i, false))),
        }
    }
    // A value read one element at a time must not be read as vectors
    // too, nor be donated to an output (whose binding holds vectors).
    let read_both_ways = |m: usize| vector_reads.contains(&m) || aliased(m);
    let mut element_reads = by_element.iter().filter(|&&(m, root)| loads(m, root));
    if element_reads.any(|&(m, _)| read_both_ways(m)) {
        return None;
    }
    // What the element-at-a-time values read below them.
    let mut seen: rustc_hash::FxHashSet<usize> = Default::default();
    let mut stack: Vec<usize> = (by_element.iter())
        .filter(|&&(m, root)| !loads(m, root))
        .flat_map(|&(m, _)| nodes[m].inputs.iter().copied())
        .collect();
    while let Some(m) = stack.pop() {
        if !seen.insert(m) {
            continue;
        }
        match loads(m, false) {
            true if read_both_ways(m) => return None,
            true => {}
            false => stack.extend_from_slice(&nodes[m].inputs),
        }
    }
    gathered.sort_unstable();
    gathered.dedup();
    Some(gathered)
}

/// Whether op node `node` can be computed four elements at a time by
/// itself (`Some`), or `None`: when all its inputs can.
fn op_vectorizable(nodes: &[GNode], (m, op): (usize, &Op), guards: &mut Guards) -> Option<bool> {
    let node = &nodes[m];
    let sizes = |n: usize| Sz::shape(n, &nodes[n].shape);
    let splat = "a single value splatted";
    match op {
        Op::Scalar => Some(true),
        // A scalar viewed at every position (autograd's seed of
        // a sum's gradient) is splatted.
        Op::AsStrided(_) => Some(guards.equals(&elements(&sizes(node.inputs[0])), 1, splat)),
        // Four at a time only where a kernel takes aligned views
        // (`aligned_view`).
        Op::StridedScatter(_) => Some(false),
        Op::Arange
        | Op::Rand { .. }
        | Op::Reduce { .. }
        | Op::Softmax { .. }
        | Op::Matmul
        | Op::Normalize { .. }
        | Op::NormalizeBackward { .. }
        | Op::Attention { .. }
        | Op::Scan { .. }
        | Op::Sort { .. }
        | Op::MergeRuns { .. }
        | Op::TopkSelect { .. }
        | Op::RadixCount(_)
        | Op::RadixScatter(_)
        | Op::Pad(_)
        | Op::Flip(_)
        | Op::Gather(_)
        | Op::ScatterAdd(_)
        | Op::SortedScatterAdd(_)
        | Op::SortedStarts => Some(false),
        // A single value is splatted; rows broadcast along
        // leading dims are read a group of four at a time where
        // their own values can be (`Layout::reads_in_aligned_fours`).
        Op::Expand => {
            let (from, to) = (sizes(node.inputs[0]), sizes(m));
            if guards.equals(&elements(&from), 1, splat) {
                return Some(true);
            }
            let layout = SzLayout::contiguous(&from).expand(&from, &to, guards);
            match layout.reads_in_aligned_fours(&to, guards) {
                true => None,
                false => Some(false),
            }
        }
        Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast(_) | Op::Reshape => None,
    }
}

/// Whether a node that cannot be computed four at a time is computed a
/// lane at a time in a kernel that is (`lanes_gathered`): reads and
/// index arithmetic (views, padding, flips, gathers, `arange`, random
/// numbers), not the ops that loop over a run of their input per
/// element (sorted scatter-adds and their starts, scatter-adds), which
/// keep the kernel one element an invocation.
fn gathers(node: &GNode) -> bool {
    match &node.kind {
        GKind::Input { .. } => true,
        GKind::Op { op, .. } => matches!(
            op,
            Op::AsStrided(_)
                | Op::StridedScatter(_)
                | Op::Expand
                | Op::Pad(_)
                | Op::Flip(_)
                | Op::Gather(_)
                | Op::Arange
                | Op::Rand { .. }
        ),
    }
}
