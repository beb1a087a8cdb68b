//! The cooperative-matrix matmul: `f16` products on the adapter's matrix
//! units (tensor cores, through wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX`),
//! 16x16x16 fragments of `f16` operands accumulated in `f32`.
//!
//! A workgroup computes a 64x64 output tile with four subgroups, one per
//! 32x32 quarter (2x2 fragments each). Each K step of 32 stages the A
//! tile (64 x 32) and the B tile (32 x 64) in workgroup memory as real
//! `f16`s, element by element through the same value path as the tiled
//! kernel (so views, broadcasts and fused prologues are read as there,
//! and elements past the matrix are zero); the subgroups load their
//! fragments from there. The accumulators are stored into an `f32`
//! output tile in workgroup memory, from which every invocation reads
//! its elements and stores them with the root's epilogue, as the other
//! matmul kernels do: a cooperative matrix has no element access in
//! WGSL, so the epilogue cannot run on it.

use super::emit::Gen;
use super::matmul::{
    TILE_M, TILE_N, TileIds, TiledDims, add, below, both, lit, modulo, over, tile_ids, tiled_dims,
    times,
};
use super::roots::store_outputs;
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::kernel::ir::{
    Builtin, CoopAccess, CoopMatrix, CoopMemory, CoopRole, Expr, Inst, Ty, Var,
};
use crate::kernel::{CoopAdapter, Entry, Sz, WorkgroupArray};

/// The output tile's side (rows and columns), as `matmul_dims` counts
/// workgroups.
const TILE: usize = 64;
const _: () = assert!(TILE == TILE_M && TILE == TILE_N);
/// The K elements staged per step.
const STEP: usize = 32;
/// A fragment's side.
const FRAG: usize = 16;
/// A subgroup's quarter of the output tile (its side).
const QUARTER: usize = 32;

/// The three workgroup arrays: the `f16` A tile (`TILE` rows of `STEP`),
/// the `f16` B tile (`STEP` rows of `TILE`) and the `f32` output tile
/// (`TILE` rows of `TILE`), row-major. A build with rows padded by 16
/// bytes (40, 72 and 68 elements apart) measured 1.8x slower on an H200
/// (46.5 against 25.9 ms for 4096^3) and failed the f64 test there (an
/// infinity's sign flipped in a 16^3 product); why it failed was not
/// found, and it was not kept.
struct CoopTiles {
    a: Var,
    b: Var,
    c: Var,
}

impl CoopTiles {
    fn arrays(&self) -> Vec<WorkgroupArray> {
        let array = |var, dtype, len| WorkgroupArray {
            var,
            element: Ty::scalar(dtype),
            len,
        };
        vec![
            array(self.a, DType::F16, TILE * STEP),
            array(self.b, DType::F16, STEP * TILE),
            array(self.c, DType::F32, TILE * TILE),
        ]
    }
}

/// A 16x16 fragment of `dtype` in `role`.
fn fragment(dtype: DType, role: CoopRole) -> CoopMatrix {
    CoopMatrix {
        size: FRAG,
        dtype,
        role,
    }
}

/// Element `offset` of workgroup array `var`, rows `stride` apart.
fn in_tile(var: Var, offset: Expr, stride: usize) -> CoopAccess {
    CoopAccess {
        memory: CoopMemory::Workgroup(var),
        offset,
        stride: lit(stride),
        row_major: true,
    }
}

/// `body(g, q)` for each `q` in `0..count` this invocation takes: `lid`,
/// `lid + threads`, ...
fn per_invocation(g: &mut Gen, (count, threads): (usize, usize), body: &dyn Fn(&mut Gen, &Expr)) {
    assert_eq!(count % threads, 0, "a tile's slots split evenly");
    let s = g.fresh("s");
    let inner = g.block(|g| {
        let q = g.emit("q", Ty::U32, add(Expr::Local, times(Expr::Var(s), threads)));
        body(g, &q);
    });
    g.push(Inst::Loop {
        counter: s,
        count: Expr::count(count / threads),
        unroll: 1,
        body: inner,
    });
}

/// `body(g, q)` for each `q` this invocation takes, as `per_invocation`,
/// written out rather than looped: each slot's load is then independent
/// of the others' in straight-line code, and the loads of a K step are
/// in flight together. Looped (presumably each load waited for before
/// the next), staging alone took 23.7 ms of a 4096^3 product on an H200
/// and the multiply-adds alone 2.1 ms; written out, the whole product
/// took 4.2 ms.
fn unrolled(g: &mut Gen, (count, threads): (usize, usize), body: &dyn Fn(&mut Gen, &Expr)) {
    assert_eq!(count % threads, 0, "a tile's slots split evenly");
    for s in 0..count / threads {
        let q = g.emit("q", Ty::U32, add(Expr::Local, lit(threads * s)));
        body(g, &q);
    }
}

/// What every part of the kernel reads: the product's sizes, the
/// workgroup's tiles and output tile, and its subgroup's quarter.
struct CoopKernel {
    d: TiledDims,
    threads: usize,
    tiles: CoopTiles,
    ids: TileIds,
    /// The first row and column of the subgroup's 32x32 quarter.
    qr: Expr,
    qc: Expr,
}

impl CoopKernel {
    /// Element offset of fragment (`i`, `j`) of the subgroup's quarter in
    /// a tile of rows `stride` apart.
    fn quarter_at(&self, (i, j): (usize, usize), stride: usize) -> Expr {
        add(
            times(add(self.qr.clone(), lit(FRAG * i)), stride),
            add(self.qc.clone(), lit(FRAG * j)),
        )
    }

    /// The four accumulators at zero: loaded from the output tile, zeroed
    /// first (WGSL has no zero constructor for cooperative matrices).
    fn zero_accumulators(&self, g: &mut Gen) -> Vec<Var> {
        let c = self.tiles.c;
        per_invocation(g, (TILE * TILE, self.threads), &|g, q| {
            g.push(Inst::SetElement {
                var: c,
                index: q.clone(),
                value: Expr::F32(0),
            });
        });
        g.push(Inst::Barrier);
        let mut accs = Vec::with_capacity(4);
        for i in 0..2 {
            for j in 0..2 {
                let var = g.fresh("acc");
                g.push(Inst::CoopLoad {
                    var,
                    matrix: fragment(DType::F32, CoopRole::C),
                    from: in_tile(c, self.quarter_at((i, j), TILE), TILE),
                });
                accs.push(var);
            }
        }
        accs
    }

    /// Stages the K step from `k0` of both operands in their tiles.
    fn stage_step(&self, g: &mut Gen, k0: &Expr) {
        let (d, ids) = (&self.d, &self.ids);
        let (m, k, n) = (&d.m, &d.k, &d.n);
        // A tile: row r, column c of the step is A[tm * 64 + r, k0 + c].
        unrolled(g, (TILE * STEP, self.threads), &|g, q| {
            let r = add(times(ids.tm.clone(), TILE), over(q.clone(), STEP));
            let row = g.emit("arow", Ty::U32, r);
            let col = g.emit("acol", Ty::U32, add(k0.clone(), modulo(q.clone(), STEP)));
            let at = add(
                times(ids.bi.clone(), &m.mul(k)),
                add(times(row.clone(), k), col.clone()),
            );
            let ok = both(below(row, m), below(col, k));
            stage(g, (d.a, self.tiles.a), (ok, at), q);
        });
        // B tile: row r, column c of the step is B[k0 + r, tn * 64 + c].
        unrolled(g, (STEP * TILE, self.threads), &|g, q| {
            let row = g.emit("brow", Ty::U32, add(k0.clone(), over(q.clone(), TILE)));
            let c = add(times(ids.tn.clone(), TILE), modulo(q.clone(), TILE));
            let col = g.emit("bcol", Ty::U32, c);
            let at = add(
                times(ids.bi.clone(), &k.mul(n)),
                add(times(row.clone(), n), col.clone()),
            );
            let ok = both(below(row, k), below(col, n));
            stage(g, (d.b, self.tiles.b), (ok, at), q);
        });
    }

    /// The staged step's products into `accs`: per 16 of its K, the
    /// quarter's two A and two B fragments, four multiply-adds.
    fn multiply_step(&self, g: &mut Gen, accs: &[Var]) {
        for kk in 0..STEP / FRAG {
            let a: Vec<Var> = (0..2)
                .map(|i| {
                    let var = g.fresh("fa");
                    let row = add(self.qr.clone(), lit(FRAG * i));
                    let at = add(times(row, STEP), lit(FRAG * kk));
                    g.push(Inst::CoopLoad {
                        var,
                        matrix: fragment(DType::F16, CoopRole::A),
                        from: in_tile(self.tiles.a, at, STEP),
                    });
                    var
                })
                .collect();
            let b: Vec<Var> = (0..2)
                .map(|j| {
                    let var = g.fresh("fb");
                    let at = add(lit(FRAG * kk * TILE), add(self.qc.clone(), lit(FRAG * j)));
                    g.push(Inst::CoopLoad {
                        var,
                        matrix: fragment(DType::F16, CoopRole::B),
                        from: in_tile(self.tiles.b, at, TILE),
                    });
                    var
                })
                .collect();
            for i in 0..2 {
                for j in 0..2 {
                    g.push(Inst::CoopMultiplyAdd {
                        acc: accs[i * 2 + j],
                        a: a[i],
                        b: b[j],
                    });
                }
            }
        }
    }

    /// The accumulators into the output tile, then each of its elements
    /// inside the product stored with the root's epilogue.
    fn store(&self, g: &mut Gen, accs: &[Var], (key, root, outputs): (&GraphKey, usize, &[usize])) {
        for i in 0..2 {
            for j in 0..2 {
                g.push(Inst::CoopStore {
                    var: accs[i * 2 + j],
                    to: in_tile(self.tiles.c, self.quarter_at((i, j), TILE), TILE),
                });
            }
        }
        g.push(Inst::Barrier);
        let (ids, (m, n)) = (&self.ids, (&self.d.m, &self.d.n));
        per_invocation(g, (TILE * TILE, self.threads), &|g, q| {
            let r = add(times(ids.tm.clone(), TILE), over(q.clone(), TILE));
            let row = g.emit("row", Ty::U32, r);
            let c = add(times(ids.tn.clone(), TILE), modulo(q.clone(), TILE));
            let col = g.emit("col", Ty::U32, c);
            let body = g.block(|g| {
                let at = add(times(ids.bi.clone(), &m.mul(n)), times(row.clone(), n));
                let idx = g.emit("idx", Ty::U32, add(at, col.clone()));
                let tile = Expr::index(Expr::Var(self.tiles.c), q.clone());
                let result = g.emit("result", Ty::F32, tile);
                store_outputs(g, key, (root, outputs), &idx, &result);
            });
            let cond = both(below(row, m), below(col, n));
            g.push(Inst::If { cond, body });
        });
    }
}

/// The cooperative-matrix matmul of `root` (an `f16` product) and its
/// epilogue `outputs`, for workgroups of four subgroups of `adapter`'s
/// size. Returns the entry, body and workgroups.
pub(super) fn matmul_coop(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    adapter: CoopAdapter,
) -> (Entry, Vec<Inst>, usize) {
    g.use_cooperative_matrices();
    let d = tiled_dims(key, root, TILE);
    let tiles = CoopTiles {
        a: g.fresh("ta"),
        b: g.fresh("tb"),
        c: g.fresh("tc"),
    };
    let ids = tile_ids(g, &d.tiles_mn, &d.tiles_n);
    let sg = g.emit("sg", Ty::U32, over(Expr::Local, adapter.subgroup));
    let qr = g.emit("qr", Ty::U32, times(over(sg.clone(), 2), QUARTER));
    let qc = g.emit("qc", Ty::U32, times(modulo(sg, 2), QUARTER));
    let kernel = CoopKernel {
        threads: 4 * adapter.subgroup,
        d,
        tiles,
        ids,
        qr,
        qc,
    };
    let accs = kernel.zero_accumulators(g);
    let step = g.fresh("ks");
    let body = g.block(|g| {
        let k0 = g.emit("kfirst", Ty::U32, times(Expr::Var(step), STEP));
        kernel.stage_step(g, &k0);
        g.push(Inst::Barrier);
        kernel.multiply_step(g, &accs);
        g.push(Inst::Barrier);
    });
    g.push(Inst::Loop {
        counter: step,
        count: Expr::size_u32(&kernel.d.k.div_ceil(&Sz::constant(STEP))),
        unroll: 1,
        body,
    });
    kernel.store(g, &accs, (key, root, outputs));
    let entry = Entry {
        workgroup_size: kernel.threads,
        per_invocation: false,
        count: Expr::size_u32(&kernel.d.groups),
        arrays: kernel.tiles.arrays(),
        subgroup_id: false,
    };
    (entry, g.take_body(), kernel.d.groups.literal())
}

/// Stages element `at` of `node` (zero where `ok` fails; index 0 is read
/// instead, so no load leaves the buffer) at slot `q` of the `f16` tile
/// `tile`.
fn stage(g: &mut Gen, (node, tile): (usize, Var), (ok, at): (Expr, Expr), q: &Expr) {
    let ok = g.emit("ok", Ty::BOOL, ok);
    let i = g.emit("i", Ty::U32, Expr::select(ok.clone(), at, lit(0)));
    let v = g.value(node, &i, false, false);
    let value = Expr::call(Builtin::ToF16, vec![Expr::select(ok, v, Expr::F32(0))]);
    g.push(Inst::SetElement {
        var: tile,
        index: q.clone(),
        value,
    });
}
