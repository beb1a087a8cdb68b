@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<i32>;

var<workgroup> red_v14: array<f32, 256>;
var<workgroup> red_i15: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 2u) { return; }
    let o1: u32 = gi;
    let r02: u32 = lid;
    var acc3: f32 = bitcast<f32>(0xff800000u);
    var best4: u32 = 4294967295u;
    for (var j5 = 0u; j5 < 1u; j5 = j5 + 1u) {
    let rr6: u32 = r02 + (j5 * 256u);
    let i7: u32 = (o1 * 300u) + (rr6 * 1u);
    let v8: f32 = in0[i7];
    let h9: bool = (((bitcast<u32>(v8) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (rr6 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < v8) || ((v8 == acc3) && (rr6 < best4))));
    if (h9) {
    acc3 = v8;
    best4 = rr6;
    }
    }
    let rr10: u32 = r02 + 256u;
    if (rr10 < 300u) {
    let i11: u32 = (o1 * 300u) + (rr10 * 1u);
    let v12: f32 = in0[i11];
    let h13: bool = (((bitcast<u32>(v12) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (rr10 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < v12) || ((v12 == acc3) && (rr10 < best4))));
    if (h13) {
    acc3 = v12;
    best4 = rr10;
    }
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    workgroupBarrier();
    for (var t16 = 0u; t16 < 8u; t16 = t16 + 1u) {
    let half17: u32 = 128u >> t16;
    let p18: u32 = lid + half17;
    if (lid < half17) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w19: f32 = red_v14[p18];
    let wi20: u32 = red_i15[p18];
    let h21: bool = (((bitcast<u32>(w19) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi20 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w19) || ((w19 == acc3) && (wi20 < best4))));
    if (h21) {
    acc3 = w19;
    best4 = wi20;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    }
    if (lid == 0u) {
    let result22: i32 = i32(red_i15[0u]);
    out0[gi] = result22;
    }
}
