@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<i32>;

@compute @workgroup_size(16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 4u) { return; }
    let o1: u32 = gi;
    for (var j2 = 0u; j2 < 1u; j2 = j2 + 1u) {
    let rr3: u32 = lid + (j2 * 16u);
    let p4: u32 = (o1 * 24u) + (rr3 * 1u);
    out0[p4] = i32(rr3);
    }
    let rr5: u32 = lid + 16u;
    if (rr5 < 24u) {
    let p6: u32 = (o1 * 24u) + (rr5 * 1u);
    out0[p6] = i32(rr5);
    }
    storageBarrier();
    for (var stage7 = 0u; stage7 < 5u; stage7 = stage7 + 1u) {
    for (var step8 = 0u; step8 < stage7 + 1u; step8 = step8 + 1u) {
    let half9: u32 = 32u >> ((step8 + 5u) - stage7);
    let h10: bool = step8 == 0u;
    for (var j11 = 0u; j11 < 1u; j11 = j11 + 1u) {
    let rr12: u32 = lid + (j11 * 16u);
    let base13: u32 = (rr12 / half9) * (half9 + half9);
    let w14: u32 = rr12 % half9;
    let a15: u32 = base13 + w14;
    let b16: u32 = select(a15 + half9, (base13 + ((half9 + half9) - 1u)) - w14, h10);
    if (b16 < 24u) {
    let p17: u32 = (gi * 24u) + a15;
    let p18: u32 = (o1 * 24u) + (b16 * 1u);
    let ix19: i32 = out0[p17];
    let ix20: i32 = out0[p18];
    let q21: u32 = (gi * 24u) + u32(ix19);
    let v22: f32 = in0[q21];
    let q23: u32 = (gi * 24u) + u32(ix20);
    let v24: f32 = in0[q23];
    let h25: bool = ((v22 < v24) || (!((bitcast<u32>(v22) & 0x7fffffffu) > 0x7f800000u) && ((bitcast<u32>(v24) & 0x7fffffffu) > 0x7f800000u))) || (((v24 == v22) || (((bitcast<u32>(v24) & 0x7fffffffu) > 0x7f800000u) && ((bitcast<u32>(v22) & 0x7fffffffu) > 0x7f800000u))) && (ix20 < ix19));
    if (h25) {
    out0[p17] = ix20;
    out0[p18] = ix19;
    }
    }
    }
    let rr26: u32 = lid + 16u;
    if (rr26 < 16u) {
    let base27: u32 = (rr26 / half9) * (half9 + half9);
    let w28: u32 = rr26 % half9;
    let a29: u32 = base27 + w28;
    let b30: u32 = select(a29 + half9, (base27 + ((half9 + half9) - 1u)) - w28, h10);
    if (b30 < 24u) {
    let p31: u32 = (gi * 24u) + a29;
    let p32: u32 = (o1 * 24u) + (b30 * 1u);
    let ix33: i32 = out0[p31];
    let ix34: i32 = out0[p32];
    let q35: u32 = (gi * 24u) + u32(ix33);
    let v36: f32 = in0[q35];
    let q37: u32 = (gi * 24u) + u32(ix34);
    let v38: f32 = in0[q37];
    let h39: bool = ((v36 < v38) || (!((bitcast<u32>(v36) & 0x7fffffffu) > 0x7f800000u) && ((bitcast<u32>(v38) & 0x7fffffffu) > 0x7f800000u))) || (((v38 == v36) || (((bitcast<u32>(v38) & 0x7fffffffu) > 0x7f800000u) && ((bitcast<u32>(v36) & 0x7fffffffu) > 0x7f800000u))) && (ix34 < ix33));
    if (h39) {
    out0[p31] = ix34;
    out0[p32] = ix33;
    }
    }
    }
    storageBarrier();
    }
    }
}
