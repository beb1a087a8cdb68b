// 16-bit floats in f32 registers. Rounding is done on the bits, so it is
// exact on every driver (WGSL leaves f32-to-f16 conversion of values out
// of f16's range undefined): to nearest, ties to even, overflow to
// infinity, NaN kept (as PyTorch's `.half()` and `.bfloat16()`).

// x rounded to the nearest f16, as an f32.
fn f16_round(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    let sign = b & 0x80000000u;
    if (a > 0x7f800000u) { return x; }
    // 65520 and above round to infinity.
    if (a >= 0x477ff000u) { return bitcast<f32>(sign | 0x7f800000u); }
    // Below 2^-14 f16 is subnormal: multiples of 2^-24, rounded half to
    // even by round() on an exact product.
    if (a < 0x38800000u) {
        let m = round(bitcast<f32>(a) * 16777216.0) / 16777216.0;
        return bitcast<f32>(sign | bitcast<u32>(m));
    }
    let r = (a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u;
    return bitcast<f32>(sign | r);
}

fn f16_roundx4(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(f16_round(x.x), f16_round(x.y), f16_round(x.z), f16_round(x.w));
}

// The bf16 pattern (low 16 bits) nearest to x.
fn bf16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

// x rounded to the nearest bf16, as an f32.
fn bf16_round(x: f32) -> f32 {
    return bitcast<f32>(bf16_bits(x) << 16u);
}

fn bf16_roundx4(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(bf16_round(x.x), bf16_round(x.y), bf16_round(x.z), bf16_round(x.w));
}

// The bf16 in the half of word w that element index i selects (even: low).
fn bf16_at(w: u32, i: u32) -> f32 {
    return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1u) == 1u));
}
