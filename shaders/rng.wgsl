// Philox4x32-10 over a 64-bit position; the scheme and its CPU twin are in
// src/cpu/rng.rs, which these functions must match bit for bit.

// The high and low words of a * b: WGSL has neither 64-bit integers nor
// a mulhi, so the product is put together from 16-bit halves, four
// multiplications (Hacker's Delight's mulhu; every partial sum fits 32
// bits, and the low word falls out of the same partial products).
fn rng_mulhilo(a: u32, b: u32) -> vec2<u32> {
    let al = a & 0xffffu;
    let ah = a >> 16u;
    let bl = b & 0xffffu;
    let bh = b >> 16u;
    let ll = al * bl;
    let t = ah * bl + (ll >> 16u);
    let w = (t & 0xffffu) + al * bh;
    return vec2<u32>(ah * bh + (t >> 16u) + (w >> 16u), (w << 16u) | (ll & 0xffffu));
}
// One Philox4x32 round of c under the round key k.
fn rng_round(c: vec4<u32>, k: vec2<u32>) -> vec4<u32> {
    let p0 = rng_mulhilo(0xd2511f53u, c.x);
    let p1 = rng_mulhilo(0xcd9e8d57u, c.z);
    return vec4<u32>(p1.x ^ c.y ^ k.x, p1.y, p0.x ^ c.w ^ k.y, p0.y);
}
// Ten rounds written out, the key advanced by (0x9e3779b9, 0xbb67ae85)
// each: a loop would spend lavapipe's per-invocation loop budget (see
// ARCHITECTURE.md, "The loop limit") ten times over for every element a
// fused reduction loop draws.
fn rng_philox(c0: vec4<u32>, k: vec2<u32>) -> vec4<u32> {
    let w = vec2<u32>(0x9e3779b9u, 0xbb67ae85u);
    var c = rng_round(c0, k);
    c = rng_round(c, k + w);
    c = rng_round(c, k + 2u * w);
    c = rng_round(c, k + 3u * w);
    c = rng_round(c, k + 4u * w);
    c = rng_round(c, k + 5u * w);
    c = rng_round(c, k + 6u * w);
    c = rng_round(c, k + 7u * w);
    c = rng_round(c, k + 8u * w);
    return rng_round(c, k + 9u * w);
}
// The block of element `index` of the draw from the 64-bit offset
// (offset_lo, offset_hi): position offset + index, carried into the high word.
fn rng_block(seed_lo: u32, seed_hi: u32, offset_lo: u32, offset_hi: u32, index: u32) -> vec4<u32> {
    let lo = offset_lo + index;
    let hi = offset_hi + select(0u, 1u, lo < index);
    return rng_philox(vec4<u32>(lo, hi, 0u, 0u), vec2<u32>(seed_lo, seed_hi));
}
fn rng_uniform(seed_lo: u32, seed_hi: u32, offset_lo: u32, offset_hi: u32, index: u32) -> f32 {
    let w = rng_block(seed_lo, seed_hi, offset_lo, offset_hi, index);
    return f32(w.x >> 8u) * (1.0 / 16777216.0);
}
fn rng_normal(seed_lo: u32, seed_hi: u32, offset_lo: u32, offset_hi: u32, index: u32) -> f32 {
    // Box-Muller over the block's first two words; u1 in (0, 1].
    let w = rng_block(seed_lo, seed_hi, offset_lo, offset_hi, index);
    let u1 = (f32(w.x >> 8u) + 1.0) * (1.0 / 16777216.0);
    let u2 = f32(w.y >> 8u) * (1.0 / 16777216.0);
    return sqrt(-2.0 * log(u1)) * cos(6.2831853071795864 * u2);
}
