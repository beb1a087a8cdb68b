@group(0) @binding(0) var<storage, read> in0: array<f32>;
@group(0) @binding(1) var dst: texture_storage_2d_array<rgba32float, write>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
let gi = (wid.y * nwg.x + wid.x) * 256u + lid;
if (gi >= 48u) { return; }
    let x1: u32 = gi % 6u;
    let y2: u32 = gi / 6u;
    let layer3: u32 = 0u;
    let bi4: u32 = 0u;
    let r5: u32 = ((layer3 % 1u) * 8u) + y2;
    let c6: u32 = (((layer3 / 1u) * 6u) + x1) * 4u;
    let ok7: bool = (r5 < 8u) && (c6 < 24u);
    let i8: u32 = select(0u, ((bi4 * 192u) + (c6 * 8u)) + r5, ok7);
    let j9: u32 = ((i8 % 8u) * 24u) + (i8 / 8u);
    let v10: f32 = in0[j9];
    let ok11: bool = (r5 < 8u) && ((c6 + 1u) < 24u);
    let i12: u32 = select(0u, ((bi4 * 192u) + ((c6 + 1u) * 8u)) + r5, ok11);
    let j13: u32 = ((i12 % 8u) * 24u) + (i12 / 8u);
    let v14: f32 = in0[j13];
    let ok15: bool = (r5 < 8u) && ((c6 + 2u) < 24u);
    let i16_: u32 = select(0u, ((bi4 * 192u) + ((c6 + 2u) * 8u)) + r5, ok15);
    let j17: u32 = ((i16_ % 8u) * 24u) + (i16_ / 8u);
    let v18: f32 = in0[j17];
    let ok19: bool = (r5 < 8u) && ((c6 + 3u) < 24u);
    let i20: u32 = select(0u, ((bi4 * 192u) + ((c6 + 3u) * 8u)) + r5, ok19);
    let j21: u32 = ((i20 % 8u) * 24u) + (i20 / 8u);
    let v22: f32 = in0[j21];
    let texel23: vec4<f32> = vec4<f32>(select(0.0, v10, ok7), select(0.0, v14, ok11), select(0.0, v18, ok15), select(0.0, v22, ok19));
    textureStore(dst, vec2<u32>(x1, y2), layer3, texel23);
}
