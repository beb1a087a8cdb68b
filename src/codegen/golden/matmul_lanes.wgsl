@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;
@group(0) @binding(2) var ta: texture_2d_array<f32>;
@group(0) @binding(3) var tb: texture_2d_array<f32>;

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) sid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 1u) { return; }
    let bi1: u32 = gi / 1u;
    let tm2: u32 = (gi % 1u) / 1u;
    let tn3: u32 = gi % 1u;
    let ctex4: u32 = (tn3 * 8u) + lid;
    let bc5: u32 = min(ctex4, 1u);
    let bx6: u32 = bc5 % 2u;
    let bl7: u32 = (bi1 * 1u) + (bc5 / 2u);
    let rfirst8: u32 = tm2 * 8u;
    var acc9: vec4<f32> = vec4<f32>(0.0);
    var acc10: vec4<f32> = vec4<f32>(0.0);
    var acc11: vec4<f32> = vec4<f32>(0.0);
    var acc12: vec4<f32> = vec4<f32>(0.0);
    var acc13: vec4<f32> = vec4<f32>(0.0);
    var acc14: vec4<f32> = vec4<f32>(0.0);
    var acc15: vec4<f32> = vec4<f32>(0.0);
    var acc16: vec4<f32> = vec4<f32>(0.0);
    let ar17: u32 = min(rfirst8 + sid, 4u);
    let ay18: u32 = ar17 % 5u;
    let al19: u32 = (bi1 * 1u) + (ar17 / 5u);
    for (var kt20 = 0u; kt20 < 6u; kt20 = kt20 + 1u) {
    let b21: vec4<f32> = textureLoad(tb, vec2<u32>(bx6, kt20 * 4u), bl7, 0);
    let b22: vec4<f32> = textureLoad(tb, vec2<u32>(bx6, (kt20 * 4u) + 1u), bl7, 0);
    let b23: vec4<f32> = textureLoad(tb, vec2<u32>(bx6, (kt20 * 4u) + 2u), bl7, 0);
    let b24: vec4<f32> = textureLoad(tb, vec2<u32>(bx6, (kt20 * 4u) + 3u), bl7, 0);
    let ah25: vec4<f32> = textureLoad(ta, vec2<u32>(kt20, ay18), al19, 0);
    let a26: vec4<f32> = subgroupBroadcast(ah25, 0u);
    acc9 = (((acc9 + (a26[0u] * b21)) + (a26[1u] * b22)) + (a26[2u] * b23)) + (a26[3u] * b24);
    let a27: vec4<f32> = subgroupBroadcast(ah25, 1u);
    acc10 = (((acc10 + (a27[0u] * b21)) + (a27[1u] * b22)) + (a27[2u] * b23)) + (a27[3u] * b24);
    let a28: vec4<f32> = subgroupBroadcast(ah25, 2u);
    acc11 = (((acc11 + (a28[0u] * b21)) + (a28[1u] * b22)) + (a28[2u] * b23)) + (a28[3u] * b24);
    let a29: vec4<f32> = subgroupBroadcast(ah25, 3u);
    acc12 = (((acc12 + (a29[0u] * b21)) + (a29[1u] * b22)) + (a29[2u] * b23)) + (a29[3u] * b24);
    let a30: vec4<f32> = subgroupBroadcast(ah25, 4u);
    acc13 = (((acc13 + (a30[0u] * b21)) + (a30[1u] * b22)) + (a30[2u] * b23)) + (a30[3u] * b24);
    let a31: vec4<f32> = subgroupBroadcast(ah25, 5u);
    acc14 = (((acc14 + (a31[0u] * b21)) + (a31[1u] * b22)) + (a31[2u] * b23)) + (a31[3u] * b24);
    let a32: vec4<f32> = subgroupBroadcast(ah25, 6u);
    acc15 = (((acc15 + (a32[0u] * b21)) + (a32[1u] * b22)) + (a32[2u] * b23)) + (a32[3u] * b24);
    let a33: vec4<f32> = subgroupBroadcast(ah25, 7u);
    acc16 = (((acc16 + (a33[0u] * b21)) + (a33[1u] * b22)) + (a33[2u] * b23)) + (a33[3u] * b24);
    }
    var accs34: array<vec4<f32>, 8>;
    accs34[0u] = acc9;
    accs34[1u] = acc10;
    accs34[2u] = acc11;
    accs34[3u] = acc12;
    accs34[4u] = acc13;
    accs34[5u] = acc14;
    accs34[6u] = acc15;
    accs34[7u] = acc16;
    for (var i35 = 0u; i35 < 8u; i35 = i35 + 1u) {
    for (var j36 = 0u; j36 < 4u; j36 = j36 + 1u) {
    let row37: u32 = rfirst8 + i35;
    let col38: u32 = (ctex4 * 4u) + j36;
    if ((row37 < 5u) && (col38 < 6u)) {
    let idx39: u32 = ((bi1 * 30u) + (row37 * 6u)) + col38;
    let result40: f32 = accs34[i35][j36];
    let v41: f32 = f32(bitcast<f32>(param_word(0u)));
    let v42: f32 = result40 + v41;
    let v43: f32 = select(max(v42, 0.0), v42, ((bitcast<u32>(v42) & 0x7fffffffu) > 0x7f800000u));
    out0[idx39] = v43;
    }
    }
    }
}
