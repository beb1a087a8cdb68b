@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 64u + lid;
if (gi >= 4u) { return; }
    let o1: u32 = gi / 1u;
    let r02: u32 = gi % 1u;
    var acc3: f32 = 0.0;
    var best4: u32 = 4294967295u;
    for (var j5 = 0u; j5 < 24u; j5 = j5 + 1u) {
    let rr6: u32 = r02 + (j5 * 1u);
    let i7: u32 = (o1 * 24u) + (rr6 * 1u);
    let v8: f32 = in0[i7];
    acc3 = acc3 + v8;
    }
    let rr9: u32 = r02 + 24u;
    if (rr9 < 24u) {
    let i10: u32 = (o1 * 24u) + (rr9 * 1u);
    let v11: f32 = in0[i10];
    acc3 = acc3 + v11;
    }
    let result12: f32 = acc3;
    out0[gi] = result12;
}
