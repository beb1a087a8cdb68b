@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var<storage, read> in1: array<f32>;
@group(0) @binding(2) var<storage, read_write> out0: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) sid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 64u + lid;
if (gi >= 1000u) { return; }
    let x1: f32 = in0[gi];
    var t2: f32 = 0.0;
    t2 = t2 + subgroupAdd(x1);
    t2 = t2 + subgroupMax(x1);
    t2 = t2 + subgroupShuffle(x1, 0u);
    t2 = t2 + subgroupShuffleXor(x1, 1u);
    t2 = t2 + subgroupBroadcast(x1, 2u);
    t2 = t2 + f32(sid);
    out0[gi] = t2;
}
