@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 24u) { return; }
    let o1: u32 = gi;
    var acc2: f32 = 1.0;
    for (var j3 = 0u; j3 < 4u; j3 = j3 + 1u) {
    let rr4: u32 = j3;
    let i5: u32 = gi + (j3 * 24u);
    let v6: f32 = in0[i5];
    acc2 = acc2 * v6;
    let run7: f32 = acc2;
    let v8: f32 = f32(bitcast<f32>(param_word(0u)));
    let v9: f32 = run7 * v8;
    out0[i5] = v9;
    }
    let rr10: u32 = 4u;
    if (rr10 < 4u) {
    let i11: u32 = gi + 96u;
    let v12: f32 = in0[i11];
    acc2 = acc2 * v12;
    let run13: f32 = acc2;
    let v14: f32 = f32(bitcast<f32>(param_word(0u)));
    let v15: f32 = run13 * v14;
    out0[i11] = v15;
    }
}
