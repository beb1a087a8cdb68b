@group(0) @binding(0) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(1) var dst: texture_storage_2d_array<rgba32float, write>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 30u) { return; }
    let x1: u32 = gi % 6u;
    let y2: u32 = gi / 6u;
    let layer3: u32 = 0u;
    let bi4: u32 = 0u;
    let r5: u32 = ((layer3 % 1u) * 5u) + y2;
    let c6: u32 = (((layer3 / 1u) * 6u) + x1) * 4u;
    let ok7: bool = (r5 < 5u) && (c6 < 24u);
    let i8: u32 = select(0u, (((bi4 * 120u) + (r5 * 24u)) + c6) / 4u, ok7);
    let v9: vec4<f32> = in0[i8];
    let texel10: vec4<f32> = select(vec4<f32>(0.0), v9, ok7);
    textureStore(dst, vec2<u32>(x1, y2), layer3, texel10);
}
