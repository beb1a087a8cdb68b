//! Deterministic test data shared by the crate's unit tests.

/// `n` values spread over `[lo, lo + width)` by a xorshift generator
/// seeded with `seed`.
pub(crate) fn spread(n: usize, seed: u64, lo: f32, width: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + width * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}
