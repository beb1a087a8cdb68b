@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var dst: texture_storage_2d_array<rgba32float, write>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 30u) { return; }
    let x1: u32 = gi % 6u;
    let y2: u32 = (gi / 6u) % 5u;
    let layer3: u32 = gi / 30u;
    let bi4: u32 = layer3 / 1u;
    let r5: u32 = (((layer3 / 1u) % 1u) * 5u) + y2;
    let c6: u32 = (((layer3 % 1u) * 6u) + x1) * 4u;
    let ok7: bool = (r5 < 5u) && (c6 < 24u);
    let i8: u32 = select(0u, ((bi4 * 120u) + (r5 * 24u)) + c6, ok7);
    let v9: f32 = in0[i8];
    let ok10: bool = (r5 < 5u) && ((c6 + 1u) < 24u);
    let i11: u32 = select(0u, (((bi4 * 120u) + (r5 * 24u)) + c6) + 1u, ok10);
    let v12: f32 = in0[i11];
    let ok13: bool = (r5 < 5u) && ((c6 + 2u) < 24u);
    let i14: u32 = select(0u, (((bi4 * 120u) + (r5 * 24u)) + c6) + 2u, ok13);
    let v15: f32 = in0[i14];
    let ok16: bool = (r5 < 5u) && ((c6 + 3u) < 24u);
    let i17: u32 = select(0u, (((bi4 * 120u) + (r5 * 24u)) + c6) + 3u, ok16);
    let v18: f32 = in0[i17];
    let texel19: vec4<f32> = vec4<f32>(select(0.0, v9, ok7), select(0.0, v12, ok10), select(0.0, v15, ok13), select(0.0, v18, ok16));
    textureStore(dst, vec2<u32>(x1, y2), layer3, texel19);
}
