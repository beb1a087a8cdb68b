// W1 of DESIGN.md written by hand, vec4 loads and stores: the fused
// kernel's ceiling on an adapter where the chain is compute-bound.
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * 256u + lid;
    if (i < arrayLength(&src)) {
        let x = src[i];
        let t = tanh(x * 2.0 + 1.0) - x;
        dst[i] = x / (1.0 + exp(-t)) + 0.5;
    }
}
