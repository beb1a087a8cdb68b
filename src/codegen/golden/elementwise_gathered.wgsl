@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 2>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read> in2: array<f32>;
@group(0) @binding(4) var<storage, read_write> out0: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 4u) { return; }
    let e1: u32 = gi * 4u;
    let j2: u32 = 0u;
    let g3: u32 = 0u;
    let e4: u32 = 0u;
    let v5: i32 = bitcast<i32>(param_word(0u)) + (i32(e4) * bitcast<i32>(param_word(1u)));
    let e6: u32 = 1u;
    let v7: i32 = bitcast<i32>(param_word(0u)) + (i32(e6) * bitcast<i32>(param_word(1u)));
    let e8: u32 = 2u;
    let v9: i32 = bitcast<i32>(param_word(0u)) + (i32(e8) * bitcast<i32>(param_word(1u)));
    let e10: u32 = 3u;
    let v11: i32 = bitcast<i32>(param_word(0u)) + (i32(e10) * bitcast<i32>(param_word(1u)));
    let v12: vec4<i32> = vec4(v5, v7, v9, v11);
    let e13: u32 = gi * 4u;
    let j14: u32 = gi;
    let v15: i32 = bitcast<i32>(param_word(2u)) + (i32(j14) * bitcast<i32>(param_word(3u)));
    let v16: vec4<i32> = vec4<i32>(v15);
    let v17: vec4<i32> = v12 - v16;
    let v18: vec4<i32> = vec4<i32>(bitcast<i32>(param_word(4u)));
    let v19: vec4<bool> = v17 <= v18;
    let e20: u32 = gi * 4u;
    let j21: u32 = gi * 24u;
    let g22: u32 = j21 / 4u;
    let v23: vec4<f32> = in0[g22];
    let e24: u32 = gi * 4u;
    let j25: u32 = gi;
    let v26: f32 = in1[j25];
    let e27: u32 = e24 + 1u;
    let j28: u32 = gi + 24u;
    let v29: f32 = in1[j28];
    let e30: u32 = e24 + 2u;
    let j31: u32 = gi + 48u;
    let v32: f32 = in1[j31];
    let e33: u32 = e24 + 3u;
    let j34: u32 = gi + 72u;
    let v35: f32 = in1[j34];
    let v36: vec4<f32> = vec4(v26, v29, v32, v35);
    let e37: u32 = gi * 4u;
    let j38: u32 = gi * 24u;
    let v39: f32 = in2[j38];
    let v40: vec4<f32> = vec4<f32>(v39);
    let v41: vec4<f32> = v36 * v40;
    let v42: vec4<f32> = v23 + v41;
    let v43: vec4<f32> = vec4<f32>(bitcast<f32>(param_word(5u)));
    let v44: vec4<f32> = select(v43, v42, v19);
    out0[gi] = v44;
}
