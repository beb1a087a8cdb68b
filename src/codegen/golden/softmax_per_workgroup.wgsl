@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;

var<workgroup> red_v1: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 2u) { return; }
    var m2: f32 = bitcast<f32>(0xff800000u);
    for (var j3 = 0u; j3 < 1u; j3 = j3 + 1u) {
    let rr4: u32 = lid + (j3 * 256u);
    let k5: u32 = rr4;
    let i6: u32 = ((((gi / 1u) * 300u) + k5) * 1u) + (gi % 1u);
    let v7: f32 = in0[i6];
    m2 = select(select(max(m2, v7), v7, ((bitcast<u32>(v7) & 0x7fffffffu) > 0x7f800000u)), m2, ((bitcast<u32>(m2) & 0x7fffffffu) > 0x7f800000u));
    }
    let rr8: u32 = lid + 256u;
    if (rr8 < 300u) {
    let k9: u32 = rr8;
    let i10: u32 = ((((gi / 1u) * 300u) + k9) * 1u) + (gi % 1u);
    let v11: f32 = in0[i10];
    m2 = select(select(max(m2, v11), v11, ((bitcast<u32>(v11) & 0x7fffffffu) > 0x7f800000u)), m2, ((bitcast<u32>(m2) & 0x7fffffffu) > 0x7f800000u));
    }
    red_v1[lid] = m2;
    workgroupBarrier();
    if (lid < 128u) {
    let a12: f32 = red_v1[lid];
    let b13: f32 = red_v1[lid + 128u];
    red_v1[lid] = select(select(max(a12, b13), b13, ((bitcast<u32>(b13) & 0x7fffffffu) > 0x7f800000u)), a12, ((bitcast<u32>(a12) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    if (lid < 64u) {
    let a14: f32 = red_v1[lid];
    let b15: f32 = red_v1[lid + 64u];
    red_v1[lid] = select(select(max(a14, b15), b15, ((bitcast<u32>(b15) & 0x7fffffffu) > 0x7f800000u)), a14, ((bitcast<u32>(a14) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    if (lid < 32u) {
    let a16: f32 = red_v1[lid];
    let b17: f32 = red_v1[lid + 32u];
    red_v1[lid] = select(select(max(a16, b17), b17, ((bitcast<u32>(b17) & 0x7fffffffu) > 0x7f800000u)), a16, ((bitcast<u32>(a16) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    if (lid < 16u) {
    let a18: f32 = red_v1[lid];
    let b19: f32 = red_v1[lid + 16u];
    red_v1[lid] = select(select(max(a18, b19), b19, ((bitcast<u32>(b19) & 0x7fffffffu) > 0x7f800000u)), a18, ((bitcast<u32>(a18) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    if (lid < 8u) {
    let a20: f32 = red_v1[lid];
    let b21: f32 = red_v1[lid + 8u];
    red_v1[lid] = select(select(max(a20, b21), b21, ((bitcast<u32>(b21) & 0x7fffffffu) > 0x7f800000u)), a20, ((bitcast<u32>(a20) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    if (lid < 4u) {
    let a22: f32 = red_v1[lid];
    let b23: f32 = red_v1[lid + 4u];
    red_v1[lid] = select(select(max(a22, b23), b23, ((bitcast<u32>(b23) & 0x7fffffffu) > 0x7f800000u)), a22, ((bitcast<u32>(a22) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    if (lid < 2u) {
    let a24: f32 = red_v1[lid];
    let b25: f32 = red_v1[lid + 2u];
    red_v1[lid] = select(select(max(a24, b25), b25, ((bitcast<u32>(b25) & 0x7fffffffu) > 0x7f800000u)), a24, ((bitcast<u32>(a24) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    if (lid < 1u) {
    let a26: f32 = red_v1[lid];
    let b27: f32 = red_v1[lid + 1u];
    red_v1[lid] = select(select(max(a26, b27), b27, ((bitcast<u32>(b27) & 0x7fffffffu) > 0x7f800000u)), a26, ((bitcast<u32>(a26) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    let t28: f32 = red_v1[0u];
    workgroupBarrier();
    var s29: f32 = 0.0;
    for (var j30 = 0u; j30 < 1u; j30 = j30 + 1u) {
    let rr31: u32 = lid + (j30 * 256u);
    let k32: u32 = rr31;
    let i33: u32 = ((((gi / 1u) * 300u) + k32) * 1u) + (gi % 1u);
    let v34: f32 = in0[i33];
    let d35: f32 = v34 - t28;
    let e36: f32 = exp(d35);
    s29 = s29 + e36;
    }
    let rr37: u32 = lid + 256u;
    if (rr37 < 300u) {
    let k38: u32 = rr37;
    let i39: u32 = ((((gi / 1u) * 300u) + k38) * 1u) + (gi % 1u);
    let v40: f32 = in0[i39];
    let d41: f32 = v40 - t28;
    let e42: f32 = exp(d41);
    s29 = s29 + e42;
    }
    red_v1[lid] = s29;
    workgroupBarrier();
    if (lid < 128u) {
    let a43: f32 = red_v1[lid];
    let b44: f32 = red_v1[lid + 128u];
    red_v1[lid] = a43 + b44;
    }
    workgroupBarrier();
    if (lid < 64u) {
    let a45: f32 = red_v1[lid];
    let b46: f32 = red_v1[lid + 64u];
    red_v1[lid] = a45 + b46;
    }
    workgroupBarrier();
    if (lid < 32u) {
    let a47: f32 = red_v1[lid];
    let b48: f32 = red_v1[lid + 32u];
    red_v1[lid] = a47 + b48;
    }
    workgroupBarrier();
    if (lid < 16u) {
    let a49: f32 = red_v1[lid];
    let b50: f32 = red_v1[lid + 16u];
    red_v1[lid] = a49 + b50;
    }
    workgroupBarrier();
    if (lid < 8u) {
    let a51: f32 = red_v1[lid];
    let b52: f32 = red_v1[lid + 8u];
    red_v1[lid] = a51 + b52;
    }
    workgroupBarrier();
    if (lid < 4u) {
    let a53: f32 = red_v1[lid];
    let b54: f32 = red_v1[lid + 4u];
    red_v1[lid] = a53 + b54;
    }
    workgroupBarrier();
    if (lid < 2u) {
    let a55: f32 = red_v1[lid];
    let b56: f32 = red_v1[lid + 2u];
    red_v1[lid] = a55 + b56;
    }
    workgroupBarrier();
    if (lid < 1u) {
    let a57: f32 = red_v1[lid];
    let b58: f32 = red_v1[lid + 1u];
    red_v1[lid] = a57 + b58;
    }
    workgroupBarrier();
    let t59: f32 = red_v1[0u];
    let bad60: bool = ((bitcast<u32>(t28) & 0x7f800000u) == 0x7f800000u) || !(0.0 < t59);
    let ls61: f32 = log(t59);
    for (var j62 = 0u; j62 < 1u; j62 = j62 + 1u) {
    let rr63: u32 = lid + (j62 * 256u);
    let k64: u32 = rr63;
    let i65: u32 = ((((gi / 1u) * 300u) + k64) * 1u) + (gi % 1u);
    let v66: f32 = in0[i65];
    let d67: f32 = v66 - t28;
    let y68: f32 = d67 - ls61;
    let r69: f32 = select(y68, bitcast<f32>(0x7fc00000u), bad60);
    out0[i65] = r69;
    }
    let rr70: u32 = lid + 256u;
    if (rr70 < 300u) {
    let k71: u32 = rr70;
    let i72: u32 = ((((gi / 1u) * 300u) + k71) * 1u) + (gi % 1u);
    let v73: f32 = in0[i72];
    let d74: f32 = v73 - t28;
    let y75: f32 = d74 - ls61;
    let r76: f32 = select(y75, bitcast<f32>(0x7fc00000u), bad60);
    out0[i72] = r76;
    }
}
