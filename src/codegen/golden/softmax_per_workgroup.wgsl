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
    let i6: u32 = ((gi * 300u) + lid) + (j3 * 256u);
    let v7: f32 = in0[i6];
    m2 = select(select(max(m2, v7), v7, ((bitcast<u32>(v7) & 0x7fffffffu) > 0x7f800000u)), m2, ((bitcast<u32>(m2) & 0x7fffffffu) > 0x7f800000u));
    }
    let rr8: u32 = lid + 256u;
    if (rr8 < 300u) {
    let k9: u32 = rr8;
    let i10: u32 = ((gi * 300u) + lid) + 256u;
    let v11: f32 = in0[i10];
    m2 = select(select(max(m2, v11), v11, ((bitcast<u32>(v11) & 0x7fffffffu) > 0x7f800000u)), m2, ((bitcast<u32>(m2) & 0x7fffffffu) > 0x7f800000u));
    }
    red_v1[lid] = m2;
    workgroupBarrier();
    for (var t12 = 0u; t12 < 8u; t12 = t12 + 1u) {
    let half13: u32 = 128u >> t12;
    let p14: u32 = lid + half13;
    if (lid < half13) {
    let a15: f32 = red_v1[lid];
    let b16: f32 = red_v1[p14];
    red_v1[lid] = select(select(max(a15, b16), b16, ((bitcast<u32>(b16) & 0x7fffffffu) > 0x7f800000u)), a15, ((bitcast<u32>(a15) & 0x7fffffffu) > 0x7f800000u));
    }
    workgroupBarrier();
    }
    let t17: f32 = red_v1[0u];
    workgroupBarrier();
    var s18: f32 = 0.0;
    for (var j19 = 0u; j19 < 1u; j19 = j19 + 1u) {
    let rr20: u32 = lid + (j19 * 256u);
    let k21: u32 = rr20;
    let i22: u32 = ((gi * 300u) + lid) + (j19 * 256u);
    let v23: f32 = in0[i22];
    let d24: f32 = v23 - t17;
    let e25: f32 = exp(d24);
    s18 = s18 + e25;
    }
    let rr26: u32 = lid + 256u;
    if (rr26 < 300u) {
    let k27: u32 = rr26;
    let i28: u32 = ((gi * 300u) + lid) + 256u;
    let v29: f32 = in0[i28];
    let d30: f32 = v29 - t17;
    let e31: f32 = exp(d30);
    s18 = s18 + e31;
    }
    red_v1[lid] = s18;
    workgroupBarrier();
    for (var t32 = 0u; t32 < 8u; t32 = t32 + 1u) {
    let half33: u32 = 128u >> t32;
    let p34: u32 = lid + half33;
    if (lid < half33) {
    let a35: f32 = red_v1[lid];
    let b36: f32 = red_v1[p34];
    red_v1[lid] = a35 + b36;
    }
    workgroupBarrier();
    }
    let t37: f32 = red_v1[0u];
    let bad38: bool = ((bitcast<u32>(t17) & 0x7f800000u) == 0x7f800000u) || !(0.0 < t37);
    let ls39: f32 = log(t37);
    for (var j40 = 0u; j40 < 1u; j40 = j40 + 1u) {
    let rr41: u32 = lid + (j40 * 256u);
    let k42: u32 = rr41;
    let i43: u32 = ((gi * 300u) + lid) + (j40 * 256u);
    let v44: f32 = in0[i43];
    let d45: f32 = v44 - t17;
    let y46: f32 = d45 - ls39;
    let r47: f32 = select(y46, bitcast<f32>(0x7fc00000u), bad38);
    out0[i43] = r47;
    }
    let rr48: u32 = lid + 256u;
    if (rr48 < 300u) {
    let k49: u32 = rr48;
    let i50: u32 = ((gi * 300u) + lid) + 256u;
    let v51: f32 = in0[i50];
    let d52: f32 = v51 - t17;
    let y53: f32 = d52 - ls39;
    let r54: f32 = select(y53, bitcast<f32>(0x7fc00000u), bad38);
    out0[i50] = r54;
    }
}
