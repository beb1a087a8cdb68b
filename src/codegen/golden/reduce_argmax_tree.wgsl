@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<i32>;

var<workgroup> red_v14: array<f32, 256>;
var<workgroup> red_i15: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 2u) { return; }
    let o1: u32 = gi / 1u;
    let r02: u32 = (gi % 1u) + (lid * 1u);
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
    if (lid < 128u) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w16: f32 = red_v14[lid + 128u];
    let wi17: u32 = red_i15[lid + 128u];
    let h18: bool = (((bitcast<u32>(w16) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi17 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w16) || ((w16 == acc3) && (wi17 < best4))));
    if (h18) {
    acc3 = w16;
    best4 = wi17;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    if (lid < 64u) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w19: f32 = red_v14[lid + 64u];
    let wi20: u32 = red_i15[lid + 64u];
    let h21: bool = (((bitcast<u32>(w19) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi20 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w19) || ((w19 == acc3) && (wi20 < best4))));
    if (h21) {
    acc3 = w19;
    best4 = wi20;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    if (lid < 32u) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w22: f32 = red_v14[lid + 32u];
    let wi23: u32 = red_i15[lid + 32u];
    let h24: bool = (((bitcast<u32>(w22) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi23 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w22) || ((w22 == acc3) && (wi23 < best4))));
    if (h24) {
    acc3 = w22;
    best4 = wi23;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    if (lid < 16u) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w25: f32 = red_v14[lid + 16u];
    let wi26: u32 = red_i15[lid + 16u];
    let h27: bool = (((bitcast<u32>(w25) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi26 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w25) || ((w25 == acc3) && (wi26 < best4))));
    if (h27) {
    acc3 = w25;
    best4 = wi26;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    if (lid < 8u) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w28: f32 = red_v14[lid + 8u];
    let wi29: u32 = red_i15[lid + 8u];
    let h30: bool = (((bitcast<u32>(w28) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi29 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w28) || ((w28 == acc3) && (wi29 < best4))));
    if (h30) {
    acc3 = w28;
    best4 = wi29;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    if (lid < 4u) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w31: f32 = red_v14[lid + 4u];
    let wi32: u32 = red_i15[lid + 4u];
    let h33: bool = (((bitcast<u32>(w31) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi32 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w31) || ((w31 == acc3) && (wi32 < best4))));
    if (h33) {
    acc3 = w31;
    best4 = wi32;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    if (lid < 2u) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w34: f32 = red_v14[lid + 2u];
    let wi35: u32 = red_i15[lid + 2u];
    let h36: bool = (((bitcast<u32>(w34) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi35 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w34) || ((w34 == acc3) && (wi35 < best4))));
    if (h36) {
    acc3 = w34;
    best4 = wi35;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    if (lid < 1u) {
    acc3 = red_v14[lid];
    best4 = red_i15[lid];
    let w37: f32 = red_v14[lid + 1u];
    let wi38: u32 = red_i15[lid + 1u];
    let h39: bool = (((bitcast<u32>(w37) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (wi38 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < w37) || ((w37 == acc3) && (wi38 < best4))));
    if (h39) {
    acc3 = w37;
    best4 = wi38;
    }
    red_v14[lid] = acc3;
    red_i15[lid] = best4;
    }
    workgroupBarrier();
    if (lid == 0u) {
    let result40: i32 = i32(red_i15[0u]);
    out0[gi] = result40;
    }
}
