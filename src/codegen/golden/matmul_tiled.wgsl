@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out0: array<vec4<f32>>;

var<workgroup> ta1: array<vec4<f32>, 256>;
var<workgroup> tb2: array<vec4<f32>, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 1u) { return; }
    let bi3: u32 = gi;
    let tm4: u32 = 0u;
    let tn5: u32 = 0u;
    let ty6: u32 = lid / 16u;
    let tx7: u32 = lid % 16u;
    var acc8: vec4<f32> = vec4<f32>(0.0);
    var acc9: vec4<f32> = vec4<f32>(0.0);
    var acc10: vec4<f32> = vec4<f32>(0.0);
    var acc11: vec4<f32> = vec4<f32>(0.0);
    for (var ks12 = 0u; ks12 < 2u; ks12 = ks12 + 1u) {
    let kfirst13: u32 = ks12 * 16u;
    let q14: u32 = lid;
    let akk15: u32 = q14 % 16u;
    let arow16: u32 = (lid / 16u) * 4u;
    let acol17: u32 = kfirst13 + akk15;
    let ok18: bool = (arow16 < 5u) && (acol17 < 24u);
    let i19: u32 = select(0u, ((bi3 * 120u) + (arow16 * 24u)) + acol17, ok18);
    let v20: f32 = in0[i19];
    let ok21: bool = ((arow16 + 1u) < 5u) && (acol17 < 24u);
    let i22: u32 = select(0u, ((bi3 * 120u) + ((arow16 + 1u) * 24u)) + acol17, ok21);
    let v23: f32 = in0[i22];
    let ok24: bool = ((arow16 + 2u) < 5u) && (acol17 < 24u);
    let i25: u32 = select(0u, ((bi3 * 120u) + ((arow16 + 2u) * 24u)) + acol17, ok24);
    let v26: f32 = in0[i25];
    let ok27: bool = ((arow16 + 3u) < 5u) && (acol17 < 24u);
    let i28: u32 = select(0u, ((bi3 * 120u) + ((arow16 + 3u) * 24u)) + acol17, ok27);
    let v29: f32 = in0[i28];
    ta1[(akk15 * 16u) + (q14 / 16u)] = vec4<f32>(select(0.0, v20, ok18), select(0.0, v23, ok21), select(0.0, v26, ok24), select(0.0, v29, ok27));
    let bkk30: u32 = q14 / 16u;
    let brow31: u32 = kfirst13 + bkk30;
    let bcol32: u32 = (lid % 16u) * 4u;
    let ok33: bool = (brow31 < 24u) && (bcol32 < 8u);
    let i34: u32 = select(0u, ((bi3 * 192u) + (brow31 * 8u)) + bcol32, ok33);
    let j35: u32 = ((i34 % 8u) * 24u) + (i34 / 8u);
    let v36: f32 = in1[j35];
    let ok37: bool = (brow31 < 24u) && ((bcol32 + 1u) < 8u);
    let i38: u32 = select(0u, (((bi3 * 192u) + (brow31 * 8u)) + bcol32) + 1u, ok37);
    let j39: u32 = ((i38 % 8u) * 24u) + (i38 / 8u);
    let v40: f32 = in1[j39];
    let ok41: bool = (brow31 < 24u) && ((bcol32 + 2u) < 8u);
    let i42: u32 = select(0u, (((bi3 * 192u) + (brow31 * 8u)) + bcol32) + 2u, ok41);
    let j43: u32 = ((i42 % 8u) * 24u) + (i42 / 8u);
    let v44: f32 = in1[j43];
    let ok45: bool = (brow31 < 24u) && ((bcol32 + 3u) < 8u);
    let i46: u32 = select(0u, (((bi3 * 192u) + (brow31 * 8u)) + bcol32) + 3u, ok45);
    let j47: u32 = ((i46 % 8u) * 24u) + (i46 / 8u);
    let v48: f32 = in1[j47];
    tb2[(bkk30 * 16u) + (q14 % 16u)] = vec4<f32>(select(0.0, v36, ok33), select(0.0, v40, ok37), select(0.0, v44, ok41), select(0.0, v48, ok45));
    workgroupBarrier();
    for (var kk49 = 0u; kk49 < 16u; kk49 = kk49 + 1u) {
    let av50: vec4<f32> = ta1[(kk49 * 16u) + ty6];
    let bv51: vec4<f32> = tb2[(kk49 * 16u) + tx7];
    acc8 = acc8 + (av50[0u] * bv51);
    acc9 = acc9 + (av50[1u] * bv51);
    acc10 = acc10 + (av50[2u] * bv51);
    acc11 = acc11 + (av50[3u] * bv51);
    }
    workgroupBarrier();
    }
    var accs52: array<vec4<f32>, 4>;
    accs52[0u] = acc8;
    accs52[1u] = acc9;
    accs52[2u] = acc10;
    accs52[3u] = acc11;
    for (var i53 = 0u; i53 < 4u; i53 = i53 + 1u) {
    let row55: u32 = ((lid / 16u) * 4u) + i53;
    let col56: u32 = (lid % 16u) * 4u;
    if ((row55 < 5u) && (col56 < 8u)) {
    let quad57: u32 = (((bi3 * 40u) + (row55 * 8u)) + col56) / 4u;
    let result58: vec4<f32> = accs52[i53];
    let v59: vec4<f32> = vec4<f32>(bitcast<f32>(param_word(0u)));
    let v60: vec4<f32> = result58 + v59;
    let v61: vec4<f32> = select(max(v60, vec4<f32>(0.0)), v60, ((bitcast<vec4<u32>>(v60) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u)));
    out0[quad57] = v61;
    }
    }
}
