//! When the lane matmul (lavapipe's) packs an operand into a scratch
//! texture and when it reads the operand in place through its view:
//! texel fetches of a packed copy are faster, the copy is memory beside
//! its source while the kernel runs.

use super::sizes::{Guards, Sz};

/// How many times its source's size the packed copy of a lane matmul's
/// B operand may be before the kernel reads B in place instead.
pub(crate) const LANE_PACK_MAX_GROWTH: usize = 2;

/// Whether packing a lane matmul operand (`view_elements`, read through
/// a view of `source_elements`) would repeat its source many times over
/// (a convolution's windows): such an operand is read in place whatever
/// else is decided.
/// The test is recorded in `guards`.
pub(crate) fn lane_pack_repeats(
    view_elements: &Sz,
    source_elements: &Sz,
    guards: &mut Guards,
) -> bool {
    let copies = (source_elements.max(&Sz::constant(1))).times(LANE_PACK_MAX_GROWTH);
    !guards.at_most_size(
        view_elements,
        &copies,
        "an operand read in place (packing repeats it)",
    )
}

/// Whether a lane matmul reads its B operand in place (`view_elements`
/// elements, read through a view of `source_elements` ones, by
/// `row_tiles` workgroup row tiles) instead of packing it into a texture:
/// where the view reads its source many times over, as a convolution's
/// windows do (a 3x3 window reads each input element 9 times), the
/// packed copy is the im2col (663 MB for the MNIST CNN's evaluation
/// batch), and reading in place keeps the convolution in its input's,
/// weights' and output's memory; and where one row tile reads B once (a
/// weight gradient with as many rows as output channels) and the copy
/// is large enough to matter (`LANE_B_READ_ONCE_MIN_BYTES`), so it would
/// be written and read once, the cost of reading in place with none of
/// its gain (the U-Net's 1x1 skip convolution's weight gradient packed
/// 2.4 MB at the step's peak). Texel fetches of a packed B are faster
/// where the copy costs no more than its source and is read again. (A
/// stored B of a batched matmul read in place from 256 KiB, as A is, took
/// the U-Net's peak 0.6 MB lower but made the choice change between a
/// GPT step's sequence lengths, and its kernels stopped being generic
/// over them: `tests/dynamic_shapes.rs`.)
/// Each test is recorded in `guards`.
pub(crate) fn lane_reads_b_in_place(
    (view_elements, source_elements): (&Sz, &Sz),
    row_tiles: &Sz,
    guards: &mut Guards,
) -> bool {
    let once = "B read in place (read once by one row tile, large)";
    lane_pack_repeats(view_elements, source_elements, guards)
        || (guards.at_most(row_tiles, 1, once)
            && guards.at_least(&view_elements.times(4), LANE_B_READ_ONCE_MIN_BYTES, once))
}

/// Whether a lane matmul's operand is a view of a stored value (nothing
/// is computed per read, so reading it again costs no arithmetic), and
/// whether the matmul is batched (a convolution's: one matrix a sample
/// or a part of the batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StoredView {
    /// Computed in the matmul's prologue: packed once.
    No,
    /// Stored, one matrix.
    Single,
    /// Stored, a matrix per batch entry.
    Batched,
}

/// Bytes of a B operand read by one row tile from which a lane matmul
/// reads it in place rather than packing it (see `lane_reads_b_in_place`).
pub(crate) const LANE_B_READ_ONCE_MIN_BYTES: usize = 1 << 20;

/// Bytes of a batched lane matmul's packed operand, a view of a stored
/// value, from which the kernel reads it in place instead (see
/// `lane_reads_a_in_place`, `lane_reads_b_in_place`). A packed copy is
/// scratch memory beside its source for as long as the kernel runs; at
/// 4 MiB the ResNet's and U-Net's convolution gradients packed 0.3-0.8 MB
/// operands at their steps' peaks.
pub(crate) const LANE_BATCHED_PACK_MAX_BYTES: usize = 256 << 10;

/// Bytes of an unbatched lane matmul's packed A, a view of a stored
/// value, from which the kernel reads A in place instead.
pub(crate) const LANE_A_PACK_MAX_BYTES: usize = 4 << 20;

/// Whether a lane matmul reads its A operand (`view_elements` f32s,
/// read through a view of `source_elements` ones) in place instead of
/// packing it into a texture: only where A is a view of a stored value
/// (`stored_view`: nothing is computed per read, so reading again per
/// column tile costs no arithmetic), and where the packed copy would
/// either repeat its source (a convolution's weights broadcast over the
/// batch of an evaluation: 1,000 copies) or be large (a weight
/// gradient's output-gradient operand, as large as the activation).
/// Texel fetches of a packed A are faster per read; on lavapipe the MNIST
/// CNN's step ran no slower with its 9.4 MB operand read in place, and
/// its peak fell by that texture.
/// Each test is recorded in `guards`.
pub(crate) fn lane_reads_a_in_place(
    (view_elements, source_elements): (&Sz, &Sz),
    stored: StoredView,
    guards: &mut Guards,
) -> bool {
    let limit = match stored {
        StoredView::No => return false,
        StoredView::Single => LANE_A_PACK_MAX_BYTES,
        StoredView::Batched => LANE_BATCHED_PACK_MAX_BYTES,
    };
    lane_pack_repeats(view_elements, source_elements, guards)
        || guards.at_least(&view_elements.times(4), limit, "A read in place (large)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lane_reads_b_in_place` of sizes that are constants.
    fn b_in_place(view: usize, source: usize, row_tiles: usize) -> bool {
        let [view, source, row_tiles] = [view, source, row_tiles].map(Sz::constant);
        lane_reads_b_in_place((&view, &source), &row_tiles, &mut Guards::default())
    }

    /// `lane_reads_a_in_place` of sizes that are constants.
    fn a_in_place(view: usize, source: usize, stored: StoredView) -> bool {
        let [view, source] = [view, source].map(Sz::constant);
        lane_reads_a_in_place((&view, &source), stored, &mut Guards::default())
    }

    #[test]
    fn a_lane_matmul_packs_b_only_where_the_copy_is_small_and_read_again() {
        // A 3x3 convolution's windows: 9 reads of each input element.
        assert!(b_in_place(9 * 1000, 1000, 4));
        // A weight gradient with one row tile reads a 1x1 convolution's
        // input once: packing would copy 2.4 MB to read it once.
        let once = 600_000;
        assert!(b_in_place(once, once, 1));
        // Two row tiles read a packed B twice, from a copy no larger.
        assert!(!b_in_place(once, once, 2));
        // A small B read once is packed still: its copy costs no memory
        // that matters.
        assert!(!b_in_place(1000, 1000, 1));
    }

    #[test]
    fn a_lane_matmul_reads_a_stored_a_in_place_past_its_batched_or_single_limit() {
        use StoredView::*;
        let batched = LANE_BATCHED_PACK_MAX_BYTES / 4;
        let single = LANE_A_PACK_MAX_BYTES / 4;
        // A convolution's output gradient (a matrix per part of the batch).
        assert!(a_in_place(batched, batched, Batched));
        assert!(!a_in_place(batched - 1, batched, Batched));
        // One stored matrix keeps its packed copy up to 4 MiB.
        assert!(!a_in_place(batched, batched, Single));
        assert!(a_in_place(single, single, Single));
        // A broadcast repeating its source is read in place at any size;
        // a computed A never is.
        assert!(a_in_place(1000 * 9, 9, Single));
        assert!(!a_in_place(single, single, No));
    }
}
