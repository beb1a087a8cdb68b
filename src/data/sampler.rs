//! Seeded randomness for data pipelines: splitmix64 (the same numbers in
//! every language, so a batch order can be reproduced outside Rust) and
//! shuffled mini-batches.

/// Sebastiano Vigna's splitmix64: a 64-bit state advanced by a constant
/// and mixed. Small, fast and identical to its reference implementation,
/// so a Python script can draw the same batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    /// The state; save it to resume the sequence.
    pub state: u64,
}

impl SplitMix64 {
    /// A generator whose first output is splitmix64's for `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A permutation of `0..n` (Fisher-Yates, from the last position down,
    /// each swap partner `next_u64() % (i + 1)`).
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            p.swap(i, j);
        }
        p
    }
}

/// The mini-batches of one epoch over `n` examples: the indices in an
/// order shuffled by `seed` and `epoch` (a different order each epoch,
/// the same for the same pair), cut into batches of `batch_size` (the last
/// one shorter unless `drop_last`). PyTorch's `DataLoader(shuffle=True)`.
pub fn shuffled_batches(
    n: usize,
    batch_size: usize,
    seed: u64,
    epoch: u64,
    drop_last: bool,
) -> Vec<Vec<usize>> {
    assert!(
        batch_size > 0,
        "shuffled_batches: batch_size must be positive"
    );
    let mut rng = SplitMix64::new(seed ^ epoch.wrapping_mul(0xd1b5_4a32_d192_ed03));
    let order = rng.permutation(n);
    order
        .chunks(batch_size)
        .filter(|c| !drop_last || c.len() == batch_size)
        .map(<[usize]>::to_vec)
        .collect()
}
