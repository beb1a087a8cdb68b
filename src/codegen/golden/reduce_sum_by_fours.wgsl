@group(0) @binding(0) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 1024u) { return; }
    let o1: u32 = 0u;
    let r02: u32 = gi;
    var acc3: vec4<f32> = vec4<f32>(0.0);
    for (var j4 = 0u; j4 < 32u; j4 = j4 + 1u) {
    let rr5: u32 = r02 + (j4 * 1024u);
    let i6: u32 = (o1 * 32768u) + rr5;
    let v7: vec4<f32> = in0[i6];
    acc3 = acc3 + v7;
    }
    let rr8: u32 = r02 + 32768u;
    if (rr8 < 32768u) {
    let i9: u32 = gi + 32768u;
    let v10: vec4<f32> = in0[i9];
    acc3 = acc3 + v10;
    }
    let result11: f32 = (acc3[0u] + acc3[1u]) + (acc3[2u] + acc3[3u]);
    out0[gi] = result11;
}
