@group(0) @binding(0) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 64u + lid;
if (gi >= 4u) { return; }
    let o1: u32 = gi;
    let r02: u32 = 0u;
    var acc3: f32 = 0.0;
    var best4: u32 = 4294967295u;
    var acc5: vec4<f32> = vec4<f32>(0.0);
    for (var j6 = 0u; j6 < 6u; j6 = j6 + 1u) {
    let rr7: u32 = j6;
    let i8: u32 = (gi * 6u) + j6;
    let v9: vec4<f32> = in0[i8];
    acc5 = acc5 + v9;
    }
    let rr10: u32 = 6u;
    if (rr10 < 6u) {
    let i11: u32 = (gi * 6u) + 6u;
    let v12: vec4<f32> = in0[i11];
    acc5 = acc5 + v12;
    }
    acc3 = acc3 + ((acc5[0u] + acc5[1u]) + (acc5[2u] + acc5[3u]));
    let result13: f32 = acc3;
    out0[gi] = result13;
}
