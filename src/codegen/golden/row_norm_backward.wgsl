@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

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
    let j7: u32 = 0u;
    let v8: f32 = f32(bitcast<f32>(param_word(0u)));
    let d9: f32 = v6 - v2;
    s3 = s3 + d9;
    }
    let ms10: f32 = s3 / (f32(24u));
    let mean11: f32 = v2 + ms10;
    var q12: f32 = f32(0u);
    for (var k13 = 0u; k13 < 24u; k13 = k13 + 1u) {
    let i14: u32 = (gi * 24u) + k13;
    let v15: f32 = in0[i14];
    let j16: u32 = 0u;
    let v17: f32 = f32(bitcast<f32>(param_word(0u)));
    let d18: f32 = v15 - mean11;
    let dd19: f32 = d18 * d18;
    q12 = q12 + dd19;
    }
    let var20: f32 = q12 / (f32(24u));
    let ve21: f32 = var20 + bitcast<f32>(param_word(1u));
    let rstd22: f32 = inverseSqrt(ve21);
    var sg23: f32 = f32(0u);
    var sgx24: f32 = f32(0u);
    for (var k25 = 0u; k25 < 24u; k25 = k25 + 1u) {
    let i26: u32 = (gi * 24u) + k25;
    let v27: f32 = in0[i26];
    let j28: u32 = 0u;
    let v29: f32 = f32(bitcast<f32>(param_word(0u)));
    sg23 = sg23 + v29;
    let d30: f32 = v27 - mean11;
    let xh31: f32 = d30 * rstd22;
    let t32: f32 = v29 * xh31;
    sgx24 = sgx24 + t32;
    }
    let mg33: f32 = sg23 / (f32(24u));
    let mgx34: f32 = sgx24 / (f32(24u));
    for (var k35 = 0u; k35 < 24u; k35 = k35 + 1u) {
    let i36: u32 = (gi * 24u) + k35;
    let v37: f32 = in0[i36];
    let j38: u32 = 0u;
    let v39: f32 = f32(bitcast<f32>(param_word(0u)));
    let a40: f32 = v39 - mg33;
    let d41: f32 = v37 - mean11;
    let xh42: f32 = d41 * rstd22;
    let b43: f32 = xh42 * mgx34;
    let c44: f32 = a40 - b43;
    let dx45: f32 = rstd22 * c44;
    out0[i36] = dx45;
    }
}
