@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 64u + lid;
if (gi >= 4u) { return; }
    let i02: u32 = gi * 6u;
    let v3: vec4<f32> = in0[i02];
    let v04: f32 = v3[0u];
    var s5: f32 = f32(0u);
    for (var k6 = 0u; k6 < 6u; k6 = k6 + 1u) {
    let i7: u32 = (gi * 6u) + k6;
    let v8: vec4<f32> = in0[i7];
    let i9: u32 = (i7 * 4u) + 0u;
    let v10: f32 = v8[0u];
    let d11: f32 = v10 - v04;
    s5 = s5 + d11;
    let i12: u32 = (i7 * 4u) + 1u;
    let v13: f32 = v8[1u];
    let d14: f32 = v13 - v04;
    s5 = s5 + d14;
    let i15: u32 = (i7 * 4u) + 2u;
    let v16: f32 = v8[2u];
    let d17: f32 = v16 - v04;
    s5 = s5 + d17;
    let i18: u32 = (i7 * 4u) + 3u;
    let v19: f32 = v8[3u];
    let d20: f32 = v19 - v04;
    s5 = s5 + d20;
    }
    let ms21: f32 = s5 / (f32(24u));
    let mean22: f32 = v04 + ms21;
    var q23: f32 = f32(0u);
    for (var k24 = 0u; k24 < 6u; k24 = k24 + 1u) {
    let i25: u32 = (gi * 6u) + k24;
    let v26: vec4<f32> = in0[i25];
    let i27: u32 = (i25 * 4u) + 0u;
    let v28: f32 = v26[0u];
    let d29: f32 = v28 - mean22;
    let dd30: f32 = d29 * d29;
    q23 = q23 + dd30;
    let i31: u32 = (i25 * 4u) + 1u;
    let v32: f32 = v26[1u];
    let d33: f32 = v32 - mean22;
    let dd34: f32 = d33 * d33;
    q23 = q23 + dd34;
    let i35: u32 = (i25 * 4u) + 2u;
    let v36: f32 = v26[2u];
    let d37: f32 = v36 - mean22;
    let dd38: f32 = d37 * d37;
    q23 = q23 + dd38;
    let i39: u32 = (i25 * 4u) + 3u;
    let v40: f32 = v26[3u];
    let d41: f32 = v40 - mean22;
    let dd42: f32 = d41 * d41;
    q23 = q23 + dd42;
    }
    let var43: f32 = q23 / (f32(24u));
    let ve44: f32 = var43 + bitcast<f32>(param_word(0u));
    let rstd45: f32 = inverseSqrt(ve44);
    for (var k46 = 0u; k46 < 6u; k46 = k46 + 1u) {
    let i47: u32 = (gi * 6u) + k46;
    let v48: vec4<f32> = in0[i47];
    let i49: u32 = (i47 * 4u) + 0u;
    let v50: f32 = v48[0u];
    let d51: f32 = v50 - mean22;
    let xh52: f32 = d51 * rstd45;
    let j53: u32 = k46 * 4u;
    let v54: f32 = in1[j53];
    let v55: f32 = xh52 * v54;
    out0[i49] = v55;
    let i56: u32 = (i47 * 4u) + 1u;
    let v57: f32 = v48[1u];
    let d58: f32 = v57 - mean22;
    let xh59: f32 = d58 * rstd45;
    let j60: u32 = (k46 * 4u) + 1u;
    let v61: f32 = in1[j60];
    let v62: f32 = xh59 * v61;
    out0[i56] = v62;
    let i63: u32 = (i47 * 4u) + 2u;
    let v64: f32 = v48[2u];
    let d65: f32 = v64 - mean22;
    let xh66: f32 = d65 * rstd45;
    let j67: u32 = (k46 * 4u) + 2u;
    let v68: f32 = in1[j67];
    let v69: f32 = xh66 * v68;
    out0[i63] = v69;
    let i70: u32 = (i47 * 4u) + 3u;
    let v71: f32 = v48[3u];
    let d72: f32 = v71 - mean22;
    let xh73: f32 = d72 * rstd45;
    let j74: u32 = (k46 * 4u) + 3u;
    let v75: f32 = in1[j74];
    let v76: f32 = xh73 * v75;
    out0[i70] = v76;
    }
}
