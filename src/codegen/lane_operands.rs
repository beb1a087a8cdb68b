//! Where the lane matmul's operands lie (`matmul_lanes`): the node a
//! view chain reads, a matrix shared by a batch, how many elements a
//! packed copy would repeat, and how A is read: packed, in place, or in
//! place four K values a load.

use super::matmul::{MatmulDims, MatmulSizes};
use super::wgsl::CodegenContext;
use crate::graph::op::Op;
use crate::graph::{GKind, GraphKey};
use crate::kernel::layouts::{SzLayout, elements};
use crate::kernel::{Guards, LaneTile, StoredView, Sz, lane_reads_a_in_place};

/// How a lane matmul reads its A operand.
pub(super) struct AOperand {
    /// The node read: A's, or the one matrix a batch shares
    /// (`shared_matrix`), packed or read once for every entry.
    pub node: usize,
    /// Matrices in `node`: 1 where shared.
    pub batch: usize,
    /// Whether the kernel reads `node` in place through its view.
    pub in_place: bool,
    /// Where A, read in place, is read four K values a load: the stored
    /// node it lies in (`a_reads_vec4`).
    pub vec4: Option<usize>,
    /// The tests of sizes its choice made (`kernel::sizes`).
    pub guards: Guards,
}

/// The node that `node`'s view chain (reshapes, broadcasts, strided
/// views) reads: what a packed copy of `node` copies from.
fn viewed(key: &GraphKey, mut node: usize) -> usize {
    while let GKind::Op {
        op: Op::Reshape | Op::Expand | Op::AsStrided(_),
        ..
    } = key.nodes[node].kind
    {
        node = key.nodes[node].inputs[0];
    }
    node
}

/// Where A (`node`, `m` x `k` per batch entry) is one matrix broadcast
/// over the batch (a convolution's weights, shared by every sample): the
/// node holding that one matrix, packed once instead of per entry.
fn shared_matrix(
    key: &GraphKey,
    node: usize,
    (m, k): (&Sz, &Sz),
    guards: &mut Guards,
) -> Option<usize> {
    let n = &key.nodes[node];
    let shared = "a matrix shared by the batch";
    match &n.kind {
        GKind::Op { op: Op::Expand, .. } => {
            let src = n.inputs[0];
            let matrix = elements(&Sz::shape(src, &key.nodes[src].shape));
            guards
                .equals_size(&matrix, &m.mul(k), shared)
                .then_some(src)
        }
        // A stored tensor broadcast by its layout: its entry 0 is the one
        // matrix.
        GKind::Input { layout, .. } => {
            let batch_dims = n.shape.len().saturating_sub(2);
            let strides = SzLayout::of(node, layout).strides;
            let broadcast = (strides[..batch_dims].iter()).all(|s| guards.equals(s, 0, shared));
            (batch_dims > 0 && broadcast).then_some(node)
        }
        _ => None,
    }
}

/// The node whose elements `node`'s view chain reads from memory: past
/// views and constant pads (a padded value's border is computed per
/// read, never stored, so a convolution's windows over a padded input
/// hold only the input).
fn read_source(key: &GraphKey, node: usize) -> usize {
    let mut node = viewed(key, node);
    while let GKind::Op { op: Op::Pad(_), .. } = key.nodes[node].kind {
        node = viewed(key, key.nodes[node].inputs[0]);
    }
    node
}

/// Elements of the node that `node`'s view chain reads (`read_source`):
/// of a stored input read through a layout (a view of it bound as its
/// own input), those its layout reaches at most.
pub(super) fn source_elements(key: &GraphKey, node: usize) -> Sz {
    let source = read_source(key, node);
    let n = &key.nodes[source];
    match &n.kind {
        GKind::Input { layout, .. } => Sz::reached(source, layout.elements_reached(&n.shape)),
        GKind::Op { .. } => Sz::elements(source, &n.shape),
    }
}

/// How a lane matmul reads A (see `AOperand`), given its sizes
/// (`matmul_size_exprs`), the site's precedent tile (`kept`: which read
/// it chose at the site's first sizes), whether the kernel reads B in
/// place, and which sizes change between the site's graphs (`cx`).
pub(super) fn a_operand(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    (d, sizes, batch, b_in_place): (&MatmulDims, &MatmulSizes, usize, bool),
    (kept, cx): (&LaneTile, CodegenContext),
) -> AOperand {
    let mut guards = Guards::default();
    let (all, m, k, _) = sizes;
    // An expand that is itself stored is read as it is: its source may
    // be released by then (the plan lists the expand as what is read).
    let shared = shared_matrix(key, d.a, (m, k), &mut guards)
        .filter(|&src| batch > 1 && (src == d.a || !stored(d.a)));
    let (node, a_batch) = shared.map_or((d.a, batch), |src| (src, 1));
    // An operand read as one matrix (a convolution's weights, shared by
    // the batch) is `Single` even in a batched matmul.
    let stored_view = match (stored(viewed(key, node)), a_batch) {
        (false, _) => StoredView::No,
        (true, 0 | 1) => StoredView::Single,
        (true, _) => StoredView::Batched,
    };
    // A's elements as the view packs them: a matrix, or one per entry.
    let entries = match a_batch == batch {
        true => all.clone(),
        false => Sz::constant(a_batch),
    };
    let view = entries.mul(m).mul(k);
    // A site's later sizes keep reading A in place where its precedent
    // did (valid at every size), so a smaller size that falls below the
    // packing threshold keeps the kernel's code and its generic kernel.
    // One way only: a site first seen packed that grows past the
    // threshold reads in place from then on, a recompile.
    let in_place = (kept.a_in_place && stored_view != StoredView::No)
        || lane_reads_a_in_place(
            (&view, &source_elements(key, node)),
            stored_view,
            &mut guards,
        );
    // A precedent that read A in place one value a load keeps doing so,
    // and so does an A whose contraction is a length that changes between
    // the site's graphs or that the user marked dynamic (attention's
    // probabilities times its values contract over the sequence): the
    // four-at-a-time read holds only for a K divisible by four, so each
    // step would otherwise compile again where the length's remainder
    // changes (`CodegenContext::rows_stay_in_fours`, the guard of every
    // four-at-a-time read). Fixed rows are read four at a time, a batch
    // of them too (a convolution's weight gradient reads the output
    // gradient's rows, one per channel of each sample): on lavapipe the
    // MNIST CNN's 64 x 288 weight gradient took 33-37 ms a step instead
    // of 42-45 (`LAZYWGPU_PROFILE`, alternated, an AMD EPYC's lavapipe).
    let scalar_precedent = kept.a_in_place && !kept.a_vec4;
    let rows_fixed = cx.rows_stay_in_fours(d.a, k, &mut guards);
    // A value that B reads in place too (`x @ x.T`) is read one way, so
    // that it takes the bindings the plan counted for it.
    let b_reads = |v: usize| b_in_place && read_source(key, d.b) == read_source(key, v);
    let vec4 = a_reads_vec4(key, stored, node, (k, a_batch != batch), &mut guards)
        .filter(|&v| in_place && !scalar_precedent && rows_fixed && !b_reads(v));
    AOperand {
        node,
        batch: a_batch,
        in_place,
        vec4,
        guards,
    }
}

/// Where a lane matmul reading A (`node`, K = `k`) in place can load
/// each lane's four K values as one `vec4`: the node to load from, where
/// A is f32, K a multiple of four, and `node` (past reshapes, which keep
/// the order of elements) is a stored value read as it lies in memory,
/// row-major from an offset divisible by four (so that every row starts
/// a group of four); of a matrix `shared` by the batch (read as entry 0)
/// and reached through no reshape (so that its last two dims are A's),
/// its rows.
/// On lavapipe a storage-buffer load inside a loop is a loop over the
/// lanes (a branch and a bounds test per lane), one per load: one `vec4`
/// load takes a quarter of the loops of four scalar ones (a 1024^3
/// product, A read in place: 66-68 ms before, 54-56 ms after, alternated
/// on a Xeon's lavapipe).
fn a_reads_vec4(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    a: usize,
    (k, shared): (&Sz, bool),
    guards: &mut Guards,
) -> Option<usize> {
    let mut node = a;
    while !stored(node)
        && let GKind::Op {
            op: Op::Reshape, ..
        } = key.nodes[node].kind
    {
        node = key.nodes[node].inputs[0];
    }
    let n = &key.nodes[node];
    let fours = "A read in place four K values a load";
    let laid_out = match &n.kind {
        GKind::Input { layout, .. } => {
            let (shape, layout) = (Sz::shape(node, &n.shape), SzLayout::of(node, layout));
            let rows_row_major = |g: &mut Guards| match layout.strides.len() {
                0 | 1 => false,
                r => {
                    g.equals_size(&layout.strides[r - 2], k, fours)
                        && g.equals(&layout.strides[r - 1], 1, fours)
                }
            };
            let row_major = layout.is_row_major(&shape, guards)
                || (shared && node == a && rows_row_major(guards));
            row_major && guards.multiple_of(&layout.offset, 4, fours)
        }
        GKind::Op { .. } => stored(node),
    };
    let f32 = n.dtype == crate::DType::F32;
    (f32 && guards.multiple_of(k, 4, fours) && laid_out).then_some(node)
}

/// Where `node`'s elements lie in a stored value's buffer: that value's
/// node and the layout of `node`'s elements in it, through reshapes
/// (`SzLayout::reshape`) and strided views, composed with the layout of
/// what they view (`SzLayout::through`: a weight bound as its transpose
/// and viewed back is row-major). `None` where a view's elements have no
/// one layout in the buffer, or `node` is computed in the kernel.
fn laid_out(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    node: usize,
    guards: &mut Guards,
) -> Option<(usize, SzLayout)> {
    let n = &key.nodes[node];
    let shape = Sz::shape(node, &n.shape);
    match &n.kind {
        GKind::Input { layout, .. } => Some((node, SzLayout::of(node, layout))),
        GKind::Op { .. } if stored(node) => Some((node, SzLayout::contiguous(&shape))),
        GKind::Op {
            op: op @ (Op::Reshape | Op::AsStrided(_)),
            ..
        } => {
            let source = n.inputs[0];
            let (base, layout) = laid_out(key, stored, source, guards)?;
            let source_shape = Sz::shape(source, &key.nodes[source].shape);
            let view = match op {
                Op::AsStrided(view) => SzLayout::of(node, view),
                _ => return Some((base, layout.reshape(&source_shape, &shape, guards)?)),
            };
            if layout.is_row_major(&source_shape, guards) {
                // The view's positions are the buffer's, from the source's
                // first element.
                let offset = layout.offset.add(&view.offset);
                return Some((base, SzLayout { offset, ..view }));
            }
            let through = (&layout, &source_shape[..]);
            Some((base, view.through(&shape, through, guards)?))
        }
        GKind::Op { .. } => None,
    }
}

/// Where matmul operand `node` (`batch` matrices of `rows` x `cols`,
/// f32) lies in a stored value's buffer with each matrix row-major (when
/// not `transposed`) or each matrix's transpose row-major: that value's
/// node and the element where the first matrix starts, a multiple of
/// four (one texel). Element (i, j) of entry `e` lies at `start + e *
/// rows * cols + i * cols + j`, or `... + j * rows + i` transposed.
pub(super) fn lies_in_memory(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    node: usize,
    ((batch, rows, cols), transposed): ((&Sz, &Sz, &Sz), bool),
    guards: &mut Guards,
) -> Option<(usize, usize)> {
    let n = &key.nodes[node];
    let dims = n.shape.len();
    if n.dtype != crate::DType::F32 || dims < 2 {
        return None;
    }
    let lies = "a stored value holding the texture's matrices";
    let shape = Sz::shape(node, &n.shape);
    if !guards.equals_size(&shape[dims - 2], rows, lies)
        || !guards.equals_size(&shape[dims - 1], cols, lies)
    {
        return None;
    }
    let (source, layout) = laid_out(key, stored, node, guards)?;
    // Entries one after another, each `rows * cols` elements.
    let mut entry_stride = rows.mul(cols);
    for d in (0..dims - 2).rev() {
        if !guards.at_most(&shape[d], 1, lies)
            && !guards.equals_size(&layout.strides[d], &entry_stride, lies)
        {
            return None;
        }
        entry_stride = entry_stride.mul(&shape[d]);
    }
    let (row_stride, col_stride) = match transposed {
        true => (Sz::constant(1), rows.clone()),
        false => (cols.clone(), Sz::constant(1)),
    };
    let mut steps = |len: &Sz, stride: &Sz, want: &Sz| {
        guards.equals(len, 1, lies) || guards.equals_size(stride, want, lies)
    };
    let matrix = steps(rows, &layout.strides[dims - 2], &row_stride)
        && steps(cols, &layout.strides[dims - 1], &col_stride);
    let whole = guards.equals_size(&entry_stride, &batch.mul(rows).mul(cols), lies);
    (whole && matrix && guards.multiple_of(&layout.offset, 4, lies))
        .then_some((source, layout.offset.literal()))
}
