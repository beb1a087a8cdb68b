@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 64u + lid;
if (gi >= 4u) { return; }
    let i02: u32 = gi * 24u;
    let v3: f32 = in0[i02];
    var s4: f32 = f32(0u);
    for (var k5 = 0u; k5 < 24u; k5 = k5 + 1u) {
    let i6: u32 = (gi * 24u) + k5;
    let v7: f32 = in0[i6];
    let d8: f32 = v7 - v3;
    s4 = s4 + d8;
    }
    let ms9: f32 = s4 / (f32(24u));
    let mean10: f32 = v3 + ms9;
    var q11: f32 = f32(0u);
    for (var k12 = 0u; k12 < 24u; k12 = k12 + 1u) {
    let i13: u32 = (gi * 24u) + k12;
    let v14: f32 = in0[i13];
    let d15: f32 = v14 - mean10;
    let dd16: f32 = d15 * d15;
    q11 = q11 + dd16;
    }
    let var17: f32 = q11 / (f32(24u));
    let ve18: f32 = var17 + bitcast<f32>(param_word(0u));
    let rstd19: f32 = inverseSqrt(ve18);
    for (var k20 = 0u; k20 < 24u; k20 = k20 + 1u) {
    let i21: u32 = (gi * 24u) + k20;
    let v22: f32 = in0[i21];
    let d23: f32 = v22 - mean10;
    let xh24: f32 = d23 * rstd19;
    let j25: u32 = i21 % 24u;
    let v26: f32 = in1[j25];
    let v27: f32 = xh24 * v26;
    out0[i21] = v27;
    }
}
