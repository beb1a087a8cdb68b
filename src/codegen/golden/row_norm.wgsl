@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 4u) { return; }
    var s1: f32 = f32(0u);
    for (var k2 = 0u; k2 < 24u; k2 = k2 + 1u) {
    let i3: u32 = (gi * 24u) + k2;
    let v4: f32 = in0[i3];
    s1 = s1 + v4;
    }
    let mean5: f32 = s1 / (f32(24u));
    var q6: f32 = f32(0u);
    for (var k7 = 0u; k7 < 24u; k7 = k7 + 1u) {
    let i8: u32 = (gi * 24u) + k7;
    let v9: f32 = in0[i8];
    let d10: f32 = v9 - mean5;
    let dd11: f32 = d10 * d10;
    q6 = q6 + dd11;
    }
    let var12: f32 = q6 / (f32(24u));
    let ve13: f32 = var12 + bitcast<f32>(param_word(0u));
    let rstd14: f32 = inverseSqrt(ve13);
    for (var k15 = 0u; k15 < 24u; k15 = k15 + 1u) {
    let i16_: u32 = (gi * 24u) + k15;
    let v17: f32 = in0[i16_];
    let d18: f32 = v17 - mean5;
    let xh19: f32 = d18 * rstd14;
    let j20: u32 = i16_ % 24u;
    let v21: f32 = in1[j20];
    let v22: f32 = xh19 * v21;
    out0[i16_] = v22;
    }
}
