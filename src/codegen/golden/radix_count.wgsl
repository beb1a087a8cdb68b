@group(0) @binding(0) var<storage, read> in0: array<i32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 8u) { return; }
    let o1: u32 = gi / 4u;
    let bk2: u32 = gi % 4u;
    var c3: u32 = 0u;
    var c4: u32 = 0u;
    var c5: u32 = 0u;
    var c6: u32 = 0u;
    var c7: u32 = 0u;
    var c8: u32 = 0u;
    var c9: u32 = 0u;
    var c10: u32 = 0u;
    var c11: u32 = 0u;
    var c12: u32 = 0u;
    var c13: u32 = 0u;
    var c14: u32 = 0u;
    var c15: u32 = 0u;
    var c16: u32 = 0u;
    var c17: u32 = 0u;
    var c18: u32 = 0u;
    let bf19: u32 = bk2 * 512u;
    for (var j20 = 0u; j20 < 512u; j20 = j20 + 1u) {
    let e21: u32 = bf19 + j20;
    if (e21 < 2048u) {
    let p22: u32 = j20 + (gi * 512u);
    let v23: i32 = in0[p22];
    let ix24: u32 = u32(v23);
    let p25: u32 = (o1 * 2048u) + (ix24 * 1u);
    let v26: f32 = in1[p25];
    let v27: f32 = v26;
    let b28: u32 = select(bitcast<u32>(v27), 0u, v27 == 0.0);
    let key29: u32 = select(select(b28 + 2147483648u, 4294967295u - b28, b28 >= 2147483648u), 4294967295u, ((bitcast<u32>(v27) & 0x7fffffffu) > 0x7f800000u));
    let dg30: u32 = (key29 >> 4u) % 16u;
    c3 = c3 + select(0u, 1u, dg30 == 0u);
    c4 = c4 + select(0u, 1u, dg30 == 1u);
    c5 = c5 + select(0u, 1u, dg30 == 2u);
    c6 = c6 + select(0u, 1u, dg30 == 3u);
    c7 = c7 + select(0u, 1u, dg30 == 4u);
    c8 = c8 + select(0u, 1u, dg30 == 5u);
    c9 = c9 + select(0u, 1u, dg30 == 6u);
    c10 = c10 + select(0u, 1u, dg30 == 7u);
    c11 = c11 + select(0u, 1u, dg30 == 8u);
    c12 = c12 + select(0u, 1u, dg30 == 9u);
    c13 = c13 + select(0u, 1u, dg30 == 10u);
    c14 = c14 + select(0u, 1u, dg30 == 11u);
    c15 = c15 + select(0u, 1u, dg30 == 12u);
    c16 = c16 + select(0u, 1u, dg30 == 13u);
    c17 = c17 + select(0u, 1u, dg30 == 14u);
    c18 = c18 + select(0u, 1u, dg30 == 15u);
    }
    }
    let ca31: u32 = (o1 * 64u) + (bk2 + 0u);
    out0[ca31] = i32(c3);
    let ca32: u32 = (o1 * 64u) + (bk2 + 4u);
    out0[ca32] = i32(c4);
    let ca33: u32 = (o1 * 64u) + (bk2 + 8u);
    out0[ca33] = i32(c5);
    let ca34: u32 = (o1 * 64u) + (bk2 + 12u);
    out0[ca34] = i32(c6);
    let ca35: u32 = (o1 * 64u) + (bk2 + 16u);
    out0[ca35] = i32(c7);
    let ca36: u32 = (o1 * 64u) + (bk2 + 20u);
    out0[ca36] = i32(c8);
    let ca37: u32 = (o1 * 64u) + (bk2 + 24u);
    out0[ca37] = i32(c9);
    let ca38: u32 = (o1 * 64u) + (bk2 + 28u);
    out0[ca38] = i32(c10);
    let ca39: u32 = (o1 * 64u) + (bk2 + 32u);
    out0[ca39] = i32(c11);
    let ca40: u32 = (o1 * 64u) + (bk2 + 36u);
    out0[ca40] = i32(c12);
    let ca41: u32 = (o1 * 64u) + (bk2 + 40u);
    out0[ca41] = i32(c13);
    let ca42: u32 = (o1 * 64u) + (bk2 + 44u);
    out0[ca42] = i32(c14);
    let ca43: u32 = (o1 * 64u) + (bk2 + 48u);
    out0[ca43] = i32(c15);
    let ca44: u32 = (o1 * 64u) + (bk2 + 52u);
    out0[ca44] = i32(c16);
    let ca45: u32 = (o1 * 64u) + (bk2 + 56u);
    out0[ca45] = i32(c17);
    let ca46: u32 = (o1 * 64u) + (bk2 + 60u);
    out0[ca46] = i32(c18);
}
