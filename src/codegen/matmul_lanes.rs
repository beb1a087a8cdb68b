//! The matmul for CPU adapters (lavapipe): operands packed into textures,
//! the left one shared across a subgroup by broadcasts.
//!
//! Why not the tiled kernels: lavapipe runs a subgroup as the lanes of one
//! SIMD register, and turns every storage-buffer or workgroup-memory load
//! inside a loop into a loop over the lanes with a branch per lane, even
//! when all lanes read the same address. Texel fetches are gathers without
//! branches, and `subgroupBroadcast` of a constant lane is one shuffle. So:
//!
//! - each lane owns four adjacent output columns (one `vec4` texel of B per
//!   K step), or eight in a wide tile over a packed B (`LaneTile::texels`,
//!   `lane_tile::tile_for`), and every lane of a workgroup the same `R`
//!   rows;
//! - each K step of four, lane `s` fetches one texel of A (four K values
//!   of row `s` of a group of `S` rows, `S` the subgroup size) and the
//!   rows reach every lane by broadcast: one fetch per `S` rows instead of
//!   one per row.
//!
//! Measured on lavapipe for 1024^3 (a scratch probe of kernel variants on
//! raw wgpu, each run interleaved with the others): 45-53 ms against
//! 228-247 ms for the register-blocked workgroup-memory kernel; B read
//! from a storage buffer instead of a texture, 1.5x slower; A's rows
//! fetched by every lane instead of broadcast, 2.5x slower; A read from a
//! storage buffer as four scalars, 1.5x slower; 8 or 16 rows per
//! workgroup instead of 32, 1.1-1.3x slower.
//!
//! Packing is two small kernels that write the operands (through their
//! views) into `rgba32float` textures, zero-padded to whole texels along
//! K and N (`lane_packs`). Where a stored value lies in memory as the
//! texture holds it, a buffer-to-texture copy does a packing kernel's
//! work (lavapipe's texture stores are a loop over the lanes: a packing
//! kernel wrote ~100 M texels a second). A view of a stored transpose (a
//! transposed weight; an activation transposed for a weight gradient)
//! is packed as that transpose lies, so that it can be copied: A's
//! texels then hold four rows at one K, shared across the subgroup by
//! broadcasts as rows are (`transposed_a_step`), and B's texels four K
//! values of one column, transposed in registers (`transposed_b_rows`).
//! An A broadcast over the batch (a convolution's weights) is packed
//! once, its one matrix read by every batch entry. An operand whose packed copy would
//! be large or repeat its source (a convolution's windows as B; a weight
//! gradient's output gradient as A, where A is stored) is read in place
//! through its view instead (`lane_reads_a_in_place`,
//! `lane_reads_b_in_place`), so a matmul holds no copy of it; an A that
//! lies row-major in memory is read four K values a load
//! (`lane_operands::a_reads_vec4`).

use super::emit::{Gen, SplitOperand, SplitPart};
use super::lane_operands::{AOperand, a_operand, lies_in_memory, source_elements};
use super::lane_packs::{Packing, ScratchOperand, fits_transposed, packed_operands, packings};
use super::lane_tile::{MAX_ROWS, tile_for};
use super::matmul::{
    MatmulDims, MatmulSizes, OutputBlock, TileIds, VEC4, accumulators, add, below, both, fadd,
    fmul, last_of, lit, matmul_dims, matmul_size_exprs, modulo, over, plus, splat_lane,
    store_block, tile_ids, tile_load, times,
};
use super::wgsl::{CodegenContext, KernelSource};
use crate::graph::GraphKey;
use crate::kernel::ir::{Builtin, Expr, Inst, Ty};
use crate::kernel::{Entry, Guards, LaneAdapter, LaneTile, Strategy, Sz, lane_reads_b_in_place};

/// The kernel's geometry for one matmul.
struct Geometry {
    rows: usize,
    lanes: usize,
    /// Texels of columns a lane computes, side by side.
    texels: usize,
    a: Packing,
    b: Packing,
    /// Whether A is one matrix for every batch entry (packed once).
    a_shared: bool,
    /// Whether A is read in place through its view, not packed.
    a_in_place: bool,
    /// Where A, read in place, is read four K values a load: the stored
    /// node it lies in (`a_reads_vec4`).
    a_vec4: Option<usize>,
    /// Whether B is read in place through its view, not packed.
    b_in_place: bool,
    /// Whether A's texture holds A's transpose, as a stored value holds
    /// it (`stored_transposes`): a texel holds four rows at one K.
    a_transposed: bool,
    /// Whether B's texture holds B's transpose, as a stored value holds
    /// it: a texel holds four K values of one column.
    b_transposed: bool,
    /// The tests of sizes its choices recorded (`kernel::sizes`): its
    /// tile, and how it reads A and B.
    guards: Guards,
    /// `(batch, m, k, n)` as sizes, which the kernel's literals read.
    sizes: MatmulSizes,
}

fn geometry(
    cx: CodegenContext,
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    root: usize,
    adapter: LaneAdapter,
) -> Option<Geometry> {
    let precedent = cx.precedent(root);
    let d = matmul_dims(key, root);
    let s = adapter.subgroup;
    if s == 0 || s > MAX_ROWS || !s.is_power_of_two() || d.m * d.k * d.n == 0 {
        return None;
    }
    let batch = d.groups / d.tiles_mn.max(1);
    let sizes = matmul_size_exprs(key, (d.a, d.b));
    let (tile, b_in_place, mut guards) = tile_of(key, (&d, &sizes), s, precedent);
    let (rows, lanes, texels) = (tile.rows, tile.lanes, tile.texels);
    let AOperand {
        node: a_node,
        batch: a_batch,
        in_place: a_in_place,
        vec4: a_vec4,
        guards: a_guards,
    } = a_operand(key, stored, (&d, &sizes, batch, b_in_place), (&tile, cx));
    guards.extend(&a_guards);
    let in_place = (a_in_place, b_in_place);
    let (a_transposed, b_transposed) = stored_transposes(
        key,
        stored,
        (&d, &sizes),
        (batch, a_batch, in_place),
        (adapter, &mut guards),
    );
    let (a, b) = packings(
        (&d, &sizes, a_node),
        (batch, a_batch, lanes * texels, rows),
        ((a_transposed, b_transposed), in_place),
        (adapter, &mut guards),
    )?;
    let fits = "a packed operand's texture within the adapter's layers";
    if (!a_in_place && !guards.at_most(&a.1, adapter.max_layers, fits))
        || (!b_in_place && !guards.at_most(&b.1, adapter.max_layers, fits))
    {
        return None;
    }
    let (a, b) = (a.0, b.0);
    Some(Geometry {
        rows,
        lanes,
        texels,
        a,
        b,
        // One matrix read for a batch of them: `shared_matrix`'s.
        a_shared: a_batch != batch,
        a_in_place,
        a_vec4,
        b_in_place,
        a_transposed,
        b_transposed,
        guards,
        sizes,
    })
}

/// The workgroup tile of matmul `d` over subgroups of `s` lanes
/// (`tile_for`) and whether it reads B in place, with the guards of both
/// choices.
fn tile_of(
    key: &GraphKey,
    (d, (batch, m, k, n)): (&MatmulDims, &MatmulSizes),
    s: usize,
    precedent: Option<Strategy>,
) -> (LaneTile, bool, Guards) {
    let b_sizes = (&batch.mul(k).mul(n), &source_elements(key, d.b));
    let b_in_place = |rows: usize, guards: &mut Guards| {
        let row_tiles = m.div_ceil(&Sz::constant(rows));
        lane_reads_b_in_place(b_sizes, &row_tiles, guards)
    };
    let mut guards = Guards::default();
    let n4 = n.div_ceil(&Sz::constant(4));
    let tile = tile_for((m, &n4, batch), s, precedent, (&b_in_place, &mut guards));
    let b = b_in_place(tile.rows, &mut guards);
    (tile, b, guards)
}

/// Whether A's and B's textures hold their transposes
/// (`Geometry::a_transposed`, `b_transposed`): an operand packed (not
/// read in place) whose transpose a stored value holds row-major
/// (`lies_in_memory`), where its texture fits (`fits_transposed`); A also
/// a matrix per batch entry, over subgroups of whole quads of rows. The
/// choice rests on how the operand lies, not on its sizes (a copy where
/// they allow, else a packing kernel, fills the same texture), so a
/// site's kernel keeps its code as a length changes.
fn stored_transposes(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    (d, sizes): (&MatmulDims, &MatmulSizes),
    (batch, a_batch, (a_in_place, b_in_place)): (usize, usize, (bool, bool)),
    (adapter, guards): (LaneAdapter, &mut Guards),
) -> (bool, bool) {
    let (all, m, k, n) = sizes;
    let mut lies_transposed = |node, (rows, cols): (&Sz, &Sz)| {
        let matrices = ((all, rows, cols), true);
        lies_in_memory(key, stored, node, matrices, guards).is_some()
            && fits_transposed((rows, cols, all), adapter, guards)
    };
    let quads = adapter.subgroup.is_multiple_of(4);
    let a = !a_in_place && a_batch == batch && quads && lies_transposed(d.a, (m, k));
    let b = !b_in_place && lies_transposed(d.b, (k, n));
    (a, b)
}

/// Whether the lane matmul can compute `root` on `adapter` (its subgroup
/// size and textures; `matmul_lanes` is `None` exactly where not).
pub(super) fn lanes_fit(
    cx: CodegenContext,
    key: &GraphKey,
    root: usize,
    stored: &dyn Fn(usize) -> bool,
    adapter: LaneAdapter,
) -> bool {
    geometry(cx, key, stored, root, adapter).is_some()
}

/// The lane matmul of `root` writing `outputs`, or `None` where its
/// textures would pass the adapter's limits (the caller then uses
/// another kernel).
pub(super) fn matmul_lanes(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    outputs: &[usize],
    stored: &dyn Fn(usize) -> bool,
    adapter: LaneAdapter,
) -> Option<LaneMatmul> {
    let geo = geometry(g.context(), key, stored, root, adapter)?;
    g.guards.extend(&geo.guards);
    let Geometry {
        rows,
        lanes,
        texels,
        a_in_place,
        b_in_place,
        ..
    } = geo;
    let s = adapter.subgroup;
    let (all, m, k, n) = &geo.sizes;
    let (k4, n4) = (k.div_ceil(&Sz::constant(4)), n.div_ceil(&Sz::constant(4)));
    let tiles_m = m.div_ceil(&Sz::constant(rows));
    let tiles_n = n4.div_ceil(&Sz::constant(lanes * texels));
    let tiles_mn = tiles_m.mul(&tiles_n);
    let groups = all.mul(&tiles_mn);
    // Whole workgroups leave together at the entry's early return (`gi`
    // indexes workgroups): every lane here takes part in the broadcasts.
    let ids = tile_ids(g, &tiles_mn, &tiles_n);
    let columns = lane_columns(g, &geo, &ids);
    let i0 = g.emit("rfirst", Ty::U32, times(ids.tm.clone(), rows));
    let regs = lane_registers(g, (rows, s, &geo), (&ids, &i0));
    let k = g.fresh("kt");
    let b_rows: Vec<BRows> = (columns.iter())
        .map(|texel| b_reads(g, &geo, texel, &ids))
        .collect();
    let body = g.block(|g| lane_step(g, &regs, (&columns, &b_rows), &Expr::Var(k)));
    g.push(Inst::Loop {
        counter: k,
        count: Expr::size_u32(&k4),
        unroll: 1,
        body,
    });
    let block = OutputBlock {
        accs: regs.accs.concat(),
        rows,
        cols: 4 * texels,
        row0: i0,
        col0: times(columns[0].c4.clone(), 4),
        bi: ids.bi.clone(),
    };
    let vec4_out = store_block(g, key, (root, outputs), &block, (m, n));
    let entry = Entry {
        workgroup_size: lanes,
        per_invocation: false,
        count: Expr::size_u32(&groups),
        arrays: Vec::new(),
        subgroup_id: true,
    };
    let operands = [(&geo.a, !geo.a_in_place), (&geo.b, !geo.b_in_place)];
    let packed = packed_operands(key, stored, &g.context(), operands);
    Some(LaneMatmul {
        entry,
        body: g.take_body(),
        groups: groups.literal(),
        tile: LaneTile {
            rows,
            lanes,
            texels,
            a_in_place,
            a_vec4: geo.a_vec4.is_some(),
            b_in_place,
            a_transposed: geo.a_transposed,
            b_transposed: geo.b_transposed,
        },
        packs: packed.packs,
        scratch: packed.scratch,
        vec4_out,
    })
}

/// Where one of a lane's texels of output columns lies: texel column
/// `c4` of the output, and B's texel column `bx` and layer `bl` holding
/// it.
struct LaneColumns {
    c4: Expr,
    bx: Expr,
    bl: Expr,
}

/// Defines lane `lid`'s texels of columns in output tile `ids`, side by
/// side from texel `(tn lanes + lid) texels`, each clamped to the last
/// one for B's fetch (lanes past N compute and never store).
fn lane_columns(g: &mut Gen, geo: &Geometry, ids: &TileIds) -> Vec<LaneColumns> {
    let lane = add(times(ids.tn.clone(), geo.lanes), Expr::Local);
    let first = match geo.texels {
        1 => lane,
        texels => times(lane, texels),
    };
    let first = g.emit("ctex", Ty::U32, first);
    (0..geo.texels)
        .map(|t| {
            let c4 = match t {
                0 => first.clone(),
                _ => g.emit("ctex", Ty::U32, plus(first.clone(), t)),
            };
            texel_columns(g, geo, ids, c4)
        })
        .collect()
}

/// Where texel `c4` of the output's columns lies in B's texture.
fn texel_columns(g: &mut Gen, geo: &Geometry, ids: &TileIds, c4: Expr) -> LaneColumns {
    let n4 = geo.sizes.3.div_ceil(&Sz::constant(4));
    let bc = Expr::call(Builtin::Min, vec![c4.clone(), last_of(&n4)]);
    let bc = g.emit("bc", Ty::U32, bc);
    let bx = g.emit("bx", Ty::U32, modulo(bc.clone(), &geo.b.width));
    // B's texture has one row block (`Packing::rows_of_b`): its layer is
    // column block * batch + entry.
    let bl = add(times(over(bc, &geo.b.width), &geo.b.batch), ids.bi.clone());
    let bl = g.emit("bl", Ty::U32, bl);
    LaneColumns { c4, bx, bl }
}

/// A lane matmul's register block (see `lane_registers`).
struct LaneRegisters {
    /// The accumulators, in row order: per row, one per texel of the
    /// lane's columns.
    accs: Vec<Vec<Expr>>,
    /// Per group `h` of `s` rows: where each lane fetches its row
    /// `h * s + sid` of A.
    fetch: Vec<ARow>,
    /// Where A is read in place as sums (`Gen::split_operand`).
    a_split: Option<SplitOperand>,
    /// Subgroup size.
    s: usize,
}

/// Where a lane fetches its row of A, four K values a step.
enum ARow {
    /// Texel row `y` of layer `layer` of texture `ta` (A packed).
    Packed { y: Expr, layer: Expr },
    /// In place through A's view: element `(bi, row, 0)` of A, row-major
    /// (`start`), or that row's batch and row shares of A's source where
    /// the view is read as sums (`split`, see `LaneRegisters::a_split`).
    InPlace {
        node: usize,
        k: Sz,
        start: Expr,
        split: Option<SplitPart>,
    },
    /// In place, four K values a load (`a_reads_vec4`): group `start` of
    /// four elements of A's node is the row's first.
    InPlaceVec4 { node: usize, start: Expr },
    /// From texel column `x` of layer `layer` of texture `ta`, holding A's
    /// transpose (`Geometry::a_transposed`): at texel row `4 k4 + sid % 4`
    /// (zero past K), four rows at one K.
    Transposed { x: Expr, layer: Expr, k: Sz },
}

/// Declares the register block of a lane matmul of `rows` rows a
/// workgroup, over subgroups of `s` lanes, for A packed as `geo.a` or
/// read in place (`geo.a_in_place`), from row `i0` of batch entry
/// `ids.bi`.
fn lane_registers(
    g: &mut Gen,
    (rows, s, geo): (usize, usize, &Geometry),
    (ids, i0): (&TileIds, &Expr),
) -> LaneRegisters {
    let (a, in_place) = (&geo.a, geo.a_in_place);
    let (_, m, k, _) = &geo.sizes;
    // A shared by the batch has one entry.
    let bi = if geo.a_shared { lit(0) } else { ids.bi.clone() };
    let accs = (0..rows).map(|_| accumulators(g, geo.texels)).collect();
    let split = if in_place && geo.a_vec4.is_none() {
        g.split_operand(a.node, (m, k))
    } else {
        None
    };
    let batch = split.as_ref().map(|op| g.split_part(op, 0, &bi));
    // Lane `sid` fetches row i0 + h * S + sid of A (clamped: rows past M
    // are computed and never stored); its block and layer do not change
    // along K.
    let fetch = (0..rows / s)
        .map(|h| {
            if geo.a_transposed {
                // Rows `4 (sid / 4)` .. +3 of the group, whole texels of
                // the transpose's rows (groups start at multiples of 4).
                let x = add(
                    over(plus(i0.clone(), h * s), 4),
                    over(Expr::SubgroupLane, 4),
                );
                let x = Expr::call(
                    Builtin::Min,
                    vec![x, last_of(&m.div_ceil(&Sz::constant(4)))],
                );
                let x = g.emit("ax", Ty::U32, x);
                let layer = bi.clone();
                let k = k.clone();
                return ARow::Transposed { x, layer, k };
            }
            let row = add(plus(i0.clone(), h * s), Expr::SubgroupLane);
            let ar = g.emit(
                "ar",
                Ty::U32,
                Expr::call(Builtin::Min, vec![row, last_of(m)]),
            );
            if !in_place {
                let ay = g.emit("ay", Ty::U32, modulo(ar.clone(), &a.height));
                let al = add(times(bi.clone(), &a.row_blocks), over(ar, &a.height));
                let layer = g.emit("al", Ty::U32, al);
                return ARow::Packed { y: ay, layer };
            }
            if let Some(node) = geo.a_vec4 {
                // Row `ar`'s first group of four elements.
                let start = add(times(bi.clone(), &m.mul(k).div(4)), times(ar, &k.div(4)));
                let start = g.emit("astart", Ty::U32, start);
                return ARow::InPlaceVec4 { node, start };
            }
            let start = add(times(bi.clone(), &m.mul(k)), times(ar.clone(), k));
            let start = g.emit("astart", Ty::U32, start);
            let split = split.as_ref().zip(batch.as_ref()).map(|(op, batch)| {
                let row = g.split_part(op, 1, &ar);
                g.join_parts(&[batch, &row])
            });
            ARow::InPlace {
                node: a.node,
                k: k.clone(),
                start,
                split,
            }
        })
        .collect();
    LaneRegisters {
        accs,
        fetch,
        a_split: split,
        s,
    }
}

/// A lane's four K values `4 k4 .. +3` of its row of A, as a `vec4`
/// (zero past K).
fn a_values(g: &mut Gen, row: &ARow, a_split: Option<&SplitOperand>, k4: &Expr) -> Expr {
    let texel = match row {
        ARow::Packed { y, layer } => {
            let args = vec![k4.clone(), y.clone(), layer.clone()];
            Expr::call(Builtin::TextureLoad("ta"), args)
        }
        ARow::InPlaceVec4 { node, start } => {
            let at = g.emit("aat", Ty::U32, add(start.clone(), k4.clone()));
            g.value(*node, &at, false, true)
        }
        ARow::Transposed { x, layer, k } => {
            let y = add(times(k4.clone(), 4), modulo(Expr::SubgroupLane, 4));
            let y = g.emit("ak", Ty::U32, y);
            let ok = g.emit("ok", Ty::BOOL, below(y.clone(), k));
            let y = Expr::call(Builtin::Min, vec![y, last_of(k)]);
            let args = vec![x.clone(), y, layer.clone()];
            let texel = Expr::call(Builtin::TextureLoad("ta"), args);
            Expr::select(ok, texel, zero_vec4())
        }
        ARow::InPlace {
            node,
            k,
            start,
            split,
        } => {
            let c = g.emit("ac", Ty::U32, times(k4.clone(), 4));
            let in_bounds = |q| below(plus(c.clone(), q), k);
            match split.as_ref().zip(a_split) {
                Some((row, operand)) => {
                    let lanes = (0..4)
                        .map(|q| {
                            let ok = g.emit("ok", Ty::BOOL, in_bounds(q));
                            let col = g.split_part(operand, 2, &plus(c.clone(), q));
                            let v = g.split_value(operand, &[row, &col], ok.clone());
                            Expr::select(ok, v, Expr::F32(0))
                        })
                        .collect();
                    Expr::call(Builtin::Vec4, lanes)
                }
                None => {
                    let at = g.emit("aat", Ty::U32, add(start.clone(), c.clone()));
                    tile_load(g, *node, in_bounds, |q| plus(at.clone(), q))
                }
            }
        }
    };
    g.emit("ah", VEC4, texel)
}

/// Where a lane reads its four columns of B's rows.
enum BRows {
    /// From texture `tb` (B packed).
    Packed,
    /// From B's node through its view.
    InPlace(Box<InPlaceB>),
    /// From texture `tb`, holding B's transpose
    /// (`Geometry::b_transposed`): texel `(k4, c)` holds K values
    /// `4 k4` .. +3 of column `c`; the lane's four columns start at `col0`
    /// (clamped to the last of `n`), in layer `layer`.
    Transposed { col0: Expr, layer: Expr, n: Sz },
}

/// What a lane needs to read its columns of B in place: B's node and
/// sizes, and where its columns start in B's row-major elements.
struct InPlaceB {
    node: usize,
    k: Sz,
    n: Sz,
    /// The lane's first column.
    col0: Expr,
    /// Element `(bi, 0, col0)` of B, row-major.
    base: Expr,
    /// Where B is a view read as batch, row and column sums
    /// (`Gen::split_operand`): the node it views, the position of the
    /// lane's four columns of its batch entry there, and the rows' dims.
    split: Option<SplitB>,
}

/// B read in place through its view as sums (see `InPlaceB::split`).
struct SplitB {
    operand: SplitOperand,
    /// The lane's four columns' shares, with their batch entry's.
    columns: Vec<SplitPart>,
}

/// Where this lane reads its columns of B (see `BRows`).
fn b_reads(g: &mut Gen, geo: &Geometry, columns: &LaneColumns, ids: &TileIds) -> BRows {
    if geo.b_in_place {
        BRows::InPlace(Box::new(b_in_place_reads(g, geo, columns, ids)))
    } else if geo.b_transposed {
        let col0 = g.emit("bcol", Ty::U32, times(columns.c4.clone(), 4));
        let (layer, n) = (ids.bi.clone(), geo.sizes.3.clone());
        BRows::Transposed { col0, layer, n }
    } else {
        BRows::Packed
    }
}

/// Defines where this lane's columns of B start, for reading B in place.
fn b_in_place_reads(g: &mut Gen, geo: &Geometry, columns: &LaneColumns, ids: &TileIds) -> InPlaceB {
    let (_, _, k, n) = geo.sizes.clone();
    let col0 = g.emit("bcol", Ty::U32, times(columns.c4.clone(), 4));
    let base = add(times(ids.bi.clone(), &k.mul(&n)), col0.clone());
    let base = g.emit("bbase", Ty::U32, base);
    let split = g.split_operand(geo.b.node, (&k, &n)).map(|operand| {
        let batch = g.split_part(&operand, 0, &ids.bi);
        let columns = (0..4)
            .map(|q| {
                let column = g.split_part(&operand, 2, &plus(col0.clone(), q));
                g.join_parts(&[&batch, &column])
            })
            .collect();
        SplitB { operand, columns }
    });
    InPlaceB {
        node: geo.b.node,
        k,
        n,
        col0,
        base,
        split,
    }
}

/// Rows `4 k4` .. +3 of the lane's four columns of B, each a `vec4`:
/// texels of the packed B, four elements read in place (zero past K or
/// N), or transposed from texels of B's transpose.
fn rows_of_b(g: &mut Gen, b_rows: &BRows, columns: &LaneColumns, k4: &Expr) -> Vec<Expr> {
    let y = |q| plus(times(k4.clone(), 4), q);
    match b_rows {
        BRows::Packed => (0..4)
            .map(|q| {
                let args = vec![columns.bx.clone(), y(q), columns.bl.clone()];
                g.emit("b", VEC4, Expr::call(Builtin::TextureLoad("tb"), args))
            })
            .collect(),
        BRows::InPlace(b) => (0..4).map(|q| in_place_b_row(g, b, y(q))).collect(),
        BRows::Transposed { col0, layer, n } => transposed_b_rows(g, (col0, layer, n), k4),
    }
}

/// The lane's four columns of B's row `y`, read in place (zero past K or
/// N).
fn in_place_b_row(g: &mut Gen, b: &InPlaceB, y: Expr) -> Expr {
    let row = g.emit("by", Ty::U32, y);
    let in_bounds = |q| {
        both(
            below(row.clone(), &b.k),
            below(plus(b.col0.clone(), q), &b.n),
        )
    };
    let texel = match &b.split {
        Some(split) => {
            let row_part = g.split_part(&split.operand, 1, &row);
            let lanes = (0..4)
                .map(|q| {
                    let ok = g.emit("ok", Ty::BOOL, in_bounds(q));
                    let parts = [&row_part, &split.columns[q]];
                    let v = g.split_value(&split.operand, &parts, ok.clone());
                    Expr::select(ok, v, Expr::F32(0))
                })
                .collect();
            Expr::call(Builtin::Vec4, lanes)
        }
        None => {
            let at = add(b.base.clone(), times(row.clone(), &b.n));
            let at = g.emit("bat", Ty::U32, at);
            tile_load(g, b.node, in_bounds, |q| plus(at.clone(), q))
        }
    };
    g.emit("b", VEC4, texel)
}

/// One step of K (texel column `k4` of A, rows 4 `k4` .. +3 of B): four
/// rows of the lane's columns of B, each lane's texel of A per group of
/// rows, and per row its A broadcast from its lane, times B, into the
/// row's accumulator.
fn lane_step(
    g: &mut Gen,
    regs: &LaneRegisters,
    (columns, b_rows): (&[LaneColumns], &[BRows]),
    k4: &Expr,
) {
    let rows_of_b: Vec<Vec<Expr>> = (b_rows.iter().zip(columns))
        .map(|(b, texel)| rows_of_b(g, b, texel, k4))
        .collect();
    let fetched: Vec<Expr> = (regs.fetch.iter())
        .map(|row| a_values(g, row, regs.a_split.as_ref(), k4))
        .collect();
    if let Some(ARow::Transposed { .. }) = regs.fetch.first() {
        return transposed_a_step(g, regs, &fetched, &rows_of_b);
    }
    for (r, row_accs) in regs.accs.iter().enumerate() {
        let args = vec![fetched[r / regs.s].clone(), lit(r % regs.s)];
        let a = g.emit("a", VEC4, Expr::call(Builtin::SubgroupBroadcast, args));
        accumulate_row(g, row_accs, &|q| splat_lane(&a, q), &rows_of_b);
    }
}

/// A row's accumulators (one per texel of the lane's columns) after one
/// step of K: each plus the row's four A values (`a(q)`) times that
/// texel's four rows of B (`multiply_add`).
fn accumulate_row(
    g: &mut Gen,
    row_accs: &[Expr],
    a: &dyn Fn(usize) -> Expr,
    rows_of_b: &[Vec<Expr>],
) {
    for (acc, b) in row_accs.iter().zip(rows_of_b) {
        let sum = multiply_add(acc, (0..4).map(a), b);
        g.assign(acc, sum);
    }
}

/// `acc + a0 * b0 + a1 * b1 + a2 * b2 + a3 * b3`, in this order: a row's
/// accumulator after one step of K, its four A values (`a`) times B's
/// four rows of the lane's columns (`rows_of_b`).
fn multiply_add(acc: &Expr, a: impl Iterator<Item = Expr>, rows_of_b: &[Expr]) -> Expr {
    (a.zip(rows_of_b)).fold(acc.clone(), |sum, (a, b)| {
        fadd(sum, fmul(a, b.clone(), true), true)
    })
}

/// The step's accumulation where A's texels hold four rows at one K
/// (`ARow::Transposed`): per quad of rows, the texels of the four lanes
/// that fetched its K values (lane `4 quad + q` holds K value `q`), and
/// per row its component of each, times B, in the order of the other
/// layouts (so the sums are theirs).
fn transposed_a_step(g: &mut Gen, regs: &LaneRegisters, fetched: &[Expr], rows_of_b: &[Vec<Expr>]) {
    let s = regs.s;
    for (r0, acc_quad) in (0..).step_by(4).zip(regs.accs.chunks(4)) {
        let (group, quad) = (r0 / s, (r0 % s) / 4);
        let k_values: Vec<Expr> = (0..4)
            .map(|q| {
                let args = vec![fetched[group].clone(), lit(quad * 4 + q)];
                g.emit("a", VEC4, Expr::call(Builtin::SubgroupBroadcast, args))
            })
            .collect();
        for (j, row_accs) in acc_quad.iter().enumerate() {
            accumulate_row(g, row_accs, &|q| splat_lane(&k_values[q], j), rows_of_b);
        }
    }
}

/// Rows `4 k4` .. +3 of the lane's four columns of B, from B's stored
/// transpose (`BRows::Transposed`): a texel per column (clamped to the
/// last), transposed in registers.
fn transposed_b_rows(g: &mut Gen, (col0, layer, n): (&Expr, &Expr, &Sz), k4: &Expr) -> Vec<Expr> {
    let texels: Vec<Expr> = (0..4)
        .map(|j| {
            let c = Expr::call(Builtin::Min, vec![plus(col0.clone(), j), last_of(n)]);
            let args = vec![k4.clone(), c, layer.clone()];
            g.emit("bt", VEC4, Expr::call(Builtin::TextureLoad("tb"), args))
        })
        .collect();
    (0..4)
        .map(|q| {
            let row = texels.iter().map(|t| splat_lane(t, q)).collect();
            g.emit("b", VEC4, Expr::call(Builtin::Vec4, row))
        })
        .collect()
}

/// `vec4(0.0)`.
fn zero_vec4() -> Expr {
    Expr::Construct {
        ty: VEC4,
        x: Box::new(Expr::F32(0)),
    }
}

/// A lane matmul's kernel and the kernels it needs first.
pub(super) struct LaneMatmul {
    pub entry: Entry,
    pub body: Vec<Inst>,
    pub groups: usize,
    /// A workgroup's output tile.
    pub tile: LaneTile,
    /// Kernels packing A into scratch texture 0 and B into 1 (each
    /// with the copy that does its work, where one can).
    pub packs: Vec<KernelSource>,
    /// Each scratch texture array: (width, height, layers) in texels,
    /// and the name the kernel reads it by.
    pub scratch: Vec<ScratchOperand>,
    /// Whether the outputs are stored four elements at a time.
    pub vec4_out: bool,
}
