fn rng_hash(x0: u32) -> u32 {
    var x = x0;
    x ^= x >> 16u; x *= 0x7feb352du;
    x ^= x >> 15u; x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}
fn rng_bits(seed_lo: u32, seed_hi: u32, counter: u32) -> u32 {
    return rng_hash(rng_hash(rng_hash(seed_lo) ^ seed_hi) ^ counter);
}
fn rng_uniform(seed_lo: u32, seed_hi: u32, counter: u32) -> f32 {
    return f32(rng_bits(seed_lo, seed_hi, counter) >> 8u) * (1.0 / 16777216.0);
}
fn rng_normal(seed_lo: u32, seed_hi: u32, counter: u32) -> f32 {
    // Box-Muller over two independent streams of the same counter.
    let u1 = (f32(rng_bits(seed_lo, seed_hi ^ 0x9e3779b9u, counter) >> 8u) + 1.0) * (1.0 / 16777216.0);
    let u2 = f32(rng_bits(seed_lo, seed_hi ^ 0x7f4a7c15u, counter) >> 8u) * (1.0 / 16777216.0);
    return sqrt(-2.0 * log(u1)) * cos(6.2831853071795864 * u2);
}
