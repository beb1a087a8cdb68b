@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 64u + lid;
if (gi >= 4u) { return; }
    var q2: f32 = f32(0u);
    for (var k3 = 0u; k3 < 24u; k3 = k3 + 1u) {
    let i4: u32 = (gi * 24u) + k3;
    let v5: f32 = in0[i4];
    let vv6: f32 = v5 * v5;
    q2 = q2 + vv6;
    }
    let ms7: f32 = q2 / (f32(24u));
    let ve8: f32 = ms7 + bitcast<f32>(param_word(0u));
    let rstd9: f32 = inverseSqrt(ve8);
    for (var k10 = 0u; k10 < 24u; k10 = k10 + 1u) {
    let i11: u32 = (gi * 24u) + k10;
    let v12: f32 = in0[i11];
    let xh13: f32 = v12 * rstd9;
    out0[i11] = xh13;
    }
}
