@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 10u) { return; }
    let b1: u32 = gi / 5u;
    let qrow2: u32 = gi % 5u;
    var acc3: array<f32, 4>;
    var m4: f32 = -3.4028235e38;
    var s5: f32 = 0.0;
    for (var j6 = 0u; j6 < 5u; j6 = j6 + 1u) {
    if (qrow2 < j6) {
    break;
    }
    let kr7: u32 = (b1 * 5u) + j6;
    var d8: f32 = f32(0u);
    for (var t9 = 0u; t9 < 4u; t9 = t9 + 1u) {
    let qi10: u32 = (gi * 4u) + t9;
    let ki11: u32 = (kr7 * 4u) + t9;
    let v12: f32 = in0[qi10];
    let v13: f32 = in0[ki11];
    d8 = d8 + (v12 * v13);
    }
    let x14: f32 = d8 * bitcast<f32>(param_word(0u));
    let mn15: f32 = select(select(max(m4, x14), x14, ((bitcast<u32>(x14) & 0x7fffffffu) > 0x7f800000u)), m4, ((bitcast<u32>(m4) & 0x7fffffffu) > 0x7f800000u));
    let corr16: f32 = exp((m4 - mn15));
    let p17: f32 = exp((x14 - mn15));
    s5 = (s5 * corr16) + p17;
    for (var c18 = 0u; c18 < 4u; c18 = c18 + 1u) {
    let vi19: u32 = (kr7 * 4u) + c18;
    let v20: f32 = in0[vi19];
    acc3[c18] = (acc3[c18] * corr16) + (p17 * v20);
    }
    m4 = mn15;
    }
    for (var c21 = 0u; c21 < 4u; c21 = c21 + 1u) {
    let idx22: u32 = (gi * 4u) + c21;
    let y23: f32 = acc3[c21] / s5;
    out0[idx22] = y23;
    }
}
