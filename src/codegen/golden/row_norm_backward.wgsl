@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

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
    let j8: u32 = 0u;
    let v9: f32 = f32(bitcast<f32>(param_word(0u)));
    let d10: f32 = v7 - v3;
    s4 = s4 + d10;
    }
    let ms11: f32 = s4 / (f32(24u));
    let mean12: f32 = v3 + ms11;
    var q13: f32 = f32(0u);
    for (var k14 = 0u; k14 < 24u; k14 = k14 + 1u) {
    let i15: u32 = (gi * 24u) + k14;
    let v16: f32 = in0[i15];
    let j17: u32 = 0u;
    let v18: f32 = f32(bitcast<f32>(param_word(0u)));
    let d19: f32 = v16 - mean12;
    let dd20: f32 = d19 * d19;
    q13 = q13 + dd20;
    }
    let var21: f32 = q13 / (f32(24u));
    let ve22: f32 = var21 + bitcast<f32>(param_word(1u));
    let rstd23: f32 = inverseSqrt(ve22);
    var sg24: f32 = f32(0u);
    var sgx25: f32 = f32(0u);
    for (var k26 = 0u; k26 < 24u; k26 = k26 + 1u) {
    let i27: u32 = (gi * 24u) + k26;
    let v28: f32 = in0[i27];
    let j29: u32 = 0u;
    let v30: f32 = f32(bitcast<f32>(param_word(0u)));
    sg24 = sg24 + v30;
    let d31: f32 = v28 - mean12;
    let xh32: f32 = d31 * rstd23;
    let t33: f32 = v30 * xh32;
    sgx25 = sgx25 + t33;
    }
    let mg34: f32 = sg24 / (f32(24u));
    let mgx35: f32 = sgx25 / (f32(24u));
    for (var k36 = 0u; k36 < 24u; k36 = k36 + 1u) {
    let i37: u32 = (gi * 24u) + k36;
    let v38: f32 = in0[i37];
    let j39: u32 = 0u;
    let v40: f32 = f32(bitcast<f32>(param_word(0u)));
    let a41: f32 = v40 - mg34;
    let d42: f32 = v38 - mean12;
    let xh43: f32 = d42 * rstd23;
    let b44: f32 = xh43 * mgx35;
    let c45: f32 = a41 - b44;
    let dx46: f32 = rstd23 * c45;
    out0[i37] = dx46;
    }
}
