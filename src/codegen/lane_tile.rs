//! The lane matmul's tile and texture-block choices (`matmul_lanes`):
//! pure functions of the product's sizes, each with the measurement
//! behind it.

use crate::kernel::{Guards, LaneTile, Strategy, Sz};

/// Rows of the output a workgroup computes (at most), unless tall tiles
/// fit (`TALL_ROWS`): 32 `vec4` accumulators per lane measured faster
/// than 8 or 16.
pub(super) const MAX_ROWS: usize = 32;

/// Rows of a tall tile, where a product is large enough to keep every
/// thread busy with them (`rows_for`).
const TALL_ROWS: usize = 64;

/// Workgroups a product needs at `TALL_ROWS` rows a tile to take tall
/// tiles: enough that lavapipe's threads share them evenly.
const TALL_ROWS_MIN_GROUPS: usize = 64;

/// Lanes (each four columns) of a workgroup, at most.
const MAX_LANES: usize = 64;

/// Lanes per workgroup for `n4` texels of columns, `texels` a lane: the
/// power of two from the subgroup size to 64 that leaves the fewest idle
/// texels in the last column tile, the largest of those (144 texels one
/// a lane: 16 lanes, not 64 with a quarter idle).
fn lanes_for(n4: usize, subgroup: usize, texels: usize) -> usize {
    let mut best = subgroup;
    let mut lanes = subgroup;
    while lanes <= MAX_LANES.max(subgroup) {
        if padded(n4, lanes, texels) <= padded(n4, best, texels) {
            best = lanes;
        }
        lanes *= 2;
    }
    best
}

/// Texels of columns the column tiles of `lanes` lanes of `texels` each
/// cover, for `n4` of them.
fn padded(n4: usize, lanes: usize, texels: usize) -> usize {
    n4.div_ceil(lanes * texels) * lanes * texels
}

/// The largest multiple of `unit` that is at most `limit`, or `len` if
/// that fits whole (the test recorded in `guards`).
pub(super) fn block(len: &Sz, (limit, unit): (usize, usize), guards: &mut Guards) -> Sz {
    match guards.at_most(len, limit, "a texture block as long as its matrix") {
        true => len.clone(),
        false => Sz::constant((limit / unit) * unit),
    }
}

/// Texels of B's columns a layer of its texture holds where its blocks
/// are narrow (`b_block_width`): 256 bytes a texel row.
const B_BLOCK_TEXELS: usize = 16;

/// Layers of B's texture (batch entries times column blocks) at most for
/// narrow blocks: the gain was measured on unbatched products of up to
/// 16 blocks; larger textures keep the wide layout, unmeasured.
const B_BLOCK_LAYERS: usize = 64;

/// Texels of B's columns a layer of its texture holds, for `n4` texels
/// of columns in each of `batch` matrices: `B_BLOCK_TEXELS` where the
/// layers that takes stay within `B_BLOCK_LAYERS`, else the widest block
/// of whole workgroup column tiles that fits the texture (`max` texels,
/// `lanes` a tile).
///
/// Why narrow: a lane walks down its columns of B, one texel row per K
/// value. In a texture as wide as B, those rows lie a whole row of B
/// apart (4 KB for a 1024-wide B), a page a step, where a CPU's
/// prefetcher does not follow and every fetch waits on memory (19 % of a
/// 1024^3 product's samples sat on the two instructions after the fetch's
/// loads, `perf` on lavapipe). In blocks of 16 texels a subgroup's
/// columns lie in one 256-byte stream: the product's kernel ran 7-9 %
/// faster (44-46 ms against 48-50 ms); blocks of 32 or 64 texels gained
/// nothing.
pub(super) fn b_block_width(
    (n4, batch): (&Sz, &Sz),
    (max, lanes): (usize, usize),
    guards: &mut Guards,
) -> Sz {
    let layers = batch.mul(&n4.div_ceil(&Sz::constant(B_BLOCK_TEXELS)));
    let narrow = "B's texture in narrow blocks";
    if !guards.at_most(&layers, B_BLOCK_LAYERS, narrow) {
        return block(n4, (max, lanes), guards);
    }
    match guards.at_most(n4, B_BLOCK_TEXELS, narrow) {
        true => n4.clone(),
        false => Sz::constant(B_BLOCK_TEXELS),
    }
}

/// Rows a workgroup computes for `m` rows of `batch` products with
/// `tiles_n` column tiles, subgroup size `s` (a power of two at most
/// `MAX_ROWS`, as the lane matmul requires, so that it divides
/// `TALL_ROWS`): `TALL_ROWS` where that leaves at least
/// `TALL_ROWS_MIN_GROUPS` workgroups, else up to `MAX_ROWS`.
///
/// Why tall: each K step a lane fetches its four columns of B once for
/// every row of the tile, so 64 rows fetch B half as often as 32. That
/// counts most where B is read in place through a convolution's windows
/// (scalar loads, each a loop over the lanes on lavapipe): the MNIST
/// CNN's convolution and its weight gradient ran 10-15 % faster, a
/// 1024^3 product 7-8 % (a Xeon's lavapipe). Small products keep 32
/// rows: at 64, the CNN's `[64, 9216] @ [9216, 128]` was one workgroup
/// on one thread, three times slower.
///
/// Each test of the sizes is recorded in `guards`; below `MAX_ROWS` the
/// rows are the rounded count itself, so that count is pinned.
fn rows_for(m: &Sz, s: usize, (batch, tiles_n): (&Sz, &Sz), guards: &mut Guards) -> usize {
    let tall_groups = (batch.mul(&m.div_ceil(&Sz::constant(TALL_ROWS)))).mul(tiles_n);
    let tall = "tall tiles of the lane matmul";
    if guards.at_least(m, TALL_ROWS, tall)
        && guards.at_least(&tall_groups, TALL_ROWS_MIN_GROUPS, tall)
    {
        return TALL_ROWS;
    }
    let rounded = m.div_ceil(&Sz::constant(s)).times(s);
    if guards.at_least(&rounded, MAX_ROWS, "the lane matmul's rows a tile") {
        MAX_ROWS
    } else {
        guards
            .value(&rounded, "the lane matmul's rows a tile")
            .max(s)
    }
}

/// Whether B is read in place for tiles of so many rows, its tests
/// recorded in the guards given (`tile_for`).
pub(super) type BInPlace<'a> = &'a dyn Fn(usize, &mut Guards) -> bool;

/// Texels a lane computes in a wide tile (`tile_for`).
const WIDE_TEXELS: usize = 2;

/// The workgroup tile for `m` rows and `n4` texels of columns of `batch`
/// products: the precedent's where it is one this adapter can run (any
/// tile computes any size), else `rows_for`'s rows and `lanes_for`'s
/// lanes. Over a packed B (`b_in_place(rows)` false) a tile is made
/// wide, two texels a lane side by side (a tall tile with half the rows),
/// where that leaves no more idle texels than one a lane and a subgroup
/// of lanes.
///
/// Why wide: each K step a lane fetches one texel of B per texel of
/// columns and the subgroup one texel of A per `s` rows; 32 rows of two
/// texels fetch as many as 64 rows of one (the same 64 accumulators),
/// but a subgroup's two texels a lane cover a whole 16-texel block row
/// of B's texture. A 1024^3 product's kernel: 31.5-31.9 ms against
/// 42.4-45.0 ms for the tall tile, alternated in one process on raw
/// wgpu (2-core AMD EPYC, lavapipe on LLVM 15); the same two texels a
/// lane interleaved across the subgroup (lane `l` at `l` and `l + 64`),
/// 38.6-38.8 ms; 64 rows of four texels, 33-34 ms. Where B is read in
/// place (a convolution's windows) each texel of B is four scalar
/// loads, a loop over the lanes, so a tall tile stays tall there. The
/// baby GPT's products (32 rows a tile, `[768, 512] @ [512, 128]` and the
/// like) ran 3-18 % faster each (`LAZYWGPU_PROFILE`, two alternated
/// runs), its step 139, 141, 173, 143 ms against 154, 142, 180, 201 ms
/// one a lane (alternated); the MNIST CNN's step unchanged (174-182 ms
/// against 175-183 ms).
///
/// Each test of the sizes is recorded in `guards`. The lanes follow the
/// columns' texels closely (the fewest idle ones), so their count is
/// pinned; `b_in_place(rows, guards)` records its own.
pub(super) fn tile_for(
    (m, n4, batch): (&Sz, &Sz, &Sz),
    s: usize,
    precedent: Option<Strategy>,
    (b_in_place, guards): (BInPlace<'_>, &mut Guards),
) -> LaneTile {
    if let Some(Strategy::Matmul {
        tile: Some(tile), ..
    }) = precedent
    {
        let rows_fit = tile.rows.is_multiple_of(s) && (s..=TALL_ROWS).contains(&tile.rows);
        let lanes_fit =
            tile.lanes.is_power_of_two() && (s..=MAX_LANES.max(s)).contains(&tile.lanes);
        let texels_fit = (1..=WIDE_TEXELS).contains(&tile.texels);
        if rows_fit && lanes_fit && texels_fit {
            return tile;
        }
    }
    let n4 = guards.value(n4, "the lane matmul's lanes (by its columns)");
    let lanes = lanes_for(n4, s, 1);
    let tiles_n = Sz::constant(n4.div_ceil(lanes));
    let rows = rows_for(m, s, (batch, &tiles_n), guards);
    let wide_lanes = lanes_for(n4, s, WIDE_TEXELS);
    let wide = n4 >= WIDE_TEXELS * s
        && padded(n4, wide_lanes, WIDE_TEXELS) <= padded(n4, lanes, 1)
        && !b_in_place(rows, guards);
    let (rows, lanes, texels) = match wide {
        true => (rows.min(TALL_ROWS / WIDE_TEXELS), wide_lanes, WIDE_TEXELS),
        false => (rows, lanes, 1),
    };
    LaneTile {
        rows,
        lanes,
        texels,
        a_in_place: false,
        a_vec4: false,
        b_in_place: false,
        a_transposed: false,
        b_transposed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rows_for` of sizes that are constants.
    fn rows(m: usize, s: usize, (batch, tiles_n): (usize, usize)) -> usize {
        let [m, batch, tiles_n] = [m, batch, tiles_n].map(Sz::constant);
        rows_for(&m, s, (&batch, &tiles_n), &mut Guards::default())
    }

    /// `tile_for` of sizes that are constants.
    fn tile(
        (m, n4, batch): (usize, usize, usize),
        s: usize,
        precedent: Option<Strategy>,
        b_in_place: &dyn Fn(usize) -> bool,
    ) -> LaneTile {
        let [m, n4, batch] = [m, n4, batch].map(Sz::constant);
        let b_in_place = |rows: usize, _: &mut Guards| b_in_place(rows);
        let guards = &mut Guards::default();
        tile_for((&m, &n4, &batch), s, precedent, (&b_in_place, guards))
    }

    #[test]
    fn tall_tiles_only_where_they_leave_every_thread_work() {
        // A 1024^3 product: 16 row tiles of 64 by 4 column tiles.
        assert_eq!(rows(1024, 8, (1, 4)), TALL_ROWS);
        // The MNIST CNN's second convolution: 64 channels, a batch of 64.
        assert_eq!(rows(64, 8, (64, 9)), TALL_ROWS);
        // Its first linear layer's product: one workgroup at 64 rows.
        assert_eq!(rows(64, 8, (1, 1)), MAX_ROWS);
        // Fewer rows than a tall tile: whole subgroups up to 32.
        assert_eq!(rows(40, 8, (64, 64)), MAX_ROWS);
        assert_eq!(rows(20, 8, (64, 64)), 24);
        assert_eq!(rows(63, 32, (64, 64)), MAX_ROWS);
        // Exactly at the threshold, and one workgroup short of it.
        assert_eq!(rows(64 * 8, 8, (1, 8)), TALL_ROWS);
        assert_eq!(rows(64 * 7, 8, (1, 9)), MAX_ROWS);
    }

    #[test]
    fn tall_tiles_over_a_packed_b_are_made_wide() {
        let tiled = |in_place: bool| tile((1024, 256, 1), 8, None, &move |_| in_place);
        // A 1024^3 product: 32 rows of two texels a lane, 64 lanes (two
        // column tiles of 128 texels).
        let wide = tiled(false);
        assert_eq!((wide.rows, wide.texels, wide.lanes), (32, 2, 64));
        // B read in place: the tall tile, one texel a lane.
        let tall = tiled(true);
        assert_eq!((tall.rows, tall.texels, tall.lanes), (TALL_ROWS, 1, 64));
        // A product too small for tall tiles is made wide too: 32 rows,
        // 16 lanes of two texels (one column tile, as 32 lanes of one).
        let small = tile((64, 32, 1), 8, None, &|_| false);
        assert_eq!((small.rows, small.texels, small.lanes), (MAX_ROWS, 2, 16));
        // Fewer texels than two a lane of a subgroup: one a lane.
        let narrow = tile((1024, 15, 1), 8, None, &|_| false);
        assert_eq!(narrow.texels, 1);
        // 24 texels: three tiles of 8 lanes leave none idle, pairs would
        // leave 8: one a lane.
        let ragged = tile((64, 24, 1), 8, None, &|_| false);
        assert_eq!((ragged.texels, ragged.lanes), (1, 8));
        // 144 texels are 72 pairs: 8 lanes (9 tiles, none idle), as 16
        // lanes of one.
        let odd = tile((4096, 144, 1), 8, None, &|_| false);
        assert_eq!((odd.texels, odd.lanes), (2, 8));
    }

    #[test]
    fn the_wide_test_sizes_are_wide_for_every_subgroup_size() {
        // tests/lane_matmul.rs's products (rows, texels of columns, batch)
        // take two texels a lane whatever the adapter's subgroup size.
        let sizes = [(1024, 250, 1), (512, 127, 1), (512, 128, 1), (256, 64, 4)];
        for s in [8, 16, 32] {
            for size in sizes {
                let chosen = tile(size, s, None, &|_| false);
                assert_eq!(chosen.texels, 2, "{size:?} at subgroups of {s}");
            }
        }
    }

    #[test]
    fn b_blocks_are_narrow_while_their_layers_are_few() {
        let b_block_width = |n4: usize, batch: usize, texture| {
            let (n4, batch) = (Sz::dim(0, 1, n4), Sz::dim(0, 0, batch));
            b_block_width((&n4, &batch), texture, &mut Guards::default()).literal()
        };
        assert_eq!(b_block_width(256, 1, (16384, 64)), B_BLOCK_TEXELS);
        // Narrower than a block: the block is B's width.
        assert_eq!(b_block_width(10, 3, (16384, 16)), 10);
        // 64 layers at most: 1024 texels unbatched, or 256 in a batch of 4.
        assert_eq!(b_block_width(1024, 1, (16384, 64)), B_BLOCK_TEXELS);
        assert_eq!(b_block_width(256, 4, (16384, 64)), B_BLOCK_TEXELS);
        // One block more, or 5 x 16 layers: blocks as wide as the texture
        // allows.
        assert_eq!(b_block_width(1040, 1, (16384, 64)), 1040);
        assert_eq!(b_block_width(256, 5, (16384, 64)), 256);
        assert_eq!(b_block_width(40_000, 1, (16384, 64)), 16384);
    }

    #[test]
    fn a_precedent_tile_is_kept_where_the_subgroup_allows_it() {
        let tall = LaneTile {
            rows: TALL_ROWS,
            lanes: 64,
            texels: 1,
            a_in_place: true,
            a_vec4: false,
            b_in_place: false,
            a_transposed: false,
            b_transposed: false,
        };
        let precedent = |tile| {
            Some(Strategy::Matmul {
                kernel: crate::kernel::MatmulKernel::Tiled,
                tile: Some(tile),
                vec4_out: false,
            })
        };
        // A later, smaller size keeps the site's tall tile (and what it
        // read in place).
        let packed = |_| false;
        assert_eq!(tile((8, 2, 1), 8, precedent(tall), &packed), tall);
        let wide = LaneTile { texels: 2, ..tall };
        assert_eq!(tile((8, 2, 1), 8, precedent(wide), &packed), wide);
        // Rows past 64, lanes not a power of two, or more texels than
        // two: chosen afresh.
        for bad in [
            LaneTile { rows: 128, ..tall },
            LaneTile { lanes: 48, ..tall },
            LaneTile { texels: 4, ..tall },
        ] {
            let fresh = tile((8, 2, 1), 8, precedent(bad), &packed);
            assert_eq!((fresh.rows, fresh.lanes, fresh.a_in_place), (8, 8, false));
        }
    }
}
