@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 64u + lid;
if (gi >= 4u) { return; }
    var q2: f32 = f32(0u);
    for (var k3 = 0u; k3 < 6u; k3 = k3 + 1u) {
    let i4: u32 = (gi * 6u) + k3;
    let v5: vec4<f32> = in0[i4];
    let i6: u32 = (i4 * 4u) + 0u;
    let v7: f32 = v5[0u];
    let vv8: f32 = v7 * v7;
    q2 = q2 + vv8;
    let i9: u32 = (i4 * 4u) + 1u;
    let v10: f32 = v5[1u];
    let vv11: f32 = v10 * v10;
    q2 = q2 + vv11;
    let i12: u32 = (i4 * 4u) + 2u;
    let v13: f32 = v5[2u];
    let vv14: f32 = v13 * v13;
    q2 = q2 + vv14;
    let i15: u32 = (i4 * 4u) + 3u;
    let v16: f32 = v5[3u];
    let vv17: f32 = v16 * v16;
    q2 = q2 + vv17;
    }
    let ms18: f32 = q2 / (f32(24u));
    let ve19: f32 = ms18 + bitcast<f32>(param_word(0u));
    let rstd20: f32 = inverseSqrt(ve19);
    for (var k21 = 0u; k21 < 6u; k21 = k21 + 1u) {
    let i22: u32 = (gi * 6u) + k21;
    let v23: vec4<f32> = in0[i22];
    let i24: u32 = (i22 * 4u) + 0u;
    let v25: f32 = v23[0u];
    let xh26: f32 = v25 * rstd20;
    out0[i24] = xh26;
    let i27: u32 = (i22 * 4u) + 1u;
    let v28: f32 = v23[1u];
    let xh29: f32 = v28 * rstd20;
    out0[i27] = xh29;
    let i30: u32 = (i22 * 4u) + 2u;
    let v31: f32 = v23[2u];
    let xh32: f32 = v31 * rstd20;
    out0[i30] = xh32;
    let i33: u32 = (i22 * 4u) + 3u;
    let v34: f32 = v23[3u];
    let xh35: f32 = v34 * rstd20;
    out0[i33] = xh35;
    }
}
