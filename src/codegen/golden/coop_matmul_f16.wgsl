enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f16>;
@group(0) @binding(2) var<storage, read> in1: array<f16>;
@group(0) @binding(3) var<storage, read_write> out0: array<f16>;
// 16-bit floats in f32 registers. Rounding is done on the bits, so it is
// exact on every driver (WGSL leaves f32-to-f16 conversion of values out
// of f16's range undefined): to nearest, ties to even, overflow to
// infinity, NaN kept (as PyTorch's `.half()` and `.bfloat16()`).

// x rounded to the nearest f16, as an f32.
fn f16_round(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    let sign = b & 0x80000000u;
    if (a > 0x7f800000u) { return x; }
    // 65520 and above round to infinity.
    if (a >= 0x477ff000u) { return bitcast<f32>(sign | 0x7f800000u); }
    // Below 2^-14 f16 is subnormal: multiples of 2^-24, rounded half to
    // even by round() on an exact product.
    if (a < 0x38800000u) {
        let m = round(bitcast<f32>(a) * 16777216.0) / 16777216.0;
        return bitcast<f32>(sign | bitcast<u32>(m));
    }
    let r = (a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u;
    return bitcast<f32>(sign | r);
}

fn f16_roundx4(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(f16_round(x.x), f16_round(x.y), f16_round(x.z), f16_round(x.w));
}

// The bf16 pattern (low 16 bits) nearest to x.
fn bf16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

// x rounded to the nearest bf16, as an f32.
fn bf16_round(x: f32) -> f32 {
    return bitcast<f32>(bf16_bits(x) << 16u);
}

fn bf16_roundx4(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(bf16_round(x.x), bf16_round(x.y), bf16_round(x.z), bf16_round(x.w));
}

// The bf16 in the half of word w that element index i selects (even: low).
fn bf16_at(w: u32, i: u32) -> f32 {
    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u));
}

var<workgroup> ta1: array<f16, 2048>;
var<workgroup> tb2: array<f16, 2048>;
var<workgroup> tc3: array<f32, 4096>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 1u) { return; }
    let bi4: u32 = gi / 1u;
    let tm5: u32 = (gi % 1u) / 1u;
    let tn6: u32 = gi % 1u;
    let sg7: u32 = lid / 32u;
    let qr8: u32 = (sg7 / 2u) * 32u;
    let qc9: u32 = (sg7 % 2u) * 32u;
    for (var s10 = 0u; s10 < 32u; s10 = s10 + 1u) {
    let q11: u32 = lid + (s10 * 128u);
    tc3[q11] = 0.0;
    }
    workgroupBarrier();
    var acc12 = coopLoadT<coop_mat16x16<f32, C>>(&tc3[((qr8 + 0u) * 64u) + (qc9 + 0u)], 64u);
    var acc13 = coopLoadT<coop_mat16x16<f32, C>>(&tc3[((qr8 + 0u) * 64u) + (qc9 + 16u)], 64u);
    var acc14 = coopLoadT<coop_mat16x16<f32, C>>(&tc3[((qr8 + 16u) * 64u) + (qc9 + 0u)], 64u);
    var acc15 = coopLoadT<coop_mat16x16<f32, C>>(&tc3[((qr8 + 16u) * 64u) + (qc9 + 16u)], 64u);
    for (var ks16 = 0u; ks16 < 1u; ks16 = ks16 + 1u) {
    let kfirst17: u32 = ks16 * 32u;
    for (var s18 = 0u; s18 < 16u; s18 = s18 + 1u) {
    let q19: u32 = lid + (s18 * 128u);
    let arow20: u32 = (tm5 * 64u) + (q19 / 32u);
    let acol21: u32 = kfirst17 + (q19 % 32u);
    let ok22: bool = (arow20 < 5u) && (acol21 < 24u);
    let i23: u32 = select(0u, (bi4 * 120u) + ((arow20 * 24u) + acol21), ok22);
    let v24: f32 = f32(in0[i23]);
    ta1[q19] = f16(select(0.0, v24, ok22));
    }
    for (var s25 = 0u; s25 < 16u; s25 = s25 + 1u) {
    let q26: u32 = lid + (s25 * 128u);
    let brow27: u32 = kfirst17 + (q26 / 64u);
    let bcol28: u32 = (tn6 * 64u) + (q26 % 64u);
    let ok29: bool = (brow27 < 24u) && (bcol28 < 6u);
    let i30: u32 = select(0u, (bi4 * 144u) + ((brow27 * 6u) + bcol28), ok29);
    let j31: u32 = ((i30 % 6u) * 24u) + (i30 / 6u);
    let v32: f32 = f32(in1[j31]);
    tb2[q26] = f16(select(0.0, v32, ok29));
    }
    workgroupBarrier();
    var fa33 = coopLoadT<coop_mat16x16<f16, A>>(&ta1[((qr8 + 0u) * 32u) + 0u], 32u);
    var fa34 = coopLoadT<coop_mat16x16<f16, A>>(&ta1[((qr8 + 16u) * 32u) + 0u], 32u);
    var fb35 = coopLoadT<coop_mat16x16<f16, B>>(&tb2[0u + (qc9 + 0u)], 64u);
    var fb36 = coopLoadT<coop_mat16x16<f16, B>>(&tb2[0u + (qc9 + 16u)], 64u);
    acc12 = coopMultiplyAdd(fa33, fb35, acc12);
    acc13 = coopMultiplyAdd(fa33, fb36, acc13);
    acc14 = coopMultiplyAdd(fa34, fb35, acc14);
    acc15 = coopMultiplyAdd(fa34, fb36, acc15);
    var fa37 = coopLoadT<coop_mat16x16<f16, A>>(&ta1[((qr8 + 0u) * 32u) + 16u], 32u);
    var fa38 = coopLoadT<coop_mat16x16<f16, A>>(&ta1[((qr8 + 16u) * 32u) + 16u], 32u);
    var fb39 = coopLoadT<coop_mat16x16<f16, B>>(&tb2[1024u + (qc9 + 0u)], 64u);
    var fb40 = coopLoadT<coop_mat16x16<f16, B>>(&tb2[1024u + (qc9 + 16u)], 64u);
    acc12 = coopMultiplyAdd(fa37, fb39, acc12);
    acc13 = coopMultiplyAdd(fa37, fb40, acc13);
    acc14 = coopMultiplyAdd(fa38, fb39, acc14);
    acc15 = coopMultiplyAdd(fa38, fb40, acc15);
    workgroupBarrier();
    }
    coopStoreT(acc12, &tc3[((qr8 + 0u) * 64u) + (qc9 + 0u)], 64u);
    coopStoreT(acc13, &tc3[((qr8 + 0u) * 64u) + (qc9 + 16u)], 64u);
    coopStoreT(acc14, &tc3[((qr8 + 16u) * 64u) + (qc9 + 0u)], 64u);
    coopStoreT(acc15, &tc3[((qr8 + 16u) * 64u) + (qc9 + 16u)], 64u);
    workgroupBarrier();
    for (var s41 = 0u; s41 < 32u; s41 = s41 + 1u) {
    let q42: u32 = lid + (s41 * 128u);
    let row43: u32 = (tm5 * 64u) + (q42 / 64u);
    let col44: u32 = (tn6 * 64u) + (q42 % 64u);
    if ((row43 < 5u) && (col44 < 6u)) {
    let idx45: u32 = ((bi4 * 30u) + (row43 * 6u)) + col44;
    let result46: f32 = tc3[q42];
    let v47: f32 = f16_round(result46);
    let v48: f32 = f32(bitcast<f32>(param_word(0u)));
    let v49: f32 = f16_round(v48);
    let v50: f32 = v47 + v49;
    let v51: f32 = f16_round(v50);
    let v52: f32 = select(max(v51, 0.0), v51, ((bitcast<u32>(v51) & 0x7fffffffu) > 0x7f800000u));
    let v53: f32 = f16_round(v52);
    out0[idx45] = f16(v53);
    }
    }
}
