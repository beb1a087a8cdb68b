//! Matmul kernels in workgroup memory (64x64 output tiles: 256
//! invocations of 4x4, or 64 of 8x8) and the tile loads the lane matmul
//! shares.

use std::fmt::Write;

use super::emit::Gen;
use super::wgsl::{bounded_loop, kernel_main};
use crate::graph::GraphKey;
use crate::kernel::ir::{Expr, Ty};

use super::roots::stores;

/// Code loading four elements of `node` into the vec4 `slot` (a matmul
/// tile's slot, or a texel the lane matmul packs): lane `q` at row-major
/// index `index(q)` when `in_bounds(q)`, else 0, after the `prelude` that
/// names the coordinates.
pub(super) fn tile_load(
    g: &mut Gen,
    node: usize,
    prelude: &str,
    in_bounds: impl Fn(usize) -> String,
    index: impl Fn(usize) -> String,
    slot: &str,
) -> String {
    g.scoped(|g| {
        let _ = writeln!(g, "{prelude}");
        let lanes: Vec<String> = (0..4)
            .map(|q| {
                let ok = g.emit("ok", Ty::BOOL, Expr::template(in_bounds(q)));
                let i = g.emit(
                    "i",
                    Ty::U32,
                    Expr::template(format!("select(0u, {}, {ok})", index(q))),
                );
                let v = g.value(node, &i, false, false);
                format!("select(0.0, {v}, {ok})")
            })
            .collect();
        let _ = writeln!(g, "    {slot} = vec4<f32>({});", lanes.join(", "));
    })
}

/// The operands and sizes of a matmul root, and its 64x64 output tiles.
pub(super) struct MatmulDims {
    pub a: usize,
    pub b: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub tiles_n: usize,
    /// Output tiles per batch entry.
    pub tiles_mn: usize,
    /// Workgroups: one per output tile of every batch entry.
    pub groups: usize,
}

pub(super) fn matmul_dims(key: &GraphKey, root: usize) -> MatmulDims {
    let (a, b) = (key.nodes[root].inputs[0], key.nodes[root].inputs[1]);
    let a_shape = &key.nodes[a].shape;
    let r = a_shape.len();
    let (m, k) = (a_shape[r - 2], a_shape[r - 1]);
    let n = key.nodes[b].shape[r - 1];
    let batch: usize = a_shape[..r - 2].iter().product();
    let (tiles_m, tiles_n) = (m.div_ceil(TILE_M), n.div_ceil(TILE_N));
    MatmulDims {
        a,
        b,
        m,
        k,
        n,
        tiles_n,
        tiles_mn: tiles_m * tiles_n,
        groups: batch * tiles_m * tiles_n,
    }
}

/// Code that stages one K step of both tiles in workgroup memory, by a
/// workgroup of `threads` invocations (256 / `threads` slots each). Slot
/// `q` of A holds rows 4(q / 16) .. +3 at column q % 16 of the step, slot
/// `q` of B columns 4(q % 16) .. +3 at row q / 16; each is one vec4.
fn tile_loads(g: &mut Gen, d: &MatmulDims, threads: usize) -> String {
    let (m, k, n) = (d.m, d.k, d.n);
    let mut loads = String::new();
    for s in 0..(TILE_K * 16) / threads {
        let load_a = tile_load(
            g,
            d.a,
            &format!(
                "    let q = lid + {}u;\n    let akk = q % {TILE_K}u;\n    let arow = tm * {TILE_M}u + (q / {TILE_K}u) * 4u;\n    let acol = k0 + akk;",
                threads * s
            ),
            |q| format!("arow + {q}u < {m}u && acol < {k}u"),
            |q| format!("bi * {}u + (arow + {q}u) * {k}u + acol", m * k),
            &format!("ta[akk * 16u + q / {TILE_K}u]"),
        );
        let load_b = tile_load(
            g,
            d.b,
            &format!(
                "    let q = lid + {}u;\n    let bkk = q / 16u;\n    let brow = k0 + bkk;\n    let bcol = tn * {TILE_N}u + (q % 16u) * 4u;",
                threads * s
            ),
            |q| format!("brow < {k}u && bcol + {q}u < {n}u"),
            |q| format!("bi * {}u + brow * {n}u + bcol + {q}u", k * n),
            "tb[bkk * 16u + q % 16u]",
        );
        loads.push_str(&format!("        {{\n{load_a}}}\n        {{\n{load_b}}}\n"));
    }
    loads
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
) -> (String, usize) {
    let d = matmul_dims(key, root);
    let (m, k, n, tiles_n, tiles_mn, groups) = (d.m, d.k, d.n, d.tiles_n, d.tiles_mn, d.groups);
    let loads = tile_loads(g, &d, 64);
    let st = stores(g, key, (root, outputs), "idx", "result");
    let mut inner = String::new();
    let mut decl = String::new();
    for i in 0..8 {
        for h in 0..2 {
            decl.push_str(&format!("    var c{i}_{h} = vec4<f32>(0.0);\n"));
            let av = format!("a{}.{}", i / 4, ["x", "y", "z", "w"][i % 4]);
            inner.push_str(&format!("            c{i}_{h} = c{i}_{h} + {av} * b{h};\n"));
        }
    }
    let mut gather = String::new();
    for i in 0..8 {
        gather.push_str(&format!("c{i}_0, c{i}_1, "));
    }
    let main = format!(
        "\nvar<workgroup> ta: array<vec4<f32>, {slots}>;\n\
         var<workgroup> tb: array<vec4<f32>, {slots}>;\n\
         {head}\
         let bi = gi / {tiles_mn}u;\n\
         let tm = (gi % {tiles_mn}u) / {tiles_n}u;\n\
         let tn = gi % {tiles_n}u;\n\
         let ty = lid / 8u;\n\
         let tx = lid % 8u;\n\
         {decl}\
         for (var k0 = 0u; k0 < {k}u; k0 = k0 + {TILE_K}u) {{\n\
         {loads}\
             workgroupBarrier();\n\
         {k_step}\
             workgroupBarrier();\n\
         }}\n\
         var accs = array<vec4<f32>, 16>({gather});\n\
         for (var i = 0u; i < 8u; i = i + 1u) {{\n\
             for (var j = 0u; j < 8u; j = j + 1u) {{\n\
                 let row = tm * {TILE_M}u + ty * 8u + i;\n\
                 let col = tn * {TILE_N}u + tx * 8u + j;\n\
                 if (row < {m}u && col < {n}u) {{\n\
                     let idx = bi * {mn}u + row * {n}u + col;\n\
                     let result = accs[i * 2u + j / 4u][j % 4u];\n{st}                }}\n\
             }}\n\
         }}\n}}\n",
        mn = m * n,
        slots = TILE_K * 16,
        k_step = k_step(
            g,
            k,
            &format!(
                "                 let a0 = ta[kk * 16u + ty * 2u];\n\
                 let a1 = ta[kk * 16u + ty * 2u + 1u];\n\
                 let b0 = tb[kk * 16u + tx * 2u];\n\
                 let b1 = tb[kk * 16u + tx * 2u + 1u];\n{inner}"
            )
        ),
        head = kernel_main(64, false, groups, ""),
    );
    (main, groups)
}

/// The loop over the `TILE_K` rows of a K step (`kk`), `body` each: the
/// K steps and their rows are most of a matmul's loop iterations, so
/// where `k` makes them pass the kernel's loop budget (lavapipe: 65,535
/// for all loops of an invocation) the rows are unrolled.
fn k_step(g: &Gen, k: usize, body: &str) -> String {
    let steps = k.div_ceil(TILE_K).max(1);
    let budget = g
        .context()
        .target
        .loop_budget(1)
        .map(|budget| (budget.saturating_sub(steps) / steps).max(1));
    let tile_k = format!("{TILE_K}u");
    bounded_loop(("kk", "0u", &tile_k, "1u"), TILE_K, budget, body)
}

/// Output tile of a workgroup (rows, columns), and the K step.
const TILE_M: usize = 64;
const TILE_N: usize = 64;
const TILE_K: usize = 16;

pub(super) fn matmul(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    outputs: &[usize],
) -> (String, usize) {
    let d = matmul_dims(key, root);
    let (m, k, n, tiles_n, tiles_mn, groups) = (d.m, d.k, d.n, d.tiles_n, d.tiles_mn, d.groups);
    let loads = tile_loads(g, &d, 256);
    let st = stores(g, key, (root, outputs), "idx", "result");
    let main = format!(
        "\n// A tile: 16 columns of 16 four-row groups; B tile: 16 rows of 16 four-column groups.\n\
         var<workgroup> ta: array<vec4<f32>, 256>;\n\
         var<workgroup> tb: array<vec4<f32>, 256>;\n\
         {head}\
         let bi = gi / {tiles_mn}u;\n\
         let tm = (gi % {tiles_mn}u) / {tiles_n}u;\n\
         let tn = gi % {tiles_n}u;\n\
         let ty = lid / 16u;\n\
         let tx = lid % 16u;\n\
         var acc0 = vec4<f32>(0.0);\n\
         var acc1 = vec4<f32>(0.0);\n\
         var acc2 = vec4<f32>(0.0);\n\
         var acc3 = vec4<f32>(0.0);\n\
         for (var k0 = 0u; k0 < {k}u; k0 = k0 + {TILE_K}u) {{\n\
         {loads}\
             workgroupBarrier();\n\
         {k_step}\
             workgroupBarrier();\n\
         }}\n\
         var accs = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);\n\
         for (var i = 0u; i < 4u; i = i + 1u) {{\n\
             for (var j = 0u; j < 4u; j = j + 1u) {{\n\
                 let row = tm * {TILE_M}u + ty * 4u + i;\n\
                 let col = tn * {TILE_N}u + tx * 4u + j;\n\
                 if (row < {m}u && col < {n}u) {{\n\
                     let idx = bi * {mn}u + row * {n}u + col;\n\
                     let result = accs[i][j];\n{st}                }}\n\
             }}\n\
         }}\n}}\n",
        mn = m * n,
        k_step = k_step(
            g,
            k,
            "                 let av = ta[kk * 16u + ty];\n\
                 let bv = tb[kk * 16u + tx];\n\
                 acc0 = acc0 + av.x * bv;\n\
                 acc1 = acc1 + av.y * bv;\n\
                 acc2 = acc2 + av.z * bv;\n\
                 acc3 = acc3 + av.w * bv;\n"
        ),
        head = kernel_main(256, false, groups, ""),
    );
    (main, groups)
}
