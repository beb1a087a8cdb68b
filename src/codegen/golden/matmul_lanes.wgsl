@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read_write> out0: array<vec4<f32>>;
@group(0) @binding(2) var ta: texture_2d_array<f32>;
@group(0) @binding(3) var tb: texture_2d_array<f32>;

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) sid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 1u) { return; }
    let bi1: u32 = gi;
    let tm2: u32 = 0u;
    let tn3: u32 = 0u;
    let ctex4: u32 = lid;
    let bc5: u32 = min(ctex4, 1u);
    let bx6: u32 = min(lid, 1u);
    let bl7: u32 = gi;
    let rfirst8: u32 = 0u;
    var acc9: vec4<f32> = vec4<f32>(0.0);
    var acc10: vec4<f32> = vec4<f32>(0.0);
    var acc11: vec4<f32> = vec4<f32>(0.0);
    var acc12: vec4<f32> = vec4<f32>(0.0);
    var acc13: vec4<f32> = vec4<f32>(0.0);
    var acc14: vec4<f32> = vec4<f32>(0.0);
    var acc15: vec4<f32> = vec4<f32>(0.0);
    var acc16: vec4<f32> = vec4<f32>(0.0);
    let ar17: u32 = min(sid, 4u);
    let ay18: u32 = min(sid, 4u);
    let al19: u32 = gi;
    let bcol21: u32 = ctex4 * 4u;
    for (var kt20 = 0u; kt20 < 6u; kt20 = kt20 + 1u) {
    let bt22: vec4<f32> = textureLoad(tb, vec2<u32>(kt20, min(bcol21, 7u)), bi1, 0);
    let bt23: vec4<f32> = textureLoad(tb, vec2<u32>(kt20, min(bcol21 + 1u, 7u)), bi1, 0);
    let bt24: vec4<f32> = textureLoad(tb, vec2<u32>(kt20, min(bcol21 + 2u, 7u)), bi1, 0);
    let bt25: vec4<f32> = textureLoad(tb, vec2<u32>(kt20, min(bcol21 + 3u, 7u)), bi1, 0);
    let b26: vec4<f32> = vec4<f32>(bt22[0u], bt23[0u], bt24[0u], bt25[0u]);
    let b27: vec4<f32> = vec4<f32>(bt22[1u], bt23[1u], bt24[1u], bt25[1u]);
    let b28: vec4<f32> = vec4<f32>(bt22[2u], bt23[2u], bt24[2u], bt25[2u]);
    let b29: vec4<f32> = vec4<f32>(bt22[3u], bt23[3u], bt24[3u], bt25[3u]);
    let ah30: vec4<f32> = textureLoad(ta, vec2<u32>(kt20, ay18), al19, 0);
    let a31: vec4<f32> = subgroupBroadcast(ah30, 0u);
    acc9 = (((acc9 + (a31[0u] * b26)) + (a31[1u] * b27)) + (a31[2u] * b28)) + (a31[3u] * b29);
    let a32: vec4<f32> = subgroupBroadcast(ah30, 1u);
    acc10 = (((acc10 + (a32[0u] * b26)) + (a32[1u] * b27)) + (a32[2u] * b28)) + (a32[3u] * b29);
    let a33: vec4<f32> = subgroupBroadcast(ah30, 2u);
    acc11 = (((acc11 + (a33[0u] * b26)) + (a33[1u] * b27)) + (a33[2u] * b28)) + (a33[3u] * b29);
    let a34: vec4<f32> = subgroupBroadcast(ah30, 3u);
    acc12 = (((acc12 + (a34[0u] * b26)) + (a34[1u] * b27)) + (a34[2u] * b28)) + (a34[3u] * b29);
    let a35: vec4<f32> = subgroupBroadcast(ah30, 4u);
    acc13 = (((acc13 + (a35[0u] * b26)) + (a35[1u] * b27)) + (a35[2u] * b28)) + (a35[3u] * b29);
    let a36: vec4<f32> = subgroupBroadcast(ah30, 5u);
    acc14 = (((acc14 + (a36[0u] * b26)) + (a36[1u] * b27)) + (a36[2u] * b28)) + (a36[3u] * b29);
    let a37: vec4<f32> = subgroupBroadcast(ah30, 6u);
    acc15 = (((acc15 + (a37[0u] * b26)) + (a37[1u] * b27)) + (a37[2u] * b28)) + (a37[3u] * b29);
    let a38: vec4<f32> = subgroupBroadcast(ah30, 7u);
    acc16 = (((acc16 + (a38[0u] * b26)) + (a38[1u] * b27)) + (a38[2u] * b28)) + (a38[3u] * b29);
    }
    var accs39: array<vec4<f32>, 8>;
    accs39[0u] = acc9;
    accs39[1u] = acc10;
    accs39[2u] = acc11;
    accs39[3u] = acc12;
    accs39[4u] = acc13;
    accs39[5u] = acc14;
    accs39[6u] = acc15;
    accs39[7u] = acc16;
    for (var i40 = 0u; i40 < 8u; i40 = i40 + 1u) {
    let row42: u32 = i40;
    let col43: u32 = ctex4 * 4u;
    if ((row42 < 5u) && (col43 < 8u)) {
    let quad44: u32 = ((gi * 10u) + (i40 * 2u)) + lid;
    let result45: vec4<f32> = accs39[i40];
    let v46: vec4<f32> = vec4<f32>(bitcast<f32>(param_word(0u)));
    let v47: vec4<f32> = result45 + v46;
    let v48: vec4<f32> = select(max(v47, vec4<f32>(0.0)), v47, ((bitcast<vec4<u32>>(v47) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u)));
    out0[quad44] = v48;
    }
    }
}
