@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<i32>;

var<workgroup> hist4: array<u32, 2048>;
var<workgroup> tot5: array<u32, 16>;
var<workgroup> gt6: array<u32, 128>;
var<workgroup> eq7: array<u32, 128>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 2u) { return; }
    let o1: u32 = gi;
    let ls2: u32 = o1 * 1500u;
    let os3: u32 = o1 * 5u;
    var pre8: u32 = 0u;
    var want9: u32 = 5u;
    for (var pass10 = 0u; pass10 < 8u; pass10 = pass10 + 1u) {
    let sh11: u32 = 28u - (pass10 * 4u);
    let fx12: u32 = (pre8 >> sh11) >> 4u;
    var c13: u32 = 0u;
    var c14: u32 = 0u;
    var c15: u32 = 0u;
    var c16: u32 = 0u;
    var c17: u32 = 0u;
    var c18: u32 = 0u;
    var c19: u32 = 0u;
    var c20: u32 = 0u;
    var c21: u32 = 0u;
    var c22: u32 = 0u;
    var c23: u32 = 0u;
    var c24: u32 = 0u;
    var c25: u32 = 0u;
    var c26: u32 = 0u;
    var c27: u32 = 0u;
    var c28: u32 = 0u;
    for (var j29 = 0u; j29 < 12u; j29 = j29 + 1u) {
    let e30: u32 = (j29 * 128u) + lid;
    if (e30 < 1500u) {
    let p31: u32 = ls2 + e30;
    let v32: f32 = in0[p31];
    let v33: f32 = v32;
    let b34: u32 = select(bitcast<u32>(v33), 0u, v33 == 0.0);
    let key35: u32 = select(select(b34 + 2147483648u, 4294967295u - b34, b34 >= 2147483648u), 4294967295u, ((bitcast<u32>(v33) & 0x7fffffffu) > 0x7f800000u));
    let h36: bool = ((key35 >> sh11) >> 4u) == fx12;
    let d37: u32 = (key35 >> sh11) % 16u;
    c13 = c13 + select(0u, 1u, h36 && (d37 == 0u));
    c14 = c14 + select(0u, 1u, h36 && (d37 == 1u));
    c15 = c15 + select(0u, 1u, h36 && (d37 == 2u));
    c16 = c16 + select(0u, 1u, h36 && (d37 == 3u));
    c17 = c17 + select(0u, 1u, h36 && (d37 == 4u));
    c18 = c18 + select(0u, 1u, h36 && (d37 == 5u));
    c19 = c19 + select(0u, 1u, h36 && (d37 == 6u));
    c20 = c20 + select(0u, 1u, h36 && (d37 == 7u));
    c21 = c21 + select(0u, 1u, h36 && (d37 == 8u));
    c22 = c22 + select(0u, 1u, h36 && (d37 == 9u));
    c23 = c23 + select(0u, 1u, h36 && (d37 == 10u));
    c24 = c24 + select(0u, 1u, h36 && (d37 == 11u));
    c25 = c25 + select(0u, 1u, h36 && (d37 == 12u));
    c26 = c26 + select(0u, 1u, h36 && (d37 == 13u));
    c27 = c27 + select(0u, 1u, h36 && (d37 == 14u));
    c28 = c28 + select(0u, 1u, h36 && (d37 == 15u));
    }
    }
    hist4[lid + 0u] = c13;
    hist4[lid + 128u] = c14;
    hist4[lid + 256u] = c15;
    hist4[lid + 384u] = c16;
    hist4[lid + 512u] = c17;
    hist4[lid + 640u] = c18;
    hist4[lid + 768u] = c19;
    hist4[lid + 896u] = c20;
    hist4[lid + 1024u] = c21;
    hist4[lid + 1152u] = c22;
    hist4[lid + 1280u] = c23;
    hist4[lid + 1408u] = c24;
    hist4[lid + 1536u] = c25;
    hist4[lid + 1664u] = c26;
    hist4[lid + 1792u] = c27;
    hist4[lid + 1920u] = c28;
    workgroupBarrier();
    if (lid < 16u) {
    var s38: u32 = 0u;
    let hb39: u32 = lid * 128u;
    for (var j40 = 0u; j40 < 128u; j40 = j40 + 1u) {
    s38 = s38 + hist4[hb39 + j40];
    }
    tot5[lid] = s38;
    }
    workgroupBarrier();
    var cum41: u32 = 0u;
    var dg42: u32 = 0u;
    var bf43: u32 = 0u;
    var fd44: bool = false;
    let t45: u32 = tot5[15u];
    let tk46: bool = !fd44 && ((cum41 + t45) >= want9);
    dg42 = select(dg42, 15u, tk46);
    bf43 = select(bf43, cum41, tk46);
    fd44 = fd44 || tk46;
    cum41 = cum41 + t45;
    let t47: u32 = tot5[14u];
    let tk48: bool = !fd44 && ((cum41 + t47) >= want9);
    dg42 = select(dg42, 14u, tk48);
    bf43 = select(bf43, cum41, tk48);
    fd44 = fd44 || tk48;
    cum41 = cum41 + t47;
    let t49: u32 = tot5[13u];
    let tk50: bool = !fd44 && ((cum41 + t49) >= want9);
    dg42 = select(dg42, 13u, tk50);
    bf43 = select(bf43, cum41, tk50);
    fd44 = fd44 || tk50;
    cum41 = cum41 + t49;
    let t51: u32 = tot5[12u];
    let tk52: bool = !fd44 && ((cum41 + t51) >= want9);
    dg42 = select(dg42, 12u, tk52);
    bf43 = select(bf43, cum41, tk52);
    fd44 = fd44 || tk52;
    cum41 = cum41 + t51;
    let t53: u32 = tot5[11u];
    let tk54: bool = !fd44 && ((cum41 + t53) >= want9);
    dg42 = select(dg42, 11u, tk54);
    bf43 = select(bf43, cum41, tk54);
    fd44 = fd44 || tk54;
    cum41 = cum41 + t53;
    let t55: u32 = tot5[10u];
    let tk56: bool = !fd44 && ((cum41 + t55) >= want9);
    dg42 = select(dg42, 10u, tk56);
    bf43 = select(bf43, cum41, tk56);
    fd44 = fd44 || tk56;
    cum41 = cum41 + t55;
    let t57: u32 = tot5[9u];
    let tk58: bool = !fd44 && ((cum41 + t57) >= want9);
    dg42 = select(dg42, 9u, tk58);
    bf43 = select(bf43, cum41, tk58);
    fd44 = fd44 || tk58;
    cum41 = cum41 + t57;
    let t59: u32 = tot5[8u];
    let tk60: bool = !fd44 && ((cum41 + t59) >= want9);
    dg42 = select(dg42, 8u, tk60);
    bf43 = select(bf43, cum41, tk60);
    fd44 = fd44 || tk60;
    cum41 = cum41 + t59;
    let t61: u32 = tot5[7u];
    let tk62: bool = !fd44 && ((cum41 + t61) >= want9);
    dg42 = select(dg42, 7u, tk62);
    bf43 = select(bf43, cum41, tk62);
    fd44 = fd44 || tk62;
    cum41 = cum41 + t61;
    let t63: u32 = tot5[6u];
    let tk64: bool = !fd44 && ((cum41 + t63) >= want9);
    dg42 = select(dg42, 6u, tk64);
    bf43 = select(bf43, cum41, tk64);
    fd44 = fd44 || tk64;
    cum41 = cum41 + t63;
    let t65: u32 = tot5[5u];
    let tk66: bool = !fd44 && ((cum41 + t65) >= want9);
    dg42 = select(dg42, 5u, tk66);
    bf43 = select(bf43, cum41, tk66);
    fd44 = fd44 || tk66;
    cum41 = cum41 + t65;
    let t67: u32 = tot5[4u];
    let tk68: bool = !fd44 && ((cum41 + t67) >= want9);
    dg42 = select(dg42, 4u, tk68);
    bf43 = select(bf43, cum41, tk68);
    fd44 = fd44 || tk68;
    cum41 = cum41 + t67;
    let t69: u32 = tot5[3u];
    let tk70: bool = !fd44 && ((cum41 + t69) >= want9);
    dg42 = select(dg42, 3u, tk70);
    bf43 = select(bf43, cum41, tk70);
    fd44 = fd44 || tk70;
    cum41 = cum41 + t69;
    let t71: u32 = tot5[2u];
    let tk72: bool = !fd44 && ((cum41 + t71) >= want9);
    dg42 = select(dg42, 2u, tk72);
    bf43 = select(bf43, cum41, tk72);
    fd44 = fd44 || tk72;
    cum41 = cum41 + t71;
    let t73: u32 = tot5[1u];
    let tk74: bool = !fd44 && ((cum41 + t73) >= want9);
    dg42 = select(dg42, 1u, tk74);
    bf43 = select(bf43, cum41, tk74);
    fd44 = fd44 || tk74;
    cum41 = cum41 + t73;
    let t75: u32 = tot5[0u];
    let tk76: bool = !fd44 && ((cum41 + t75) >= want9);
    dg42 = select(dg42, 0u, tk76);
    bf43 = select(bf43, cum41, tk76);
    fd44 = fd44 || tk76;
    cum41 = cum41 + t75;
    want9 = want9 - bf43;
    pre8 = pre8 + (dg42 * (2147483648u >> (31u - sh11)));
    }
    let sf77: u32 = lid * 12u;
    var na78: u32 = 0u;
    var ne79: u32 = 0u;
    for (var j80 = 0u; j80 < 12u; j80 = j80 + 1u) {
    let e81: u32 = sf77 + j80;
    if (e81 < 1500u) {
    let p82: u32 = ls2 + e81;
    let v83: f32 = in0[p82];
    let v84: f32 = v83;
    let b85: u32 = select(bitcast<u32>(v84), 0u, v84 == 0.0);
    let key86: u32 = select(select(b85 + 2147483648u, 4294967295u - b85, b85 >= 2147483648u), 4294967295u, ((bitcast<u32>(v84) & 0x7fffffffu) > 0x7f800000u));
    na78 = na78 + select(0u, 1u, pre8 < key86);
    ne79 = ne79 + select(0u, 1u, key86 == pre8);
    }
    }
    gt6[lid] = na78;
    eq7[lid] = ne79;
    workgroupBarrier();
    if (lid == 0u) {
    var ra87: u32 = 0u;
    var re88: u32 = 0u;
    for (var j89 = 0u; j89 < 128u; j89 = j89 + 1u) {
    let w90: u32 = gt6[j89];
    gt6[j89] = ra87;
    ra87 = ra87 + w90;
    let w91: u32 = eq7[j89];
    eq7[j89] = re88;
    re88 = re88 + w91;
    }
    }
    workgroupBarrier();
    var sn92: u32 = eq7[lid];
    var pos93: u32 = gt6[lid] + min(eq7[lid], want9);
    for (var j94 = 0u; j94 < 12u; j94 = j94 + 1u) {
    let e95: u32 = sf77 + j94;
    if (e95 < 1500u) {
    let p96: u32 = ls2 + e95;
    let v97: f32 = in0[p96];
    let v98: f32 = v97;
    let b99: u32 = select(bitcast<u32>(v98), 0u, v98 == 0.0);
    let key100: u32 = select(select(b99 + 2147483648u, 4294967295u - b99, b99 >= 2147483648u), 4294967295u, ((bitcast<u32>(v98) & 0x7fffffffu) > 0x7f800000u));
    let h101: bool = key100 == pre8;
    let pk102: bool = ((pre8 < key100) || (h101 && (sn92 < want9))) && (pos93 < 5u);
    if (pk102) {
    out0[os3 + pos93] = i32(e95);
    }
    pos93 = pos93 + select(0u, 1u, pk102);
    sn92 = sn92 + select(0u, 1u, h101);
    }
    }
}
