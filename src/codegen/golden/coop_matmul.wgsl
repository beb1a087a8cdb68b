enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = wid.y * nwg.x + wid.x;
if (gi >= 64u) { return; }
    let tr1: u32 = (gi / 8u) * 8u;
    let tc2: u32 = (gi % 8u) * 8u;
    var acc4 = coopLoadT<coop_mat8x8<f32, C>>(&out0[(tr1 * 64u) + tc2], 64u);
    for (var k3 = 0u; k3 < 8u; k3 = k3 + 1u) {
    var a5 = coopLoadT<coop_mat8x8<f32, A>>(&in0[(tr1 * 64u) + (k3 * 8u)], 64u);
    var b6 = coopLoadT<coop_mat8x8<f32, B>>(&in1[((k3 * 8u) * 64u) + tc2], 64u);
    acc4 = coopMultiplyAdd(a5, b6, acc4);
    }
    coopStoreT(acc4, &out0[(tr1 * 64u) + tc2], 64u);
}
