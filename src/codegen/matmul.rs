//! Matmul kernels in workgroup memory (64x64 output tiles: 256
//! invocations of 4x4, or 64 of 8x8) and the tile loads the lane matmul
//! shares, built as IR: the tiles are workgroup arrays, each K step a
//! loop (unrolled where K passes the loop budget) between two barriers,
//! the accumulators `vec4` variables stored through one loop over the
//! invocation's outputs.

use super::emit::Gen;
use super::roots::{store_outputs, store_outputs_by};
use super::vectorize::vectorizable_over;
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::BinaryOp;
use crate::kernel::ir::{Arith, Builtin, Expr, Inst, Ty, Var};
use crate::kernel::{Entry, Guards, MatmulClass, Sz, WorkgroupArray, choose_vec4_out};

/// A `vec4<f32>`: a tile slot, a texel, an accumulator of four outputs.
pub(super) const VEC4: Ty = Ty::of(DType::F32, true);

/// The `u32` literal `n`.
pub(super) fn lit(n: usize) -> Expr {
    Expr::U32(n as u64)
}

/// A `u32` literal operand of the helpers below: a plain number, or a
/// size that keeps its provenance (`Expr::Sized`).
pub(super) trait Lit {
    fn lit(self) -> Expr;
}

impl Lit for usize {
    fn lit(self) -> Expr {
        Expr::U32(self as u64)
    }
}

impl Lit for &Sz {
    fn lit(self) -> Expr {
        Expr::size_u32(self)
    }
}

/// `n - 1` as a literal (`n` at least one).
pub(super) fn last_of(n: &Sz) -> Expr {
    Expr::size_u32(&n.sub(&Sz::constant(1)))
}

/// `a + b`.
pub(super) fn add(a: Expr, b: Expr) -> Expr {
    Expr::arith(Arith::Add, a, b)
}

/// `a + n`, or `a` itself for `n == 0`.
pub(super) fn plus(a: Expr, n: usize) -> Expr {
    if n == 0 { a } else { add(a, lit(n)) }
}

/// `a * n`.
pub(super) fn times(a: Expr, n: impl Lit) -> Expr {
    Expr::arith(Arith::Mul, a, n.lit())
}

/// `a / n`.
pub(super) fn over(a: Expr, n: impl Lit) -> Expr {
    Expr::arith(Arith::Div, a, n.lit())
}

/// `a % n`.
pub(super) fn modulo(a: Expr, n: impl Lit) -> Expr {
    Expr::arith(Arith::Rem, a, n.lit())
}

/// `a < n`.
pub(super) fn below(a: Expr, n: impl Lit) -> Expr {
    Expr::arith(Arith::Lt, a, n.lit())
}

/// `a && b`.
pub(super) fn both(a: Expr, b: Expr) -> Expr {
    Expr::arith(Arith::And, a, b)
}

/// `vec4<f32>(0.0)`: an accumulator's start.
pub(super) fn zero4() -> Expr {
    Expr::Construct {
        ty: VEC4,
        x: Box::new(Expr::F32(0)),
    }
}

/// `a * b` on `f32` values, four at a time when `vec`.
pub(super) fn fmul(a: Expr, b: Expr, vec: bool) -> Expr {
    f32_op(BinaryOp::Mul, a, b, vec)
}

/// `a + b` on `f32` values, four at a time when `vec`.
pub(super) fn fadd(a: Expr, b: Expr, vec: bool) -> Expr {
    f32_op(BinaryOp::Add, a, b, vec)
}

/// The graph's `op` on two `f32` values (`vec`: two `vec4`s).
fn f32_op(op: BinaryOp, a: Expr, b: Expr, vec: bool) -> Expr {
    Expr::f32_binary(op, a, b, vec)
}

/// Lane `q` of the `vec4` `v`, to scale a row of B by one element of A:
/// a scalar operand of a `vec4` product multiplies every lane (WGSL's
/// scalar-vector product, which the templates used: a splat first was
/// 1.04-1.07x slower on the 1024^3 matmul on lavapipe, in two sittings).
pub(super) fn splat_lane(v: &Expr, q: usize) -> Expr {
    Expr::index(v.clone(), lit(q))
}

/// The `vec4` of four elements of `node` (a matmul tile's slot, or a
/// texel the lane matmul packs): lane `q` at row-major index `index(q)`
/// when `in_bounds(q)`, else 0. A lane out of bounds reads index 0, so
/// that no load leaves the buffer.
pub(super) fn tile_load(
    g: &mut Gen,
    node: usize,
    in_bounds: impl Fn(usize) -> Expr,
    index: impl Fn(usize) -> Expr,
) -> Expr {
    let lanes = (0..4)
        .map(|q| {
            let ok = g.emit("ok", Ty::BOOL, in_bounds(q));
            let i = g.emit("i", Ty::U32, Expr::select(ok.clone(), index(q), lit(0)));
            let v = g.value(node, &i, false, false);
            Expr::select(ok, v, Expr::F32(0))
        })
        .collect();
    Expr::call(Builtin::Vec4, lanes)
}

/// The operands and sizes of a matmul root, and its 64x64 output tiles.
pub(super) struct MatmulDims {
    pub a: usize,
    pub b: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// Output tiles per batch entry.
    pub tiles_mn: usize,
    /// Workgroups: one per output tile of every batch entry.
    pub groups: usize,
}

/// The sizes `(batch, m, k, n)` of matmul `root`: `batch` products of
/// `m x k` by `k x n`.
fn matmul_sizes(key: &GraphKey, root: usize) -> (usize, usize, usize, usize) {
    let (a, b) = (key.nodes[root].inputs[0], key.nodes[root].inputs[1]);
    let a_shape = &key.nodes[a].shape;
    let r = a_shape.len();
    let batch = a_shape[..r - 2].iter().product();
    (
        batch,
        a_shape[r - 2],
        a_shape[r - 1],
        key.nodes[b].shape[r - 1],
    )
}

/// The operands, sizes and output tiles of matmul `root`.
pub(super) fn matmul_dims(key: &GraphKey, root: usize) -> MatmulDims {
    let (a, b) = (key.nodes[root].inputs[0], key.nodes[root].inputs[1]);
    let (batch, m, k, n) = matmul_sizes(key, root);
    let (tiles_m, tiles_n) = (m.div_ceil(TILE_M), n.div_ceil(TILE_N));
    MatmulDims {
        a,
        b,
        m,
        k,
        n,
        tiles_mn: tiles_m * tiles_n,
        groups: batch * tiles_m * tiles_n,
    }
}

/// A matmul's `(batch, m, k, n)` as sizes of its operands' dimensions
/// (`matmul_size_exprs`).
pub(super) type MatmulSizes = (Sz, Sz, Sz, Sz);

/// `matmul_sizes` of the product of `a` by `b`, as sizes of their
/// dimensions: `(batch, m, k, n)`.
pub(super) fn matmul_size_exprs(key: &GraphKey, (a, b): (usize, usize)) -> MatmulSizes {
    let (a_shape, b_shape) = (&key.nodes[a].shape, &key.nodes[b].shape);
    let r = a_shape.len();
    (
        Sz::dims_product(a, a_shape, 0..r - 2),
        Sz::dim(a, r - 2, a_shape[r - 2]),
        Sz::dim(a, r - 1, a_shape[r - 1]),
        Sz::dim(b, r - 1, b_shape[r - 1]),
    )
}

/// The operands and sizes of a tiled kernel's matmul (the tiled,
/// blocked and cooperative-matrix kernels), as sizes of its operands'
/// dimensions, and its output tiles of `tile` x `tile`.
pub(super) struct TiledDims {
    pub a: usize,
    pub b: usize,
    pub m: Sz,
    pub k: Sz,
    pub n: Sz,
    pub tiles_n: Sz,
    /// Output tiles per batch entry.
    pub tiles_mn: Sz,
    /// Workgroups: one per output tile of every batch entry.
    pub groups: Sz,
}

/// The `TiledDims` of matmul `root`, in output tiles `tile` on a side.
pub(super) fn tiled_dims(key: &GraphKey, root: usize, tile: usize) -> TiledDims {
    let (a, b) = (key.nodes[root].inputs[0], key.nodes[root].inputs[1]);
    let (batch, m, k, n) = matmul_size_exprs(key, (a, b));
    let side = Sz::constant(tile);
    let tiles_n = n.div_ceil(&side);
    let tiles_mn = m.div_ceil(&side).mul(&tiles_n);
    TiledDims {
        a,
        b,
        groups: batch.mul(&tiles_mn),
        m,
        k,
        n,
        tiles_n,
        tiles_mn,
    }
}

/// The class of matmul `root` (its dtype and sizes in buckets), which
/// picks its kernel where the target has one tuned for it.
pub(crate) fn matmul_class(key: &GraphKey, root: usize) -> MatmulClass {
    MatmulClass::of(key.nodes[root].dtype, matmul_sizes(key, root))
}

/// A workgroup's output tile: its batch entry `bi` and its tile row `tm`
/// and column `tn` (values defined at the top of the body).
pub(super) struct TileIds {
    pub bi: Expr,
    pub tm: Expr,
    pub tn: Expr,
}

/// Defines the batch entry and output tile of workgroup `gi`, for
/// `tiles_mn` tiles per entry in rows of `tiles_n`.
pub(super) fn tile_ids(g: &mut Gen, tiles_mn: &Sz, tiles_n: &Sz) -> TileIds {
    let bi = g.emit("bi", Ty::U32, over(Expr::Invocation, tiles_mn));
    let in_entry = modulo(Expr::Invocation, tiles_mn);
    let tm = g.emit("tm", Ty::U32, over(in_entry, tiles_n));
    let tn = g.emit("tn", Ty::U32, modulo(Expr::Invocation, tiles_n));
    TileIds { bi, tm, tn }
}

/// The workgroup arrays a tiled kernel stages its K steps in: A tile: 16
/// columns of 16 four-row groups; B tile: 16 rows of 16 four-column
/// groups.
struct Tiles {
    ta: Var,
    tb: Var,
}

impl Tiles {
    /// Fresh variables naming both tiles.
    fn new(g: &mut Gen) -> Tiles {
        Tiles {
            ta: g.fresh("ta"),
            tb: g.fresh("tb"),
        }
    }

    /// Their declarations, for `Entry::arrays`.
    fn arrays(&self) -> Vec<WorkgroupArray> {
        [self.ta, self.tb]
            .into_iter()
            .map(|var| WorkgroupArray {
                var,
                element: VEC4,
                len: TILE_K * 16,
            })
            .collect()
    }

    /// Slot `slot` of the A tile.
    fn a(&self, slot: Expr) -> Expr {
        Expr::index(Expr::Var(self.ta), slot)
    }

    /// Slot `slot` of the B tile.
    fn b(&self, slot: Expr) -> Expr {
        Expr::index(Expr::Var(self.tb), slot)
    }
}

/// Stages one K step (from column `k0` of A and row `k0` of B) of both
/// tiles in workgroup memory, by a workgroup of `threads` invocations
/// (256 / `threads` slots each). Slot `q` of A holds rows 4(q / 16) ..
/// +3 at column q % 16 of the step, slot `q` of B columns 4(q % 16) ..
/// +3 at row q / 16; each is one vec4.
fn tile_loads(
    g: &mut Gen,
    (d, tiles, ids): (&TiledDims, &Tiles, &TileIds),
    k0: &Expr,
    threads: usize,
) {
    for s in 0..(TILE_K * 16) / threads {
        let q = g.emit("q", Ty::U32, plus(Expr::Local, threads * s));
        stage_a(g, (d, tiles, ids), k0, &q);
        stage_b(g, (d, tiles, ids), k0, &q);
    }
}

/// Slot `q` of the A tile (see `tile_loads`): rows 4(q / 16) .. +3 of
/// the output tile at column `k0 + q % 16`, zero past A.
fn stage_a(g: &mut Gen, (d, tiles, ids): (&TiledDims, &Tiles, &TileIds), k0: &Expr, q: &Expr) {
    let (m, k) = (&d.m, &d.k);
    let akk = g.emit("akk", Ty::U32, modulo(q.clone(), TILE_K));
    let arow = times(over(q.clone(), TILE_K), 4);
    let arow = g.emit("arow", Ty::U32, add(times(ids.tm.clone(), TILE_M), arow));
    let acol = g.emit("acol", Ty::U32, add(k0.clone(), akk.clone()));
    let value = tile_load(
        g,
        d.a,
        |q| both(below(plus(arow.clone(), q), m), below(acol.clone(), k)),
        |q| {
            let row = times(plus(arow.clone(), q), k);
            add(add(times(ids.bi.clone(), &m.mul(k)), row), acol.clone())
        },
    );
    let index = add(times(akk, 16), over(q.clone(), TILE_K));
    let var = tiles.ta;
    g.push(Inst::SetElement { var, index, value });
}

/// Slot `q` of the B tile (see `tile_loads`): columns 4(q % 16) .. +3
/// of the output tile at row `k0 + q / 16`, zero past B.
fn stage_b(g: &mut Gen, (d, tiles, ids): (&TiledDims, &Tiles, &TileIds), k0: &Expr, q: &Expr) {
    let (k, n) = (&d.k, &d.n);
    let bkk = g.emit("bkk", Ty::U32, over(q.clone(), 16));
    let brow = g.emit("brow", Ty::U32, add(k0.clone(), bkk.clone()));
    let bcol = times(modulo(q.clone(), 16), 4);
    let bcol = g.emit("bcol", Ty::U32, add(times(ids.tn.clone(), TILE_N), bcol));
    let value = tile_load(
        g,
        d.b,
        |q| both(below(brow.clone(), k), below(plus(bcol.clone(), q), n)),
        |q| {
            let row = add(times(ids.bi.clone(), &k.mul(n)), times(brow.clone(), n));
            plus(add(row, bcol.clone()), q)
        },
    );
    let index = add(times(bkk, 16), modulo(q.clone(), 16));
    let var = tiles.tb;
    g.push(Inst::SetElement { var, index, value });
}

/// The loop over K in steps of `TILE_K`: each step stages both tiles
/// (`tile_loads`), waits for the workgroup, runs `k_step` (`multiply`
/// on its row `kk`) and waits again before the tiles are overwritten.
fn k_loop(
    g: &mut Gen,
    (d, tiles, ids): (&TiledDims, &Tiles, &TileIds),
    threads: usize,
    multiply: &dyn Fn(&mut Gen, &Expr),
) {
    let step = g.fresh("ks");
    let steps = d.k.div_ceil(&Sz::constant(TILE_K));
    let body = g.block(|g| {
        let k0 = g.emit("kfirst", Ty::U32, times(Expr::Var(step), TILE_K));
        tile_loads(g, (d, tiles, ids), &k0, threads);
        g.push(Inst::Barrier);
        let rows = k_step(g, &steps, multiply);
        g.push(rows);
        g.push(Inst::Barrier);
    });
    g.push(Inst::Loop {
        counter: step,
        count: Expr::size_u32(&steps),
        unroll: 1,
        body,
    });
}

/// The loop over the `TILE_K` rows of a K step (`kk`), `body` each: the
/// K steps and their rows are most of a matmul's loop iterations, so
/// where the `steps` of K make them pass the kernel's loop budget
/// (lavapipe: 65,535 for all loops of an invocation) the rows are
/// unrolled. The unroll is the fewest copies that fit, a power of two,
/// its bounds recorded as guards on the steps.
fn k_step(g: &mut Gen, steps: &Sz, body: &dyn Fn(&mut Gen, &Expr)) -> Inst {
    let budget = g.context().target.loop_budget(1);
    let unroll = match budget {
        Some(budget) => rows_unroll(steps, budget, &mut g.guards),
        None => 1,
    };
    let counter = g.fresh("kk");
    let body = g.block(|g| body(g, &Expr::Var(counter)));
    Inst::Loop {
        counter,
        count: Expr::count(TILE_K),
        unroll,
        body,
    }
}

/// The fewest copies of a K step's row (a power of two up to `TILE_K`)
/// for which `steps` steps of `TILE_K / unroll` iterations each, and the
/// steps themselves, stay within `budget`: each candidate's test of
/// `steps` recorded in `guards`, so that the unroll is the same wherever
/// they come out as they did.
fn rows_unroll(steps: &Sz, budget: usize, guards: &mut Guards) -> usize {
    let mut unroll = 1;
    while unroll < TILE_K {
        // `steps * (TILE_K / unroll + 1) <= budget`.
        let per_step = TILE_K / unroll + 1;
        if guards.at_most(
            steps,
            budget / per_step,
            "a K step's rows within the loop budget",
        ) {
            break;
        }
        unroll *= 2;
    }
    unroll
}

/// An invocation's block of outputs held in `vec4` accumulators:
/// `rows` x `cols` elements from (`row0`, `col0`) of batch entry `bi`,
/// `accs` row-major, `cols / 4` per row.
pub(super) struct OutputBlock {
    pub accs: Vec<Expr>,
    pub rows: usize,
    pub cols: usize,
    pub row0: Expr,
    pub col0: Expr,
    pub bi: Expr,
}

/// Stores `block` and its epilogue where it lies in the `m` x `n`
/// output: the accumulators gathered in a private array so that one loop
/// (not a copy of the epilogue per output: the blocked kernel has 64)
/// indexes them. Four elements a store where `stores_in_fours` (an
/// accumulator's four columns lie together in every output), else element
/// by element: on lavapipe each store and each load of the epilogue is a
/// loop over the lanes, so fours take a quarter of them. Returns whether
/// it stored fours (the outputs are then bound as `vec4`s). A site whose
/// earlier sizes stored one element at a time keeps doing so, and a
/// product whose rows change length between the site's graphs stores
/// elements (a length that is a multiple of four at one size may not be
/// at the next).
pub(super) fn store_block(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    block: &OutputBlock,
    (m, n): (&Sz, &Sz),
) -> bool {
    let accs = gather_accumulators(g, &block.accs);
    let cx = g.context();
    let last = Sz::last_dim_or(root, &key.nodes[root].shape, n.literal());
    let can = stores_in_fours(key, (root, outputs), (g.stored, &mut g.guards))
        && cx.rows_stay_in_fours(root, &last, &mut g.guards);
    let fours = choose_vec4_out(can, cx.precedent(root));
    let (i, j) = (g.fresh("i"), g.fresh("j"));
    let per_row = block.cols / 4;
    // Four columns a step where storing fours (no loop over them where
    // a row has one accumulator), else one.
    let (steps, step) = if fours { (per_row, 4) } else { (block.cols, 1) };
    let ej = (steps > 1).then_some(Expr::Var(j));
    let inner = g.block(|g| {
        let row = g.emit("row", Ty::U32, add(block.row0.clone(), Expr::Var(i)));
        let first = match ej.clone() {
            None => block.col0.clone(),
            Some(j) if step == 1 => add(block.col0.clone(), j),
            Some(j) => add(block.col0.clone(), times(j, step)),
        };
        let col = g.emit("col", Ty::U32, first);
        let body = g.block(|g| {
            let at = add(
                add(times(block.bi.clone(), &m.mul(n)), times(row.clone(), n)),
                col.clone(),
            );
            let element = StoredElement {
                accs,
                i,
                j: ej.clone(),
                per_row,
            };
            if fours {
                store_four(g, key, (root, outputs), at, element);
            } else {
                store_one(g, key, (root, outputs), at, element);
            }
        });
        let cond = both(below(row, m), below(col, n));
        g.push(Inst::If { cond, body });
    });
    let body = match &ej {
        Some(_) => vec![Inst::Loop {
            counter: j,
            count: Expr::count(steps),
            unroll: 1,
            body: inner,
        }],
        None => inner,
    };
    g.push(Inst::Loop {
        counter: i,
        count: Expr::count(block.rows),
        unroll: 1,
        body,
    });
    fours
}

/// `accs` gathered in a private array, declared here, so that a loop can
/// index them.
fn gather_accumulators(g: &mut Gen, accs: &[Expr]) -> Var {
    let array = g.fresh("accs");
    g.push(Inst::DeclareArray {
        var: array,
        element: VEC4,
        len: accs.len(),
    });
    for (e, acc) in accs.iter().enumerate() {
        g.push(Inst::SetElement {
            var: array,
            index: lit(e),
            value: acc.clone(),
        });
    }
    array
}

/// Where a stored output sits in a block's accumulators: array `accs`,
/// row `i`, and `j`: the row's group of four columns where storing fours
/// (`None`: the row's only group), else its column; `per_row`
/// accumulators a row.
struct StoredElement {
    accs: Var,
    i: Var,
    j: Option<Expr>,
    per_row: usize,
}

/// Stores the four outputs from element `at` (a multiple of four): the
/// row's accumulator of step `j` (`n` a multiple of four, so the four
/// columns lie together), as one `vec4` of every output.
fn store_four(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    at: Expr,
    e: StoredElement,
) {
    let idx = g.emit("quad", Ty::U32, over(at, 4));
    let slot = match e.j {
        Some(j) => add(times(Expr::Var(e.i), e.per_row), j),
        None => Expr::Var(e.i),
    };
    let result = g.emit("result", VEC4, Expr::index(Expr::Var(e.accs), slot));
    store_outputs_by(g, key, (root, outputs), (&idx, true), &result);
}

/// Stores the output at element `at`: column `j` of the row's
/// accumulators.
fn store_one(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    at: Expr,
    e: StoredElement,
) {
    let idx = g.emit("idx", Ty::U32, at);
    let ej = e.j.unwrap_or_else(|| lit(0));
    let (slot, lane) = if e.per_row == 1 {
        (Expr::Var(e.i), ej)
    } else {
        (
            add(times(Expr::Var(e.i), e.per_row), over(ej.clone(), 4)),
            modulo(ej, 4),
        )
    };
    let acc = Expr::index(Expr::Var(e.accs), slot);
    let result = g.emit("result", Ty::F32, Expr::index(acc, lane));
    store_outputs(g, key, (root, outputs), &idx, &result);
}

/// Whether a matmul's outputs, in rows of a multiple of four
/// (`CodegenContext::rows_stay_in_fours`: an accumulator's four columns,
/// which start at a multiple of four, then lie together and inside the
/// row), can be stored four columns at a time: f32, and an epilogue whose
/// every read lies at the output's position, is one splatted value, or
/// is a row broadcast along the leading dims read four at a time (a
/// bias; `vectorizable_over`).
fn stores_in_fours(
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    (stored, guards): (&dyn Fn(usize) -> bool, &mut Guards),
) -> bool {
    key.nodes[root].dtype == DType::F32
        && (outputs.iter())
            .all(|&o| o == root || vectorizable_over(&key.nodes, o, stored, root, guards))
}

/// `count` `vec4` accumulators starting at zero, declared here.
pub(super) fn accumulators(g: &mut Gen, count: usize) -> Vec<Expr> {
    (0..count)
        .map(|_| g.variable_of("acc", VEC4, zero4()))
        .collect()
}

/// The entry of a tiled kernel: `groups` workgroups of `threads`, one
/// per output tile, with the two tiles in workgroup memory.
fn tiled_entry(threads: usize, groups: &Sz, tiles: &Tiles) -> Entry {
    Entry {
        workgroup_size: threads,
        per_invocation: false,
        count: Expr::size_u32(groups),
        arrays: tiles.arrays(),
        subgroup_id: false,
    }
}

/// A 64x64-tiled matmul with 64 invocations of 8x8 outputs each (the
/// other kernel has 256 of 4x4). Per K step an invocation reads four vec4
/// from workgroup memory for 64 multiply-adds instead of two for 16, and
/// a workgroup has a quarter of the invocations to step through each
/// barrier: on lavapipe, where a workgroup runs as SIMD loops on one CPU
/// thread and a barrier splits the shader, this was 1.75x faster for
/// 1024^3 (228 vs 400 ms in one run). CPU adapters use it where the lane
/// kernel (`matmul_lanes`, 5x faster again) cannot: operands too large
/// for a texture, or no fixed subgroup size. Real GPUs keep the
/// 256-invocation kernel, which was the one measured on an H100.
pub(super) fn matmul_blocked(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    outputs: &[usize],
) -> ((Entry, Vec<Inst>, usize), bool) {
    let d = tiled_dims(key, root, TILE_M);
    let tiles = Tiles::new(g);
    let ids = tile_ids(g, &d.tiles_mn, &d.tiles_n);
    let ty = g.emit("ty", Ty::U32, over(Expr::Local, 8));
    let tx = g.emit("tx", Ty::U32, modulo(Expr::Local, 8));
    // c[2i + h]: row i of the invocation's 8, columns 4h .. 4h + 3.
    let c = accumulators(g, 16);
    let multiply = |g: &mut Gen, kk: &Expr| {
        let row = times(kk.clone(), 16);
        let slot = |g: &mut Gen, t: Expr, name| g.emit(name, VEC4, t);
        let a0 = slot(g, tiles.a(add(row.clone(), times(ty.clone(), 2))), "a");
        let a1 = tiles.a(plus(add(row.clone(), times(ty.clone(), 2)), 1));
        let a1 = slot(g, a1, "a");
        let b0 = slot(g, tiles.b(add(row.clone(), times(tx.clone(), 2))), "b");
        let b1 = slot(g, tiles.b(plus(add(row, times(tx.clone(), 2)), 1)), "b");
        let (a, b) = ([a0, a1], [b0, b1]);
        for i in 0..8 {
            for h in 0..2 {
                let product = fmul(splat_lane(&a[i / 4], i % 4), b[h].clone(), true);
                g.accumulate(&c[i * 2 + h], product);
            }
        }
    };
    k_loop(g, (&d, &tiles, &ids), 64, &multiply);
    let block = OutputBlock {
        accs: c,
        rows: 8,
        cols: 8,
        row0: add(times(ids.tm.clone(), TILE_M), times(ty, 8)),
        col0: add(times(ids.tn.clone(), TILE_N), times(tx, 8)),
        bi: ids.bi.clone(),
    };
    let fours = store_block(g, key, (root, outputs), &block, (&d.m, &d.n));
    let entry = tiled_entry(64, &d.groups, &tiles);
    ((entry, g.take_body(), d.groups.literal()), fours)
}

/// Output tile of a workgroup (rows, columns), and the K step.
pub(super) const TILE_M: usize = 64;
pub(super) const TILE_N: usize = 64;
const TILE_K: usize = 16;

/// The 64x64-tiled matmul with 256 invocations of 4x4 outputs (real
/// GPUs: measured on an H100). Returns the entry, body and workgroups.
pub(super) fn matmul(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    outputs: &[usize],
) -> ((Entry, Vec<Inst>, usize), bool) {
    let d = tiled_dims(key, root, TILE_M);
    let tiles = Tiles::new(g);
    let ids = tile_ids(g, &d.tiles_mn, &d.tiles_n);
    let ty = g.emit("ty", Ty::U32, over(Expr::Local, 16));
    let tx = g.emit("tx", Ty::U32, modulo(Expr::Local, 16));
    let acc = accumulators(g, 4);
    let multiply = |g: &mut Gen, kk: &Expr| {
        let row = times(kk.clone(), 16);
        let av = g.emit("av", VEC4, tiles.a(add(row.clone(), ty.clone())));
        let bv = g.emit("bv", VEC4, tiles.b(add(row, tx.clone())));
        for (i, acc) in acc.iter().enumerate() {
            g.accumulate(acc, fmul(splat_lane(&av, i), bv.clone(), true));
        }
    };
    k_loop(g, (&d, &tiles, &ids), 256, &multiply);
    let block = OutputBlock {
        accs: acc,
        rows: 4,
        cols: 4,
        row0: add(times(ids.tm.clone(), TILE_M), times(ty, 4)),
        col0: add(times(ids.tn.clone(), TILE_N), times(tx, 4)),
        bi: ids.bi.clone(),
    };
    let fours = store_block(g, key, (root, outputs), &block, (&d.m, &d.n));
    let entry = tiled_entry(256, &d.groups, &tiles);
    ((entry, g.take_body(), d.groups.literal()), fours)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unroll of a K step's rows, as guards on the steps, is the one
    /// the loop budget gave when the budget was divided by the steps:
    /// the fewest copies (a power of two) for which the rows of each step
    /// fit `(budget - steps) / steps` iterations.
    #[test]
    fn a_k_steps_rows_unroll_as_the_budget_divided_by_the_steps() {
        for budget in [64_511usize, 1_000, 100] {
            for steps in (1..80_000).step_by(13).chain([budget, budget + 1]) {
                let per_step = (budget.saturating_sub(steps) / steps).max(1);
                let want = match TILE_K <= per_step {
                    true => 1,
                    false => TILE_K.div_ceil(per_step).next_power_of_two(),
                };
                let mut guards = Guards::default();
                let got = rows_unroll(&Sz::dim(0, 1, steps), budget, &mut guards);
                assert_eq!(got, want, "{steps} steps, a budget of {budget}");
            }
        }
    }
}
