@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 9u) { return; }
    var m1: f32 = -3.4028235e38;
    var s2: f32 = 0.0;
    for (var k3 = 0u; k3 < 7u; k3 = k3 + 1u) {
    let i4: u32 = (k3 * 9u) + gi;
    let v5: f32 = in0[i4];
    let mn6: f32 = select(select(max(m1, v5), v5, ((bitcast<u32>(v5) & 0x7fffffffu) > 0x7f800000u)), m1, ((bitcast<u32>(m1) & 0x7fffffffu) > 0x7f800000u));
    let dm7: f32 = m1 - mn6;
    let corr8: f32 = exp(dm7);
    let dv9: f32 = v5 - mn6;
    let p10: f32 = exp(dv9);
    let sc11: f32 = s2 * corr8;
    s2 = sc11 + p10;
    m1 = mn6;
    }
    let ls12: f32 = log(s2);
    let rs13: f32 = 1.0 / s2;
    let bad14: bool = ((bitcast<u32>(m1) & 0x7f800000u) == 0x7f800000u) || !(0.0 < s2);
    for (var k15 = 0u; k15 < 7u; k15 = k15 + 1u) {
    let i16_: u32 = (k15 * 9u) + gi;
    let v17: f32 = in0[i16_];
    let d18: f32 = v17 - m1;
    let y19: f32 = d18 - ls12;
    let r20: f32 = select(y19, bitcast<f32>(0x7fc00000u), bad14);
    out0[i16_] = r20;
    }
}
