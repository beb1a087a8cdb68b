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

use super::roots::{MatmulDims, matmul_dims, stores};
use super::wgsl::{Gen, KernelSource, TextureUse};
use crate::graph::GraphKey;

/// Threads of a packing kernel's workgroup.
const PACK_WORKGROUP: usize = 256;
/// Rows of the output a workgroup computes (at most): 32 `vec4`
/// accumulators per lane measured faster than 8 or 16.
const MAX_ROWS: usize = 32;
/// Lanes (each four columns) of a workgroup, at most.
const MAX_LANES: usize = 64;

/// What the adapter offers the lane matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaneAdapter {
    /// The subgroup size, fixed for every pipeline (lavapipe: 8).
    pub subgroup: usize,
    /// Largest 2-D texture side.
    pub max_texture: usize,
}

/// The kernel's geometry for one matmul.
struct Geometry {
    d: MatmulDims,
    batch: usize,
    /// Texels per row of A's texture (K / 4 rounded up) and of B's (N / 4).
    k4: usize,
    n4: usize,
    rows: usize,
    lanes: usize,
    tiles_m: usize,
    tiles_n: usize,
}

fn geometry(key: &GraphKey, root: usize, adapter: LaneAdapter) -> Option<Geometry> {
    let d = matmul_dims(key, root);
    let s = adapter.subgroup;
    if s == 0 || s > MAX_ROWS || !s.is_power_of_two() {
        return None;
    }
    let batch = d.groups / d.tiles_mn.max(1);
    let (k4, n4) = (d.k.div_ceil(4), d.n.div_ceil(4));
    let rows = (d.m.div_ceil(s) * s).clamp(s, MAX_ROWS);
    let lanes = n4.next_power_of_two().clamp(s, MAX_LANES.max(s));
    let fits = |w: usize, h: usize| w <= adapter.max_texture && h <= adapter.max_texture;
    if !fits(k4, batch * d.m) || !fits(n4, batch * k4 * 4) || d.m * d.k * d.n == 0 {
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
        d,
    })
}

/// The lane matmul of `root` writing `outputs` (the root's value is
/// `result` in their code), or `None` where its textures would pass the
/// adapter's limits (the caller then uses another kernel). Returns the
/// kernel's `main`, its workgroups, its packing kernels and the textures
/// they share (width, height in texels).
pub(super) fn matmul_lanes(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    outputs: &[usize],
    stored: &dyn Fn(usize) -> bool,
    adapter: LaneAdapter,
) -> Option<LaneMatmul> {
    let geo = geometry(key, root, adapter)?;
    let Geometry {
        batch,
        k4,
        n4,
        rows,
        lanes,
        tiles_m,
        tiles_n,
        ..
    } = geo;
    let (m, n) = (geo.d.m, geo.d.n);
    let s = adapter.subgroup;
    let st = stores(g, key, root, outputs, "idx", "result");
    // Textures are bound after the buffers: params, reads, then writes.
    let base = g.uses_params() as usize
        + g.read_parts().iter().sum::<usize>()
        + outputs.iter().map(|&o| g.parts_of(o, false)).sum::<usize>();
    let mut decl = String::new();
    let mut fetch_a = String::new();
    let mut inner = String::new();
    let mut gather = Vec::new();
    for r in 0..rows {
        let _ = writeln!(decl, "    var acc{r} = vec4<f32>(0.0);");
        gather.push(format!("acc{r}"));
    }
    for h in 0..rows / s {
        let _ = writeln!(
            fetch_a,
            "        let ah{h} = textureLoad(ta, vec2<u32>(k4, min(arow + {}u, {}u)), 0);",
            h * s,
            batch * m - 1
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
    let tiles_mn = tiles_m * tiles_n;
    let groups = batch * tiles_mn;
    let main = format!(
        "\n@group(0) @binding({ta}) var ta: texture_2d<f32>;\n\
         @group(0) @binding({tb}) var tb: texture_2d<f32>;\n\
         @compute @workgroup_size({lanes})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) sid: u32) {{\n\
         let gi = wid.y * nwg.x + wid.x;\n\
         // Whole workgroups leave together: every lane that stays takes part in the broadcasts.\n\
         if (gi >= {groups}u) {{ return; }}\n\
         let bi = gi / {tiles_mn}u;\n\
         let tm = (gi % {tiles_mn}u) / {tiles_n}u;\n\
         let tn = gi % {tiles_n}u;\n\
         let c4 = tn * {lanes}u + lid;\n\
         let bx = min(c4, {last_n4}u);\n\
         let i0 = tm * {rows}u;\n\
         let arow = bi * {m}u + i0 + sid;\n\
         let brow = bi * {kp}u;\n\
         {decl}\
         for (var k4 = 0u; k4 < {k4}u; k4 = k4 + 1u) {{\n\
             let b0 = textureLoad(tb, vec2<u32>(bx, brow + k4 * 4u), 0);\n\
             let b1 = textureLoad(tb, vec2<u32>(bx, brow + k4 * 4u + 1u), 0);\n\
             let b2 = textureLoad(tb, vec2<u32>(bx, brow + k4 * 4u + 2u), 0);\n\
             let b3 = textureLoad(tb, vec2<u32>(bx, brow + k4 * 4u + 3u), 0);\n\
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
        ta = base,
        tb = base + 1,
        last_n4 = n4 - 1,
        kp = k4 * 4,
        mn = m * n,
        gather = gather.join(", "),
    );
    let a_tex = (k4 as u32, (batch * m) as u32);
    let b_tex = (n4 as u32, (batch * k4 * 4) as u32);
    let packs = vec![
        pack(key, stored, geo.d.a, batch, m, m, geo.d.k, 0),
        pack(key, stored, geo.d.b, batch, geo.d.k, k4 * 4, n, 1),
    ];
    Some(LaneMatmul {
        main,
        groups,
        packs,
        scratch: vec![a_tex, b_tex],
    })
}

/// A lane matmul's code and the kernels it needs first.
pub(super) struct LaneMatmul {
    pub main: String,
    pub groups: usize,
    /// Kernels packing A into scratch texture 0 and B into 1.
    pub packs: Vec<KernelSource>,
    /// (width, height) of each scratch texture, in texels.
    pub scratch: Vec<(u32, u32)>,
}

/// The kernel writing operand `node` (per batch entry `rows` x `cols`,
/// row-major) into scratch texture `slot`: texel (x, y) holds columns
/// 4x .. 4x+3 of row `y % padded_rows` of batch entry `y / padded_rows`,
/// zero past the matrix.
#[allow(clippy::too_many_arguments)]
fn pack(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    node: usize,
    batch: usize,
    rows: usize,
    padded_rows: usize,
    cols: usize,
    slot: usize,
) -> KernelSource {
    let mut g = Gen::new(&key.nodes, stored, &[], false);
    let width = cols.div_ceil(4);
    let texels = width * batch * padded_rows;
    let body = g.scoped(|g| {
        let lanes: Vec<String> = (0..4)
            .map(|q| {
                let ok = g.emit(
                    "ok",
                    "bool",
                    &format!("r < {rows}u && x * 4u + {q}u < {cols}u"),
                );
                let i = g.emit(
                    "i",
                    "u32",
                    &format!(
                        "select(0u, bi * {}u + r * {cols}u + x * 4u + {q}u, {ok})",
                        rows * cols
                    ),
                );
                let v = g.value(node, &i, false, false);
                format!("select(0.0, {v}, {ok})")
            })
            .collect();
        let _ = writeln!(
            g.body,
            "    textureStore(dst, vec2<u32>(x, y), vec4<f32>({}));",
            lanes.join(", ")
        );
    });
    let binding = g.uses_params() as usize + g.read_parts().iter().sum::<usize>();
    let mut wgsl = g.header(&[]);
    let _ = write!(
        wgsl,
        "@group(0) @binding({binding}) var dst: texture_storage_2d<rgba32float, write>;\n\
         \n@compute @workgroup_size({PACK_WORKGROUP})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32) {{\n    \
         let t = (wid.y * nwg.x + wid.x) * {PACK_WORKGROUP}u + lid;\n    \
         if (t >= {texels}u) {{ return; }}\n    \
         let x = t % {width}u;\n    \
         let y = t / {width}u;\n    \
         let bi = y / {padded_rows}u;\n    \
         let r = y % {padded_rows}u;\n{body}}}\n"
    );
    KernelSource {
        wgsl,
        uses_params: g.uses_params(),
        read_parts: g.read_parts(),
        write_parts: Vec::new(),
        reads: g.reads(),
        writes: Vec::new(),
        groups: texels.div_ceil(PACK_WORKGROUP),
        alias_violation: false,
        textures: vec![TextureUse { slot, write: true }],
        scratch: Vec::new(),
        packs: Vec::new(),
    }
}
