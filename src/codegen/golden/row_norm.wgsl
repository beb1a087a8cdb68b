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
    let mean022: f32 = v04 + ms21;
    var c23: f32 = f32(0u);
    var q24: f32 = f32(0u);
    for (var k25 = 0u; k25 < 6u; k25 = k25 + 1u) {
    let i26: u32 = (gi * 6u) + k25;
    let v27: vec4<f32> = in0[i26];
    let i28: u32 = (i26 * 4u) + 0u;
    let v29: f32 = v27[0u];
    let d30: f32 = v29 - mean022;
    let dd31: f32 = d30 * d30;
    c23 = c23 + d30;
    q24 = q24 + dd31;
    let i32_: u32 = (i26 * 4u) + 1u;
    let v33: f32 = v27[1u];
    let d34: f32 = v33 - mean022;
    let dd35: f32 = d34 * d34;
    c23 = c23 + d34;
    q24 = q24 + dd35;
    let i36: u32 = (i26 * 4u) + 2u;
    let v37: f32 = v27[2u];
    let d38: f32 = v37 - mean022;
    let dd39: f32 = d38 * d38;
    c23 = c23 + d38;
    q24 = q24 + dd39;
    let i40: u32 = (i26 * 4u) + 3u;
    let v41: f32 = v27[3u];
    let d42: f32 = v41 - mean022;
    let dd43: f32 = d42 * d42;
    c23 = c23 + d42;
    q24 = q24 + dd43;
    }
    let mc44: f32 = c23 / (f32(24u));
    let mean45: f32 = mean022 + mc44;
    let mq46: f32 = q24 / (f32(24u));
    let mc247: f32 = mc44 * mc44;
    let var48: f32 = select(select(max(mq46 - mc247, 0.0), 0.0, ((bitcast<u32>(0.0) & 0x7fffffffu) > 0x7f800000u)), mq46 - mc247, ((bitcast<u32>(mq46 - mc247) & 0x7fffffffu) > 0x7f800000u));
    let ve49: f32 = var48 + bitcast<f32>(param_word(0u));
    let rstd50: f32 = inverseSqrt(ve49);
    for (var k51 = 0u; k51 < 6u; k51 = k51 + 1u) {
    let i52: u32 = (gi * 6u) + k51;
    let v53: vec4<f32> = in0[i52];
    let i54: u32 = (i52 * 4u) + 0u;
    let v55: f32 = v53[0u];
    let d56: f32 = v55 - mean45;
    let xh57: f32 = d56 * rstd50;
    let j58: u32 = k51 * 4u;
    let v59: f32 = in1[j58];
    let v60: f32 = xh57 * v59;
    out0[i54] = v60;
    let i61: u32 = (i52 * 4u) + 1u;
    let v62: f32 = v53[1u];
    let d63: f32 = v62 - mean45;
    let xh64: f32 = d63 * rstd50;
    let j65: u32 = (k51 * 4u) + 1u;
    let v66: f32 = in1[j65];
    let v67: f32 = xh64 * v66;
    out0[i61] = v67;
    let i68: u32 = (i52 * 4u) + 2u;
    let v69: f32 = v53[2u];
    let d70: f32 = v69 - mean45;
    let xh71: f32 = d70 * rstd50;
    let j72: u32 = (k51 * 4u) + 2u;
    let v73: f32 = in1[j72];
    let v74: f32 = xh71 * v73;
    out0[i68] = v74;
    let i75: u32 = (i52 * 4u) + 3u;
    let v76: f32 = v53[3u];
    let d77: f32 = v76 - mean45;
    let xh78: f32 = d77 * rstd50;
    let j79: u32 = (k51 * 4u) + 3u;
    let v80: f32 = in1[j79];
    let v81: f32 = xh78 * v80;
    out0[i75] = v81;
    }
}
