@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 4u) { return; }
    var s1: f32 = f32(0u);
    for (var k2 = 0u; k2 < 24u; k2 = k2 + 1u) {
    let i3: u32 = (gi * 24u) + k2;
    let v4: f32 = in0[i3];
    let j5: u32 = 0u;
    let v6: f32 = f32(bitcast<f32>(param_word(0u)));
    s1 = s1 + v4;
    }
    let mean7: f32 = s1 / (f32(24u));
    var q8: f32 = f32(0u);
    for (var k9 = 0u; k9 < 24u; k9 = k9 + 1u) {
    let i10: u32 = (gi * 24u) + k9;
    let v11: f32 = in0[i10];
    let j12: u32 = 0u;
    let v13: f32 = f32(bitcast<f32>(param_word(0u)));
    let d14: f32 = v11 - mean7;
    let dd15: f32 = d14 * d14;
    q8 = q8 + dd15;
    }
    let var16: f32 = q8 / (f32(24u));
    let ve17: f32 = var16 + bitcast<f32>(param_word(1u));
    let rstd18: f32 = inverseSqrt(ve17);
    var sg19: f32 = f32(0u);
    var sgx20: f32 = f32(0u);
    for (var k21 = 0u; k21 < 24u; k21 = k21 + 1u) {
    let i22: u32 = (gi * 24u) + k21;
    let v23: f32 = in0[i22];
    let j24: u32 = 0u;
    let v25: f32 = f32(bitcast<f32>(param_word(0u)));
    sg19 = sg19 + v25;
    let d26: f32 = v23 - mean7;
    let xh27: f32 = d26 * rstd18;
    let t28: f32 = v25 * xh27;
    sgx20 = sgx20 + t28;
    }
    let mg29: f32 = sg19 / (f32(24u));
    let mgx30: f32 = sgx20 / (f32(24u));
    for (var k31 = 0u; k31 < 24u; k31 = k31 + 1u) {
    let i32_: u32 = (gi * 24u) + k31;
    let v33: f32 = in0[i32_];
    let j34: u32 = 0u;
    let v35: f32 = f32(bitcast<f32>(param_word(0u)));
    let a36: f32 = v35 - mg29;
    let d37: f32 = v33 - mean7;
    let xh38: f32 = d37 * rstd18;
    let b39: f32 = xh38 * mgx30;
    let c40: f32 = a36 - b39;
    let dx41: f32 = rstd18 * c40;
    out0[i32_] = dx41;
    }
}
