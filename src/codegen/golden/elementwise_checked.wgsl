@group(0) @binding(0) var<uniform> params: array<vec4<u32>, 1>;
fn param_word(i: u32) -> u32 { return params[i / 4u][i % 4u]; }
@group(0) @binding(1) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out0: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> checks: array<atomic<u32>, 2>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 24u) { return; }
    let v1: vec4<f32> = in0[gi];
    let v2: vec4<f32> = vec4<f32>(bitcast<f32>(param_word(0u)));
    let v3: vec4<f32> = v1 * v2;
    if (any(((bitcast<vec4<u32>>(v3) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u)) & !(((bitcast<vec4<u32>>(v1) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u)) | ((bitcast<vec4<u32>>(v2) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u))))) {
    atomicMax(&checks[0u], 4294967293u);
    }
    let v4: vec4<f32> = exp(v3);
    if (any(((bitcast<vec4<u32>>(v4) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u)) & !((bitcast<vec4<u32>>(v3) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u)))) {
    atomicMax(&checks[0u], 4294967292u);
    }
    let v5: vec4<f32> = log(v4);
    if (any(((bitcast<vec4<u32>>(v5) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u)) & !((bitcast<vec4<u32>>(v4) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u)))) {
    atomicMax(&checks[0u], 4294967291u);
    }
    out0[gi] = v5;
}
