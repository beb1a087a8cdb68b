@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 4u) { return; }
    let i01: u32 = gi * 24u;
    let v2: f32 = in0[i01];
    var s3: f32 = f32(0u);
    for (var k4 = 0u; k4 < 24u; k4 = k4 + 1u) {
    let i5: u32 = (gi * 24u) + k4;
    let v6: f32 = in0[i5];
    let d7: f32 = v6 - v2;
    s3 = s3 + d7;
    }
    let ms8: f32 = s3 / (f32(24u));
    let mean9: f32 = v2 + ms8;
    var q10: f32 = f32(0u);
    for (var k11 = 0u; k11 < 24u; k11 = k11 + 1u) {
    let i12: u32 = (gi * 24u) + k11;
    let v13: f32 = in0[i12];
    let d14: f32 = v13 - mean9;
    let dd15: f32 = d14 * d14;
    q10 = q10 + dd15;
    }
    let var16: f32 = q10 / (f32(24u));
    let ve17: f32 = var16 + bitcast<f32>(param_word(0u));
    let rstd18: f32 = inverseSqrt(ve17);
    for (var k19 = 0u; k19 < 24u; k19 = k19 + 1u) {
    let i20: u32 = (gi * 24u) + k19;
    let v21: f32 = in0[i20];
    let d22: f32 = v21 - mean9;
    let xh23: f32 = d22 * rstd18;
    let j24: u32 = i20 % 24u;
    let v25: f32 = in1[j24];
    let v26: f32 = xh23 * v25;
    out0[i20] = v26;
    }
}
