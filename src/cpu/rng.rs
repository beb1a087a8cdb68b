//! The counter-based generator of `rand`/`randn`, bit-identical to the WGSL
//! functions of `shaders/rng.wgsl` (uniform) and equal up to libm rounding
//! (normal).
//!
//! # The scheme
//!
//! Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
//! as easy as 1, 2, 3", SC 2011; the generator of PyTorch's CUDA backend
//! and of cuRAND), as published in the Random123 library:
//! - the **key** is the device's 64-bit seed, `[seed_lo, seed_hi]`;
//! - each draw takes `n` consecutive **positions** of the device's 64-bit
//!   counter, from `offset` on (`Device::next_rng` advances the counter by
//!   `n`); element `i` of the draw is at position `p = offset + i`
//!   (wrapping at 2^64), and its 128-bit counter block is
//!   `[p_lo, p_hi, 0, 0]`: one Philox block per element, so that any
//!   element can be made alone, by any kernel, in any order;
//! - a **uniform** is the block's first word, its top 24 bits scaled to
//!   [0, 1) (`bits >> 8` times 2^-24: every value an exact `f32`);
//! - a **normal** is Box-Muller over the block's first two words:
//!   `u1 = ((w0 >> 8) + 1) * 2^-24` in (0, 1] (never 0, so the logarithm
//!   is finite), `u2 = (w1 >> 8) * 2^-24`, and
//!   `sqrt(-2 ln u1) * cos(2 pi u2)`.
//!
//! The runtime parameters of a `rand`/`randn` node are the four words
//! `[seed_lo, seed_hi, offset_lo, offset_hi]`: a new offset each step is a
//! new parameter value, never a new kernel. The numbers are not PyTorch's
//! (its CUDA generator spreads a tensor over threads and subsequences
//! differently).

/// Philox4x32's round multipliers (Random123's `PHILOX_M4x32_0/1`).
const MULTIPLIERS: [u32; 2] = [0xd251_1f53, 0xcd9e_8d57];

/// Philox4x32's key increments between rounds (Random123's
/// `PHILOX_W32_0/1`: the golden ratio and `sqrt(3) - 1`).
const KEY_STEPS: [u32; 2] = [0x9e37_79b9, 0xbb67_ae85];

/// 2^-24: a 24-bit integer times this is an exact `f32` in [0, 1).
const UNIT: f32 = 1.0 / 16_777_216.0;

/// The high and low words of the 64-bit product `a * b`.
fn mul_hi_lo(a: u32, b: u32) -> (u32, u32) {
    let product = u64::from(a) * u64::from(b);
    ((product >> 32) as u32, product as u32)
}

/// One Philox4x32 round of `counter` under the round key `key`.
fn round(c: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (hi0, lo0) = mul_hi_lo(MULTIPLIERS[0], c[0]);
    let (hi1, lo1) = mul_hi_lo(MULTIPLIERS[1], c[2]);
    [hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0]
}

/// The Philox4x32-10 block function: ten rounds of `counter`, the key
/// advanced by `KEY_STEPS` between rounds.
fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = round(counter, key);
    let mut k = key;
    for _ in 1..10 {
        k = [
            k[0].wrapping_add(KEY_STEPS[0]),
            k[1].wrapping_add(KEY_STEPS[1]),
        ];
        c = round(c, k);
    }
    c
}

/// The block of element `index` of the draw with runtime parameters
/// `[seed_lo, seed_hi, offset_lo, offset_hi]`.
fn block([seed_lo, seed_hi, offset_lo, offset_hi]: [u32; 4], index: u64) -> [u32; 4] {
    let offset = u64::from(offset_lo) | u64::from(offset_hi) << 32;
    let position = offset.wrapping_add(index);
    philox4x32_10(
        [position as u32, (position >> 32) as u32, 0, 0],
        [seed_lo, seed_hi],
    )
}

/// A word's top 24 bits in [0, 1).
fn unit(word: u32) -> f32 {
    (word >> 8) as f32 * UNIT
}

/// Element `index` of a uniform draw with runtime parameters `params`:
/// in [0, 1), 24 random bits.
pub(crate) fn uniform(params: [u32; 4], index: u64) -> f32 {
    unit(block(params, index)[0])
}

/// Element `index` of a standard normal draw with runtime parameters
/// `params`: Box-Muller over the first two words of its block.
pub(crate) fn normal_draw(params: [u32; 4], index: u64) -> f32 {
    let [w0, w1, _, _] = block(params, index);
    // Shifted by one step to (0, 1], so that the logarithm is finite.
    let u1 = ((w0 >> 8) as f32 + 1.0) * UNIT;
    let u2 = unit(w1);
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// `count` draws (uniform, or standard normal when `normal`) with runtime
/// parameters `params` (`Device::next_rng`'s): what `rand`/`randn` of
/// `count` elements give.
pub(crate) fn stream(params: [u32; 4], count: usize, normal: bool) -> impl Iterator<Item = f32> {
    let draw = if normal { normal_draw } else { uniform };
    (0..count as u64).map(move |i| draw(params, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's known answers for Philox4x32-10 (`kat_vectors`:
    /// counter, key, result), checked against an independent
    /// implementation of the published algorithm.
    #[test]
    fn philox4x32_10_gives_random123_known_answers() {
        let cases: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0; 4],
                [0; 2],
                [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
            ),
            (
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0],
                [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
            ),
        ];
        for (counter, key, expected) in cases {
            assert_eq!(
                philox4x32_10(counter, key),
                expected,
                "counter {counter:08x?}, key {key:08x?}"
            );
        }
    }

    /// The offset's high word reaches the block: position 2^32 + k is not
    /// position k (a 32-bit counter would repeat there).
    #[test]
    fn draws_past_two_to_the_32_differ_from_the_first() {
        let seed = [0x1234_5678, 0x9abc_def0];
        let low: Vec<f32> = stream([seed[0], seed[1], 5, 0], 64, false).collect();
        let high: Vec<f32> = stream([seed[0], seed[1], 5, 1], 64, false).collect();
        let same = low.iter().zip(&high).filter(|(a, b)| a == b).count();
        // Two independent 24-bit uniforms agree with probability 2^-24.
        assert!(same <= 1, "{same} of 64 draws repeat 2^32 positions on");
    }

    /// The offset carries into its high word within one draw: element `i`
    /// of a draw from `2^32 - 2` is the draw from `2^32 - 2 + i`.
    #[test]
    fn positions_carry_across_the_low_word() {
        let seed = [7, 0];
        let across: Vec<f32> = stream([seed[0], seed[1], u32::MAX - 1, 0], 4, false).collect();
        let past: Vec<f32> = stream([seed[0], seed[1], 0, 1], 2, false).collect();
        assert_eq!(&across[2..], &past[..]);
        assert_eq!(across[0], uniform([seed[0], seed[1], u32::MAX - 1, 0], 0));
    }

    /// Mean and variance of a million uniforms and of a million normals
    /// (bounds of about five standard errors).
    #[test]
    fn a_million_draws_have_the_expected_moments() {
        let n = 1_000_000;
        let moments = |xs: Vec<f32>| {
            let mean = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64;
            let var = xs
                .iter()
                .map(|&x| (f64::from(x) - mean).powi(2))
                .sum::<f64>()
                / n as f64;
            (mean, var)
        };
        let params = [42, 0, 0, 3];
        let (mean, var) = moments(stream(params, n, false).collect());
        // Uniform: mean 1/2 (sd 0.289/1000), variance 1/12 (sd 0.075/1000).
        assert!((mean - 0.5).abs() < 1.5e-3, "uniform mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 4e-4, "uniform variance {var}");
        let (mean, var) = moments(stream(params, n, true).collect());
        // Normal: mean 0 (sd 1/1000), variance 1 (sd 1.41/1000).
        assert!(mean.abs() < 5e-3, "normal mean {mean}");
        assert!((var - 1.0).abs() < 7e-3, "normal variance {var}");
    }
}
