enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f16>;
@group(0) @binding(2) var<storage, read> in1: array<f16>;
@group(0) @binding(3) var<storage, read_write> out0: array<f16>;
// 16-bit floats in f32 registers. Rounding is done on the bits, so it is
// exact on every driver (WGSL leaves f32-to-f16 conversion of values out
// of f16's range undefined): to nearest, ties to even, overflow to
// infinity, NaN kept (as PyTorch's `.half()` and `.bfloat16()`).

// x rounded to the nearest f16, as an f32.
fn f16_round(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    let sign = b & 0x80000000u;
    if (a > 0x7f800000u) { return x; }
    // 65520 and above round to infinity.
    if (a >= 0x477ff000u) { return bitcast<f32>(sign | 0x7f800000u); }
    // Below 2^-14 f16 is subnormal: multiples of 2^-24, rounded half to
    // even by round() on an exact product.
    if (a < 0x38800000u) {
        let m = round(bitcast<f32>(a) * 16777216.0) / 16777216.0;
        return bitcast<f32>(sign | bitcast<u32>(m));
    }
    let r = (a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u;
    return bitcast<f32>(sign | r);
}

fn f16_roundx4(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(f16_round(x.x), f16_round(x.y), f16_round(x.z), f16_round(x.w));
}

// The bf16 pattern (low 16 bits) nearest to x.
fn bf16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

// x rounded to the nearest bf16, as an f32.
fn bf16_round(x: f32) -> f32 {
    return bitcast<f32>(bf16_bits(x) << 16u);
}

fn bf16_roundx4(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(bf16_round(x.x), bf16_round(x.y), bf16_round(x.z), bf16_round(x.w));
}

// The bf16 in the half of word w that element index i selects (even: low).
fn bf16_at(w: u32, i: u32) -> f32 {
    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u));
}

var<workgroup> ta1: array<f16, 2048>;
var<workgroup> tb2: array<f16, 2048>;
var<workgroup> tc3: array<f32, 4096>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 1u) { return; }
    let bi4: u32 = gi;
    let tm5: u32 = 0u;
    let tn6: u32 = 0u;
    let sg7: u32 = lid / 32u;
    let qr8: u32 = (sg7 / 2u) * 32u;
    let qc9: u32 = (sg7 % 2u) * 32u;
    for (var s10 = 0u; s10 < 32u; s10 = s10 + 1u) {
    let q11: u32 = lid + (s10 * 128u);
    tc3[q11] = 0.0;
    }
    workgroupBarrier();
    var acc12 = coopLoadT<coop_mat16x16<f32, C>>(&tc3[((qr8 + 0u) * 64u) + (qc9 + 0u)], 64u);
    var acc13 = coopLoadT<coop_mat16x16<f32, C>>(&tc3[((qr8 + 0u) * 64u) + (qc9 + 16u)], 64u);
    var acc14 = coopLoadT<coop_mat16x16<f32, C>>(&tc3[((qr8 + 16u) * 64u) + (qc9 + 0u)], 64u);
    var acc15 = coopLoadT<coop_mat16x16<f32, C>>(&tc3[((qr8 + 16u) * 64u) + (qc9 + 16u)], 64u);
    for (var ks16 = 0u; ks16 < 1u; ks16 = ks16 + 1u) {
    let kfirst17: u32 = ks16 * 32u;
    let q18: u32 = lid;
    let arow19: u32 = lid / 32u;
    let acol20: u32 = kfirst17 + (q18 % 32u);
    let ok21: bool = (arow19 < 5u) && (acol20 < 24u);
    let i22: u32 = select(0u, (bi4 * 120u) + ((arow19 * 24u) + acol20), ok21);
    let v23: f32 = f32(in0[i22]);
    ta1[q18] = f16(select(0.0, v23, ok21));
    let q24: u32 = lid + 128u;
    let arow25: u32 = (lid / 32u) + 4u;
    let acol26: u32 = kfirst17 + (q24 % 32u);
    let ok27: bool = (arow25 < 5u) && (acol26 < 24u);
    let i28: u32 = select(0u, (bi4 * 120u) + ((arow25 * 24u) + acol26), ok27);
    let v29: f32 = f32(in0[i28]);
    ta1[q24] = f16(select(0.0, v29, ok27));
    let q30: u32 = lid + 256u;
    let arow31: u32 = (lid / 32u) + 8u;
    let acol32: u32 = kfirst17 + (q30 % 32u);
    let ok33: bool = (arow31 < 5u) && (acol32 < 24u);
    let i34: u32 = select(0u, (bi4 * 120u) + ((arow31 * 24u) + acol32), ok33);
    let v35: f32 = f32(in0[i34]);
    ta1[q30] = f16(select(0.0, v35, ok33));
    let q36: u32 = lid + 384u;
    let arow37: u32 = (lid / 32u) + 12u;
    let acol38: u32 = kfirst17 + (q36 % 32u);
    let ok39: bool = (arow37 < 5u) && (acol38 < 24u);
    let i40: u32 = select(0u, (bi4 * 120u) + ((arow37 * 24u) + acol38), ok39);
    let v41: f32 = f32(in0[i40]);
    ta1[q36] = f16(select(0.0, v41, ok39));
    let q42: u32 = lid + 512u;
    let arow43: u32 = (lid / 32u) + 16u;
    let acol44: u32 = kfirst17 + (q42 % 32u);
    let ok45: bool = (arow43 < 5u) && (acol44 < 24u);
    let i46: u32 = select(0u, (bi4 * 120u) + ((arow43 * 24u) + acol44), ok45);
    let v47: f32 = f32(in0[i46]);
    ta1[q42] = f16(select(0.0, v47, ok45));
    let q48: u32 = lid + 640u;
    let arow49: u32 = (lid / 32u) + 20u;
    let acol50: u32 = kfirst17 + (q48 % 32u);
    let ok51: bool = (arow49 < 5u) && (acol50 < 24u);
    let i52: u32 = select(0u, (bi4 * 120u) + ((arow49 * 24u) + acol50), ok51);
    let v53: f32 = f32(in0[i52]);
    ta1[q48] = f16(select(0.0, v53, ok51));
    let q54: u32 = lid + 768u;
    let arow55: u32 = (lid / 32u) + 24u;
    let acol56: u32 = kfirst17 + (q54 % 32u);
    let ok57: bool = (arow55 < 5u) && (acol56 < 24u);
    let i58: u32 = select(0u, (bi4 * 120u) + ((arow55 * 24u) + acol56), ok57);
    let v59: f32 = f32(in0[i58]);
    ta1[q54] = f16(select(0.0, v59, ok57));
    let q60: u32 = lid + 896u;
    let arow61: u32 = (lid / 32u) + 28u;
    let acol62: u32 = kfirst17 + (q60 % 32u);
    let ok63: bool = (arow61 < 5u) && (acol62 < 24u);
    let i64: u32 = select(0u, (bi4 * 120u) + ((arow61 * 24u) + acol62), ok63);
    let v65: f32 = f32(in0[i64]);
    ta1[q60] = f16(select(0.0, v65, ok63));
    let q66: u32 = lid + 1024u;
    let arow67: u32 = (lid / 32u) + 32u;
    let acol68: u32 = kfirst17 + (q66 % 32u);
    let ok69: bool = (arow67 < 5u) && (acol68 < 24u);
    let i70: u32 = select(0u, (bi4 * 120u) + ((arow67 * 24u) + acol68), ok69);
    let v71: f32 = f32(in0[i70]);
    ta1[q66] = f16(select(0.0, v71, ok69));
    let q72: u32 = lid + 1152u;
    let arow73: u32 = (lid / 32u) + 36u;
    let acol74: u32 = kfirst17 + (q72 % 32u);
    let ok75: bool = (arow73 < 5u) && (acol74 < 24u);
    let i76: u32 = select(0u, (bi4 * 120u) + ((arow73 * 24u) + acol74), ok75);
    let v77: f32 = f32(in0[i76]);
    ta1[q72] = f16(select(0.0, v77, ok75));
    let q78: u32 = lid + 1280u;
    let arow79: u32 = (lid / 32u) + 40u;
    let acol80: u32 = kfirst17 + (q78 % 32u);
    let ok81: bool = (arow79 < 5u) && (acol80 < 24u);
    let i82: u32 = select(0u, (bi4 * 120u) + ((arow79 * 24u) + acol80), ok81);
    let v83: f32 = f32(in0[i82]);
    ta1[q78] = f16(select(0.0, v83, ok81));
    let q84: u32 = lid + 1408u;
    let arow85: u32 = (lid / 32u) + 44u;
    let acol86: u32 = kfirst17 + (q84 % 32u);
    let ok87: bool = (arow85 < 5u) && (acol86 < 24u);
    let i88: u32 = select(0u, (bi4 * 120u) + ((arow85 * 24u) + acol86), ok87);
    let v89: f32 = f32(in0[i88]);
    ta1[q84] = f16(select(0.0, v89, ok87));
    let q90: u32 = lid + 1536u;
    let arow91: u32 = (lid / 32u) + 48u;
    let acol92: u32 = kfirst17 + (q90 % 32u);
    let ok93: bool = (arow91 < 5u) && (acol92 < 24u);
    let i94: u32 = select(0u, (bi4 * 120u) + ((arow91 * 24u) + acol92), ok93);
    let v95: f32 = f32(in0[i94]);
    ta1[q90] = f16(select(0.0, v95, ok93));
    let q96: u32 = lid + 1664u;
    let arow97: u32 = (lid / 32u) + 52u;
    let acol98: u32 = kfirst17 + (q96 % 32u);
    let ok99: bool = (arow97 < 5u) && (acol98 < 24u);
    let i100: u32 = select(0u, (bi4 * 120u) + ((arow97 * 24u) + acol98), ok99);
    let v101: f32 = f32(in0[i100]);
    ta1[q96] = f16(select(0.0, v101, ok99));
    let q102: u32 = lid + 1792u;
    let arow103: u32 = (lid / 32u) + 56u;
    let acol104: u32 = kfirst17 + (q102 % 32u);
    let ok105: bool = (arow103 < 5u) && (acol104 < 24u);
    let i106: u32 = select(0u, (bi4 * 120u) + ((arow103 * 24u) + acol104), ok105);
    let v107: f32 = f32(in0[i106]);
    ta1[q102] = f16(select(0.0, v107, ok105));
    let q108: u32 = lid + 1920u;
    let arow109: u32 = (lid / 32u) + 60u;
    let acol110: u32 = kfirst17 + (q108 % 32u);
    let ok111: bool = (arow109 < 5u) && (acol110 < 24u);
    let i112: u32 = select(0u, (bi4 * 120u) + ((arow109 * 24u) + acol110), ok111);
    let v113: f32 = f32(in0[i112]);
    ta1[q108] = f16(select(0.0, v113, ok111));
    let q114: u32 = lid;
    let brow115: u32 = kfirst17 + (q114 / 64u);
    let bcol116: u32 = lid % 64u;
    let ok117: bool = (brow115 < 24u) && (bcol116 < 6u);
    let i118: u32 = select(0u, (bi4 * 144u) + ((brow115 * 6u) + bcol116), ok117);
    let j119: u32 = ((i118 % 6u) * 24u) + (i118 / 6u);
    let v120: f32 = f32(in1[j119]);
    tb2[q114] = f16(select(0.0, v120, ok117));
    let q121: u32 = lid + 128u;
    let brow122: u32 = kfirst17 + (q121 / 64u);
    let bcol123: u32 = lid % 64u;
    let ok124: bool = (brow122 < 24u) && (bcol123 < 6u);
    let i125: u32 = select(0u, (bi4 * 144u) + ((brow122 * 6u) + bcol123), ok124);
    let j126: u32 = ((i125 % 6u) * 24u) + (i125 / 6u);
    let v127: f32 = f32(in1[j126]);
    tb2[q121] = f16(select(0.0, v127, ok124));
    let q128: u32 = lid + 256u;
    let brow129: u32 = kfirst17 + (q128 / 64u);
    let bcol130: u32 = lid % 64u;
    let ok131: bool = (brow129 < 24u) && (bcol130 < 6u);
    let i132: u32 = select(0u, (bi4 * 144u) + ((brow129 * 6u) + bcol130), ok131);
    let j133: u32 = ((i132 % 6u) * 24u) + (i132 / 6u);
    let v134: f32 = f32(in1[j133]);
    tb2[q128] = f16(select(0.0, v134, ok131));
    let q135: u32 = lid + 384u;
    let brow136: u32 = kfirst17 + (q135 / 64u);
    let bcol137: u32 = lid % 64u;
    let ok138: bool = (brow136 < 24u) && (bcol137 < 6u);
    let i139: u32 = select(0u, (bi4 * 144u) + ((brow136 * 6u) + bcol137), ok138);
    let j140: u32 = ((i139 % 6u) * 24u) + (i139 / 6u);
    let v141: f32 = f32(in1[j140]);
    tb2[q135] = f16(select(0.0, v141, ok138));
    let q142: u32 = lid + 512u;
    let brow143: u32 = kfirst17 + (q142 / 64u);
    let bcol144: u32 = lid % 64u;
    let ok145: bool = (brow143 < 24u) && (bcol144 < 6u);
    let i146: u32 = select(0u, (bi4 * 144u) + ((brow143 * 6u) + bcol144), ok145);
    let j147: u32 = ((i146 % 6u) * 24u) + (i146 / 6u);
    let v148: f32 = f32(in1[j147]);
    tb2[q142] = f16(select(0.0, v148, ok145));
    let q149: u32 = lid + 640u;
    let brow150: u32 = kfirst17 + (q149 / 64u);
    let bcol151: u32 = lid % 64u;
    let ok152: bool = (brow150 < 24u) && (bcol151 < 6u);
    let i153: u32 = select(0u, (bi4 * 144u) + ((brow150 * 6u) + bcol151), ok152);
    let j154: u32 = ((i153 % 6u) * 24u) + (i153 / 6u);
    let v155: f32 = f32(in1[j154]);
    tb2[q149] = f16(select(0.0, v155, ok152));
    let q156: u32 = lid + 768u;
    let brow157: u32 = kfirst17 + (q156 / 64u);
    let bcol158: u32 = lid % 64u;
    let ok159: bool = (brow157 < 24u) && (bcol158 < 6u);
    let i160: u32 = select(0u, (bi4 * 144u) + ((brow157 * 6u) + bcol158), ok159);
    let j161: u32 = ((i160 % 6u) * 24u) + (i160 / 6u);
    let v162: f32 = f32(in1[j161]);
    tb2[q156] = f16(select(0.0, v162, ok159));
    let q163: u32 = lid + 896u;
    let brow164: u32 = kfirst17 + (q163 / 64u);
    let bcol165: u32 = lid % 64u;
    let ok166: bool = (brow164 < 24u) && (bcol165 < 6u);
    let i167: u32 = select(0u, (bi4 * 144u) + ((brow164 * 6u) + bcol165), ok166);
    let j168: u32 = ((i167 % 6u) * 24u) + (i167 / 6u);
    let v169: f32 = f32(in1[j168]);
    tb2[q163] = f16(select(0.0, v169, ok166));
    let q170: u32 = lid + 1024u;
    let brow171: u32 = kfirst17 + (q170 / 64u);
    let bcol172: u32 = lid % 64u;
    let ok173: bool = (brow171 < 24u) && (bcol172 < 6u);
    let i174: u32 = select(0u, (bi4 * 144u) + ((brow171 * 6u) + bcol172), ok173);
    let j175: u32 = ((i174 % 6u) * 24u) + (i174 / 6u);
    let v176: f32 = f32(in1[j175]);
    tb2[q170] = f16(select(0.0, v176, ok173));
    let q177: u32 = lid + 1152u;
    let brow178: u32 = kfirst17 + (q177 / 64u);
    let bcol179: u32 = lid % 64u;
    let ok180: bool = (brow178 < 24u) && (bcol179 < 6u);
    let i181: u32 = select(0u, (bi4 * 144u) + ((brow178 * 6u) + bcol179), ok180);
    let j182: u32 = ((i181 % 6u) * 24u) + (i181 / 6u);
    let v183: f32 = f32(in1[j182]);
    tb2[q177] = f16(select(0.0, v183, ok180));
    let q184: u32 = lid + 1280u;
    let brow185: u32 = kfirst17 + (q184 / 64u);
    let bcol186: u32 = lid % 64u;
    let ok187: bool = (brow185 < 24u) && (bcol186 < 6u);
    let i188: u32 = select(0u, (bi4 * 144u) + ((brow185 * 6u) + bcol186), ok187);
    let j189: u32 = ((i188 % 6u) * 24u) + (i188 / 6u);
    let v190: f32 = f32(in1[j189]);
    tb2[q184] = f16(select(0.0, v190, ok187));
    let q191: u32 = lid + 1408u;
    let brow192: u32 = kfirst17 + (q191 / 64u);
    let bcol193: u32 = lid % 64u;
    let ok194: bool = (brow192 < 24u) && (bcol193 < 6u);
    let i195: u32 = select(0u, (bi4 * 144u) + ((brow192 * 6u) + bcol193), ok194);
    let j196: u32 = ((i195 % 6u) * 24u) + (i195 / 6u);
    let v197: f32 = f32(in1[j196]);
    tb2[q191] = f16(select(0.0, v197, ok194));
    let q198: u32 = lid + 1536u;
    let brow199: u32 = kfirst17 + (q198 / 64u);
    let bcol200: u32 = lid % 64u;
    let ok201: bool = (brow199 < 24u) && (bcol200 < 6u);
    let i202: u32 = select(0u, (bi4 * 144u) + ((brow199 * 6u) + bcol200), ok201);
    let j203: u32 = ((i202 % 6u) * 24u) + (i202 / 6u);
    let v204: f32 = f32(in1[j203]);
    tb2[q198] = f16(select(0.0, v204, ok201));
    let q205: u32 = lid + 1664u;
    let brow206: u32 = kfirst17 + (q205 / 64u);
    let bcol207: u32 = lid % 64u;
    let ok208: bool = (brow206 < 24u) && (bcol207 < 6u);
    let i209: u32 = select(0u, (bi4 * 144u) + ((brow206 * 6u) + bcol207), ok208);
    let j210: u32 = ((i209 % 6u) * 24u) + (i209 / 6u);
    let v211: f32 = f32(in1[j210]);
    tb2[q205] = f16(select(0.0, v211, ok208));
    let q212: u32 = lid + 1792u;
    let brow213: u32 = kfirst17 + (q212 / 64u);
    let bcol214: u32 = lid % 64u;
    let ok215: bool = (brow213 < 24u) && (bcol214 < 6u);
    let i216: u32 = select(0u, (bi4 * 144u) + ((brow213 * 6u) + bcol214), ok215);
    let j217: u32 = ((i216 % 6u) * 24u) + (i216 / 6u);
    let v218: f32 = f32(in1[j217]);
    tb2[q212] = f16(select(0.0, v218, ok215));
    let q219: u32 = lid + 1920u;
    let brow220: u32 = kfirst17 + (q219 / 64u);
    let bcol221: u32 = lid % 64u;
    let ok222: bool = (brow220 < 24u) && (bcol221 < 6u);
    let i223: u32 = select(0u, (bi4 * 144u) + ((brow220 * 6u) + bcol221), ok222);
    let j224: u32 = ((i223 % 6u) * 24u) + (i223 / 6u);
    let v225: f32 = f32(in1[j224]);
    tb2[q219] = f16(select(0.0, v225, ok222));
    workgroupBarrier();
    var fa226 = coopLoadT<coop_mat16x16<f16, A>>(&ta1[((qr8 + 0u) * 32u) + 0u], 32u);
    var fa227 = coopLoadT<coop_mat16x16<f16, A>>(&ta1[((qr8 + 16u) * 32u) + 0u], 32u);
    var fb228 = coopLoadT<coop_mat16x16<f16, B>>(&tb2[0u + (qc9 + 0u)], 64u);
    var fb229 = coopLoadT<coop_mat16x16<f16, B>>(&tb2[0u + (qc9 + 16u)], 64u);
    acc12 = coopMultiplyAdd(fa226, fb228, acc12);
    acc13 = coopMultiplyAdd(fa226, fb229, acc13);
    acc14 = coopMultiplyAdd(fa227, fb228, acc14);
    acc15 = coopMultiplyAdd(fa227, fb229, acc15);
    var fa230 = coopLoadT<coop_mat16x16<f16, A>>(&ta1[((qr8 + 0u) * 32u) + 16u], 32u);
    var fa231 = coopLoadT<coop_mat16x16<f16, A>>(&ta1[((qr8 + 16u) * 32u) + 16u], 32u);
    var fb232 = coopLoadT<coop_mat16x16<f16, B>>(&tb2[1024u + (qc9 + 0u)], 64u);
    var fb233 = coopLoadT<coop_mat16x16<f16, B>>(&tb2[1024u + (qc9 + 16u)], 64u);
    acc12 = coopMultiplyAdd(fa230, fb232, acc12);
    acc13 = coopMultiplyAdd(fa230, fb233, acc13);
    acc14 = coopMultiplyAdd(fa231, fb232, acc14);
    acc15 = coopMultiplyAdd(fa231, fb233, acc15);
    workgroupBarrier();
    }
    coopStoreT(acc12, &tc3[((qr8 + 0u) * 64u) + (qc9 + 0u)], 64u);
    coopStoreT(acc13, &tc3[((qr8 + 0u) * 64u) + (qc9 + 16u)], 64u);
    coopStoreT(acc14, &tc3[((qr8 + 16u) * 64u) + (qc9 + 0u)], 64u);
    coopStoreT(acc15, &tc3[((qr8 + 16u) * 64u) + (qc9 + 16u)], 64u);
    workgroupBarrier();
    for (var s234 = 0u; s234 < 32u; s234 = s234 + 1u) {
    let q235: u32 = lid + (s234 * 128u);
    let row236: u32 = (tm5 * 64u) + (q235 / 64u);
    let col237: u32 = lid % 64u;
    if ((row236 < 5u) && (col237 < 6u)) {
    let idx238: u32 = ((bi4 * 30u) + (row236 * 6u)) + col237;
    let result239: f32 = tc3[q235];
    let v240: f32 = f16_round(result239);
    let v241: f32 = f32(bitcast<f32>(param_word(0u)));
    let v242: f32 = f16_round(v241);
    let v243: f32 = v240 + v242;
    let v244: f32 = f16_round(v243);
    let v245: f32 = select(max(v244, 0.0), v244, ((bitcast<u32>(v244) & 0x7fffffffu) > 0x7f800000u));
    let v246: f32 = f16_round(v245);
    out0[idx238] = f16(v246);
    }
    }
}
