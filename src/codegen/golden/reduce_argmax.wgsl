@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<i32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 64u + lid;
if (gi >= 24u) { return; }
    let o1: u32 = gi;
    let r02: u32 = 0u;
    var acc3: f32 = bitcast<f32>(0xff800000u);
    var best4: u32 = 4294967295u;
    for (var j5 = 0u; j5 < 4u; j5 = j5 + 1u) {
    let rr6: u32 = j5;
    let i7: u32 = gi + (j5 * 24u);
    let v8: f32 = in0[i7];
    let h9: bool = (((bitcast<u32>(v8) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (rr6 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < v8) || ((v8 == acc3) && (rr6 < best4))));
    if (h9) {
    acc3 = v8;
    best4 = rr6;
    }
    }
    let rr10: u32 = 4u;
    if (rr10 < 4u) {
    let i11: u32 = gi + 96u;
    let v12: f32 = in0[i11];
    let h13: bool = (((bitcast<u32>(v12) & 0x7fffffffu) > 0x7f800000u) && (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) || (rr10 < best4))) || (!((bitcast<u32>(acc3) & 0x7fffffffu) > 0x7f800000u) && ((acc3 < v12) || ((v12 == acc3) && (rr10 < best4))));
    if (h13) {
    acc3 = v12;
    best4 = rr10;
    }
    }
    let result14: i32 = i32(best4);
    out0[gi] = result14;
}
