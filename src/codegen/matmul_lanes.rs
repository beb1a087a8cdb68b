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
//!   K step) and every lane of a workgroup the same `R` rows;
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
//! views, so a transposed weight costs nothing extra) into `rgba32float`
//! textures, zero-padded to whole texels along K and N.

use std::fmt::Write;

use super::emit::Gen;
use super::matmul::{MatmulDims, matmul_dims, tile_load};
use super::roots::stores;
use super::wgsl::{CodegenContext, KernelSource, Launch, TextureUse, WORKGROUP_SIZE, kernel_main};
use crate::graph::GraphKey;
use crate::kernel::{LaneAdapter, LaneTile, Strategy};

/// Rows of the output a workgroup computes (at most): 32 `vec4`
/// accumulators per lane measured faster than 8 or 16.
const MAX_ROWS: usize = 32;
/// Lanes (each four columns) of a workgroup, at most.
const MAX_LANES: usize = 64;

/// How one operand lies in its texture array: per batch entry a `rows` x
/// `cols` matrix, four columns a texel, cut into blocks of `height` rows
/// and `width` texels, one layer each (layer = (entry * row blocks + row
/// block) * column blocks + column block), so that matrices taller or
/// wider than a texture still fit.
#[derive(Clone, Copy, Debug)]
struct Packing {
    node: usize,
    batch: usize,
    rows: usize,
    cols: usize,
    width: usize,
    height: usize,
    row_blocks: usize,
    col_blocks: usize,
}

impl Packing {
    fn layers(&self) -> usize {
        self.batch * self.row_blocks * self.col_blocks
    }
}

/// The kernel's geometry for one matmul.
struct Geometry {
    d: MatmulDims,
    batch: usize,
    /// Texels per row of A (K / 4 rounded up) and of B (N / 4).
    k4: usize,
    n4: usize,
    rows: usize,
    lanes: usize,
    tiles_m: usize,
    tiles_n: usize,
    a: Packing,
    b: Packing,
}

/// Lanes per workgroup for `n4` texels of columns: the power of two from
/// the subgroup size to 64 that leaves the fewest idle lanes in the last
/// column tile, the largest of those (144 texels: 16 lanes, not 64 with a
/// quarter idle).
fn lanes_for(n4: usize, subgroup: usize) -> usize {
    let mut best = subgroup;
    let mut lanes = subgroup;
    while lanes <= MAX_LANES.max(subgroup) {
        if n4.div_ceil(lanes) * lanes <= n4.div_ceil(best) * best {
            best = lanes;
        }
        lanes *= 2;
    }
    best
}

/// The largest multiple of `unit` that is at most `limit`, or `len` if
/// that fits whole.
fn block(len: usize, limit: usize, unit: usize) -> usize {
    if len <= limit {
        len
    } else {
        (limit / unit) * unit
    }
}

/// The workgroup tile for `m` rows and `n4` texels of columns: the
/// precedent's where it is one this adapter can run (any tile computes
/// any size), else rows up to 32 and `lanes_for`'s lanes.
fn tile_for(m: usize, n4: usize, s: usize, precedent: Option<Strategy>) -> LaneTile {
    if let Some(Strategy::Matmul {
        tile: Some(tile), ..
    }) = precedent
    {
        let rows_fit = tile.rows.is_multiple_of(s) && (s..=MAX_ROWS).contains(&tile.rows);
        let lanes_fit =
            tile.lanes.is_power_of_two() && (s..=MAX_LANES.max(s)).contains(&tile.lanes);
        if rows_fit && lanes_fit {
            return tile;
        }
    }
    LaneTile {
        rows: (m.div_ceil(s) * s).clamp(s, MAX_ROWS),
        lanes: lanes_for(n4, s),
    }
}

fn geometry(
    key: &GraphKey,
    root: usize,
    adapter: LaneAdapter,
    precedent: Option<Strategy>,
) -> Option<Geometry> {
    let d = matmul_dims(key, root);
    let s = adapter.subgroup;
    if s == 0 || s > MAX_ROWS || !s.is_power_of_two() || d.m * d.k * d.n == 0 {
        return None;
    }
    let batch = d.groups / d.tiles_mn.max(1);
    let (k4, n4) = (d.k.div_ceil(4), d.n.div_ceil(4));
    let LaneTile { rows, lanes } = tile_for(d.m, n4, s, precedent);
    let max = adapter.max_texture;
    // A's row blocks hold whole workgroup row tiles, B's column blocks
    // whole workgroup column tiles: a workgroup reads one layer of each.
    let a_height = block(d.m, max, rows);
    let b_width = block(n4, max, lanes);
    if k4 > max || k4 * 4 > max || a_height == 0 || b_width == 0 {
        return None;
    }
    let a = Packing {
        node: d.a,
        batch,
        rows: d.m,
        cols: d.k,
        width: k4,
        height: a_height,
        row_blocks: d.m.div_ceil(a_height),
        col_blocks: 1,
    };
    let b = Packing {
        node: d.b,
        batch,
        rows: d.k,
        cols: d.n,
        width: b_width,
        height: k4 * 4,
        row_blocks: 1,
        col_blocks: n4.div_ceil(b_width),
    };
    if a.layers() > adapter.max_layers || b.layers() > adapter.max_layers {
        return None;
    }
    Some(Geometry {
        batch,
        k4,
        n4,
        rows,
        lanes,
        tiles_m: d.m.div_ceil(rows),
        tiles_n: n4.div_ceil(lanes),
        a,
        b,
        d,
    })
}

/// The lane matmul of `root` writing `outputs` (the root's value is
/// `result` in their code), or `None` where its textures would pass the
/// adapter's limits (the caller then uses another kernel).
pub(super) fn matmul_lanes(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    outputs: &[usize],
    stored: &dyn Fn(usize) -> bool,
    adapter: LaneAdapter,
) -> Option<LaneMatmul> {
    let geo = geometry(key, root, adapter, g.context().precedent(root))?;
    let Geometry {
        batch,
        k4,
        n4,
        rows,
        lanes,
        tiles_m,
        tiles_n,
        a,
        b,
        ..
    } = geo;
    let (m, n) = (geo.d.m, geo.d.n);
    let s = adapter.subgroup;
    let st = stores(g, key, (root, outputs), "idx", "result");
    let LaneRegisters {
        decl,
        fetch_a,
        inner,
        gather,
    } = lane_registers(rows, s, m, &a);
    let tiles_mn = tiles_m * tiles_n;
    let groups = batch * tiles_mn;
    let main = format!(
        "\n{head}\
         // Whole workgroups left together above: every lane here takes part in the broadcasts.\n\
         let bi = gi / {tiles_mn}u;\n\
         let tm = (gi % {tiles_mn}u) / {tiles_n}u;\n\
         let tn = gi % {tiles_n}u;\n\
         let c4 = tn * {lanes}u + lid;\n\
         let bc = min(c4, {last_n4}u);\n\
         let bx = bc % {bw}u;\n\
         let bl = bi * {b_blocks}u + bc / {bw}u;\n\
         let i0 = tm * {rows}u;\n\
         {decl}\
         for (var k4 = 0u; k4 < {k4}u; k4 = k4 + 1u) {{\n\
             let b0 = textureLoad(tb, vec2<u32>(bx, k4 * 4u), bl, 0);\n\
             let b1 = textureLoad(tb, vec2<u32>(bx, k4 * 4u + 1u), bl, 0);\n\
             let b2 = textureLoad(tb, vec2<u32>(bx, k4 * 4u + 2u), bl, 0);\n\
             let b3 = textureLoad(tb, vec2<u32>(bx, k4 * 4u + 3u), bl, 0);\n\
         {fetch_a}{inner}\
         }}\n\
         var accs = array<vec4<f32>, {rows}>({gather});\n\
         for (var r = 0u; r < {rows}u; r = r + 1u) {{\n\
             for (var q = 0u; q < 4u; q = q + 1u) {{\n\
                 let row = i0 + r;\n\
                 let col = c4 * 4u + q;\n\
                 if (row < {m}u && col < {n}u) {{\n\
                     let idx = bi * {mn}u + row * {n}u + col;\n\
                     let result = accs[r][q];\n{st}                }}\n\
             }}\n\
         }}\n}}\n",
        head = kernel_main(
            lanes,
            false,
            groups,
            ", @builtin(subgroup_invocation_id) sid: u32"
        ),
        last_n4 = n4 - 1,
        bw = b.width,
        b_blocks = b.col_blocks,
        mn = m * n,
        gather = gather.join(", "),
    );
    let cx = g.context();
    let packs = vec![pack(key, stored, &cx, &a, 0), pack(key, stored, &cx, &b, 1)];
    let size = |p: &Packing| (p.width as u32, p.height as u32, p.layers() as u32);
    Some(LaneMatmul {
        main,
        groups,
        tile: LaneTile { rows, lanes },
        packs,
        scratch: vec![size(&a), size(&b)],
    })
}

/// The names the lane matmul reads its packed operands by (scratch
/// textures 0 and 1).
pub(super) const LANE_OPERANDS: [&str; 2] = ["ta", "tb"];

/// The statements of a lane matmul's register block (see `lane_registers`).
struct LaneRegisters {
    /// Accumulators and the row, texel row and layer each lane fetches.
    decl: String,
    /// Per step of K: each lane's texel of A.
    fetch_a: String,
    /// Per step of K: each row's A broadcast from its lane, times B.
    inner: String,
    /// The accumulators, in row order.
    gather: Vec<String>,
}

/// The register block of a lane matmul of `rows` rows a workgroup, over
/// subgroups of `s` lanes, for an `m`-row A packed as `a`.
fn lane_registers(rows: usize, s: usize, m: usize, a: &Packing) -> LaneRegisters {
    let mut decl = String::new();
    let mut fetch_a = String::new();
    let mut inner = String::new();
    let mut gather = Vec::new();
    for r in 0..rows {
        let _ = writeln!(decl, "    var acc{r} = vec4<f32>(0.0);");
        gather.push(format!("acc{r}"));
    }
    // Lane `sid` fetches row i0 + h * S + sid of A (clamped: rows past M
    // are computed and never stored); its block and layer do not change
    // along K.
    for h in 0..rows / s {
        let _ = writeln!(
            decl,
            "    let ar{h} = min(i0 + {}u + sid, {}u);\n    \
             let ay{h} = ar{h} % {ah}u;\n    \
             let al{h} = bi * {}u + ar{h} / {ah}u;",
            h * s,
            m - 1,
            a.row_blocks,
            ah = a.height,
        );
        let _ = writeln!(
            fetch_a,
            "        let ah{h} = textureLoad(ta, vec2<u32>(k4, ay{h}), al{h}, 0);"
        );
    }
    for r in 0..rows {
        let _ = writeln!(
            inner,
            "        let a{r} = subgroupBroadcast(ah{}, {}u);\n        \
             acc{r} = acc{r} + a{r}.x * b0 + a{r}.y * b1 + a{r}.z * b2 + a{r}.w * b3;",
            r / s,
            r % s
        );
    }
    LaneRegisters {
        decl,
        fetch_a,
        inner,
        gather,
    }
}

/// A lane matmul's code and the kernels it needs first.
pub(super) struct LaneMatmul {
    pub main: String,
    pub groups: usize,
    /// A workgroup's output tile.
    pub tile: LaneTile,
    /// Kernels packing A into scratch texture 0 and B into 1.
    pub packs: Vec<KernelSource>,
    /// (width, height, layers) of each scratch texture array, in texels.
    pub scratch: Vec<(u32, u32, u32)>,
}

/// The kernel writing an operand into scratch texture `slot` as `p` says,
/// zero past the matrix (partial texels and blocks).
fn pack(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    cx: &CodegenContext,
    p: &Packing,
    slot: usize,
) -> KernelSource {
    let mut g = Gen::new(&key.nodes, stored, &[], cx);
    let (rows, cols, width, height) = (p.rows, p.cols, p.width, p.height);
    let texels = width * height * p.layers();
    let mut body = tile_load(
        &mut g,
        p.node,
        "",
        |q| format!("r < {rows}u && c + {q}u < {cols}u"),
        |q| format!("bi * {}u + r * {cols}u + c + {q}u", rows * cols),
        "let texel",
    );
    body.push_str("    textureStore(dst, vec2<u32>(x, y), layer, texel);\n");
    let main = format!(
        "\n{head}    \
         let x = gi % {width}u;\n    \
         let y = (gi / {width}u) % {height}u;\n    \
         let layer = gi / {plane}u;\n    \
         let bi = layer / {blocks}u;\n    \
         let r = ((layer / {col_blocks}u) % {row_blocks}u) * {height}u + y;\n    \
         let c = ((layer % {col_blocks}u) * {width}u + x) * 4u;\n{body}}}\n",
        head = kernel_main(WORKGROUP_SIZE as usize, true, texels, ""),
        plane = width * height,
        blocks = p.row_blocks * p.col_blocks,
        col_blocks = p.col_blocks,
        row_blocks = p.row_blocks,
    );
    let launch = Launch {
        groups: texels.div_ceil(WORKGROUP_SIZE as usize),
        strategy: Strategy::Pack,
        textures: vec![TextureUse {
            slot,
            write: true,
            name: "dst",
        }],
    };
    g.source(&main, (Vec::new(), false), &[], launch)
}
