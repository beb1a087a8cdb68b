@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 3>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read> in2: array<f32>;
@group(0) @binding(4) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 63u) { return; }
    let r1: u32 = gi - 14u;
    let c2: u32 = r1 / 21u;
    let r3: u32 = r1 % 21u;
    let c4: u32 = r3 / 1u;
    let r5: u32 = 0u;
    let h6: bool = (((gi >= 14u) && (c2 < 3u)) && (c4 < 7u)) && (r5 == 0u);
    let j7: u32 = select(0u, (c2 * 7u) + (c4 * 1u), h6);
    let v8: f32 = f32(bitcast<f32>(param_word(0u)));
    var v9: f32 = v8;
    if (h6) {
    let j10: u32 = 0u;
    let v11: f32 = f32(bitcast<f32>(param_word(1u)));
    let j12: u32 = (j7 % 7u) + ((j7 / 7u) * 24u);
    let v13: f32 = in0[j12];
    let v14: f32 = f32(bitcast<f32>(param_word(2u)));
    let v15: f32 = v13 * v14;
    let j16: u32 = ((j7 % 7u) + ((j7 / 7u) * 24u)) + 7u;
    let v17: f32 = in1[j16];
    let v18: f32 = f32(bitcast<f32>(param_word(3u)));
    let v19: f32 = v17 * v18;
    let v20: f32 = v15 + v19;
    let j21: u32 = ((j7 % 7u) + ((j7 / 7u) * 24u)) + 14u;
    let v22: f32 = in2[j21];
    let v23: f32 = f32(bitcast<f32>(param_word(4u)));
    let v24: f32 = v22 * v23;
    let v25: f32 = v20 + v24;
    let v26: f32 = exp(v25);
    let v27: f32 = v11 * v26;
    let v28: f32 = f32(bitcast<f32>(param_word(5u)));
    let v29: f32 = v27 * v28;
    v9 = v29;
    }
    let r30: u32 = gi - 7u;
    let c31: u32 = r30 / 21u;
    let r32: u32 = r30 % 21u;
    let c33: u32 = r32 / 1u;
    let r34: u32 = 0u;
    let h35: bool = (((gi >= 7u) && (c31 < 3u)) && (c33 < 7u)) && (r34 == 0u);
    let j36: u32 = select(0u, (c31 * 7u) + (c33 * 1u), h35);
    let v37: f32 = f32(bitcast<f32>(param_word(6u)));
    var v38: f32 = v37;
    if (h35) {
    let j39: u32 = 0u;
    let v40: f32 = f32(bitcast<f32>(param_word(1u)));
    let j41: u32 = (j36 % 7u) + ((j36 / 7u) * 24u);
    let v42: f32 = in0[j41];
    let v43: f32 = f32(bitcast<f32>(param_word(2u)));
    let v44: f32 = v42 * v43;
    let j45: u32 = ((j36 % 7u) + ((j36 / 7u) * 24u)) + 7u;
    let v46: f32 = in1[j45];
    let v47: f32 = f32(bitcast<f32>(param_word(3u)));
    let v48: f32 = v46 * v47;
    let v49: f32 = v44 + v48;
    let j50: u32 = ((j36 % 7u) + ((j36 / 7u) * 24u)) + 14u;
    let v51: f32 = in2[j50];
    let v52: f32 = f32(bitcast<f32>(param_word(4u)));
    let v53: f32 = v51 * v52;
    let v54: f32 = v49 + v53;
    let v55: f32 = exp(v54);
    let v56: f32 = v40 * v55;
    let v57: f32 = f32(bitcast<f32>(param_word(7u)));
    let v58: f32 = v56 * v57;
    v38 = v58;
    }
    let v59: f32 = v9 + v38;
    let r60: u32 = gi - 0u;
    let c61: u32 = r60 / 21u;
    let r62: u32 = r60 % 21u;
    let c63: u32 = r62 / 1u;
    let r64: u32 = 0u;
    let h65: bool = (((gi >= 0u) && (c61 < 3u)) && (c63 < 7u)) && (r64 == 0u);
    let j66: u32 = select(0u, (c61 * 7u) + (c63 * 1u), h65);
    let v67: f32 = f32(bitcast<f32>(param_word(8u)));
    var v68: f32 = v67;
    if (h65) {
    let j69: u32 = 0u;
    let v70: f32 = f32(bitcast<f32>(param_word(1u)));
    let j71: u32 = (j66 % 7u) + ((j66 / 7u) * 24u);
    let v72: f32 = in0[j71];
    let v73: f32 = f32(bitcast<f32>(param_word(2u)));
    let v74: f32 = v72 * v73;
    let j75: u32 = ((j66 % 7u) + ((j66 / 7u) * 24u)) + 7u;
    let v76: f32 = in1[j75];
    let v77: f32 = f32(bitcast<f32>(param_word(3u)));
    let v78: f32 = v76 * v77;
    let v79: f32 = v74 + v78;
    let j80: u32 = ((j66 % 7u) + ((j66 / 7u) * 24u)) + 14u;
    let v81: f32 = in2[j80];
    let v82: f32 = f32(bitcast<f32>(param_word(4u)));
    let v83: f32 = v81 * v82;
    let v84: f32 = v79 + v83;
    let v85: f32 = exp(v84);
    let v86: f32 = v70 * v85;
    let v87: f32 = f32(bitcast<f32>(param_word(9u)));
    let v88: f32 = v86 * v87;
    v68 = v88;
    }
    let v89: f32 = v59 + v68;
    out0[gi] = v89;
}
