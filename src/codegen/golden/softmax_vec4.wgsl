@group(0) @binding(0) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out0: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 4u) { return; }
    var mx1: vec4<f32> = vec4<f32>(bitcast<f32>(0xff800000u));
    for (var k2 = 0u; k2 < 6u; k2 = k2 + 1u) {
    let i3: u32 = (gi * 6u) + k2;
    let v4: vec4<f32> = in0[i3];
    mx1 = select(select(max(mx1, v4), v4, ((bitcast<vec4<u32>>(v4) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u))), mx1, ((bitcast<vec4<u32>>(mx1) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u)));
    }
    let m5: f32 = select(select(max(mx1[0u], mx1[1u]), mx1[1u], ((bitcast<u32>(mx1[1u]) & 0x7fffffffu) > 0x7f800000u)), mx1[0u], ((bitcast<u32>(mx1[0u]) & 0x7fffffffu) > 0x7f800000u));
    let m6: f32 = select(select(max(mx1[2u], mx1[3u]), mx1[3u], ((bitcast<u32>(mx1[3u]) & 0x7fffffffu) > 0x7f800000u)), mx1[2u], ((bitcast<u32>(mx1[2u]) & 0x7fffffffu) > 0x7f800000u));
    let m7: f32 = select(select(max(m5, m6), m6, ((bitcast<u32>(m6) & 0x7fffffffu) > 0x7f800000u)), m5, ((bitcast<u32>(m5) & 0x7fffffffu) > 0x7f800000u));
    var sx8: vec4<f32> = vec4<f32>(0.0);
    for (var k9 = 0u; k9 < 6u; k9 = k9 + 1u) {
    let i10: u32 = (gi * 6u) + k9;
    let v11: vec4<f32> = in0[i10];
    let d12: vec4<f32> = v11 - vec4<f32>(m7);
    let e13: vec4<f32> = exp(d12);
    sx8 = sx8 + e13;
    }
    let s14: f32 = (sx8[0u] + sx8[1u]) + (sx8[2u] + sx8[3u]);
    let ls15: f32 = log(s14);
    let rs16: f32 = 1.0 / s14;
    let bad17: bool = ((bitcast<u32>(m7) & 0x7f800000u) == 0x7f800000u) || !(0.0 < s14);
    for (var k18 = 0u; k18 < 6u; k18 = k18 + 1u) {
    let i19: u32 = (gi * 6u) + k18;
    let v20: vec4<f32> = in0[i19];
    let d21: vec4<f32> = v20 - vec4<f32>(m7);
    let e22: vec4<f32> = exp(d21);
    let y23: vec4<f32> = e22 * vec4<f32>(rs16);
    let y24: vec4<f32> = select(y23, vec4<f32>(bitcast<f32>(0x7fc00000u)), bad17);
    out0[i19] = y24;
    }
}
