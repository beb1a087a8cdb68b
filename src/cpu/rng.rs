//! The counter-based generator of `rand`/`randn`, bit-identical to the WGSL
//! functions in `codegen::wgsl` (uniform) and equal up to libm rounding
//! (normal).

fn hash(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

fn bits(seed_lo: u32, seed_hi: u32, counter: u32) -> u32 {
    hash(hash(hash(seed_lo) ^ seed_hi) ^ counter)
}

/// Uniform in [0, 1) with 24 random bits.
pub(crate) fn uniform(seed_lo: u32, seed_hi: u32, counter: u32) -> f32 {
    (bits(seed_lo, seed_hi, counter) >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Standard normal by Box-Muller over two streams of the same counter.
pub(crate) fn normal_draw(seed_lo: u32, seed_hi: u32, counter: u32) -> f32 {
    let u1 =
        ((bits(seed_lo, seed_hi ^ 0x9e37_79b9, counter) >> 8) as f32 + 1.0) * (1.0 / 16_777_216.0);
    let u2 = (bits(seed_lo, seed_hi ^ 0x7f4a_7c15, counter) >> 8) as f32 * (1.0 / 16_777_216.0);
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// `count` draws (uniform, or standard normal when `normal`) from the
/// stream `(seed_lo, seed_hi)` from `counter` on: what `rand`/`randn`
/// of `count` elements give.
pub(crate) fn stream(
    [seed_lo, seed_hi, counter]: [u32; 3],
    count: usize,
    normal: bool,
) -> impl Iterator<Item = f32> {
    let draw = if normal { normal_draw } else { uniform };
    (0..count).map(move |i| draw(seed_lo, seed_hi, counter.wrapping_add(i as u32)))
}
