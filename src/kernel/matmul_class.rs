//! Matmul classes: the key a matmul kernel is tuned under. A class is
//! the product's element type and its batch, row, contraction and column
//! counts in buckets of powers of four, so that the sizes of one layer at
//! batch 64, 50 and 33 share a class (and its kernel), while a GPT
//! layer's activations times its weight and that weight's gradient (a
//! contraction over every token) do not.

use std::fmt;

use crate::DType;

/// A matmul's element type and sizes in buckets (see `bucket`): what a
/// per-class tuning times and what its winner is kept under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct MatmulClass {
    pub dtype: DType,
    /// Bucket of the batch count (0: a single product).
    pub batch: u8,
    pub m: u8,
    pub k: u8,
    pub n: u8,
}

/// The bucket of a size: `j` where `4^(j-1) < size <= 4^j` (0 for 0 and
/// 1), so bucket 3 holds 17..=64 and bucket 5 holds 257..=1024.
fn bucket(size: usize) -> u8 {
    let bits = usize::BITS - size.saturating_sub(1).leading_zeros(); // ceil(log2)
    bits.div_ceil(2) as u8
}

/// The largest size of bucket `j`: 4^j.
fn bucket_top(j: u8) -> usize {
    1usize << (2 * u32::from(j))
}

/// A representative size of bucket `j`: half its largest, so inside it
/// (1 for bucket 0, 2 for bucket 1).
fn representative(j: u8) -> usize {
    (bucket_top(j) / 2).max(1)
}

/// The most multiply-adds a class's timed product takes on a GPU: large
/// enough that launching it costs little beside its work (2^30 takes
/// ~0.1 ms on an H100).
pub(crate) const GPU_TIMED_MACS: usize = 1 << 30;

/// The same on a CPU adapter: lavapipe's slowest matmul candidate runs
/// 2^24 multiply-adds in ~0.1 s, its fastest in ~5 ms (a class timed at
/// 512^3 took 6.3 s, more than the whole `fast` budget).
pub(crate) const CPU_TIMED_MACS: usize = 1 << 24;

/// The most elements a class's timed operands and result hold together
/// (64 MiB of f32).
const MAX_TIMED_ELEMENTS: usize = 1 << 24;

impl MatmulClass {
    /// The class of a product of `batch` matrices, `m x k` by `k x n`,
    /// of `dtype`.
    pub fn of(dtype: DType, (batch, m, k, n): (usize, usize, usize, usize)) -> MatmulClass {
        MatmulClass {
            dtype,
            batch: bucket(batch),
            m: bucket(m),
            k: bucket(k),
            n: bucket(n),
        }
    }

    /// The sizes `(batch, m, k, n)` a tuning of this class times: each
    /// dimension's representative, the largest halved (batch first) while
    /// the product takes more than `max_macs` multiply-adds or its
    /// operands and result more than `MAX_TIMED_ELEMENTS` (a class with
    /// a short contraction, `2^15 x 1 x 2^15`, takes few multiply-adds
    /// but a 1 GiB result).
    pub fn timed_sizes(self, max_macs: usize) -> (usize, usize, usize, usize) {
        let mut s = [
            representative(self.batch),
            representative(self.m),
            representative(self.k),
            representative(self.n),
        ];
        let too_large = |[b, m, k, n]: [usize; 4]| {
            b * m * k * n > max_macs || b * (m * k + k * n + m * n) > MAX_TIMED_ELEMENTS
        };
        while too_large(s) {
            let largest = if s[0] > 1 {
                0
            } else {
                (1..4).max_by_key(|&i| s[i]).unwrap_or(1)
            };
            s[largest] /= 2;
        }
        (s[0], s[1], s[2], s[3])
    }
}

impl fmt::Display for MatmulClass {
    /// `f32 1 x 17..64 x 257..1024 x 65..256`: dtype, then batch, m, k, n
    /// as the ranges their buckets hold.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let range = |j: u8| match j {
            0 => "1".to_string(),
            1 => "2..4".to_string(),
            j => format!("{}..{}", bucket_top(j - 1) + 1, bucket_top(j)),
        };
        write!(
            f,
            "{} {} x {} x {} x {}",
            format!("{:?}", self.dtype).to_lowercase(),
            range(self.batch),
            range(self.m),
            range(self.k),
            range(self.n)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_powers_of_four() {
        let cases = [
            (0, 0),
            (1, 0),
            (2, 1),
            (4, 1),
            (5, 2),
            (16, 2),
            (17, 3),
            (64, 3),
            (65, 4),
            (1024, 5),
            (1025, 6),
        ];
        for (size, want) in cases {
            assert_eq!(bucket(size), want, "size {size}");
        }
        // Every representative lies in its own bucket.
        for j in 0..12 {
            assert_eq!(bucket(representative(j)), j, "bucket {j}");
        }
    }

    #[test]
    fn batch_sizes_of_one_layer_share_a_class_and_its_gradient_does_not() {
        let layer = |rows| MatmulClass::of(DType::F32, (1, rows, 784, 128));
        assert_eq!(layer(64), layer(50));
        assert_eq!(layer(64), layer(33));
        assert_ne!(layer(64), layer(9));
        // The weight gradient contracts over the batch.
        let grad = MatmulClass::of(DType::F32, (1, 784, 64, 128));
        assert_ne!(layer(64), grad);
        assert_ne!(
            MatmulClass::of(DType::F16, (1, 64, 784, 128)),
            layer(64),
            "dtypes tune apart"
        );
        assert_eq!(
            layer(64).to_string(),
            "f32 1 x 17..64 x 257..1024 x 65..256"
        );
    }

    #[test]
    fn timed_sizes_stay_within_the_budget_and_inside_small_buckets() {
        let small = MatmulClass::of(DType::F32, (1, 64, 784, 128));
        assert_eq!(small.timed_sizes(GPU_TIMED_MACS), (1, 32, 512, 128));
        assert_eq!(small.timed_sizes(CPU_TIMED_MACS), (1, 32, 512, 128));
        let huge = MatmulClass::of(DType::F32, (48, 4096, 4096, 4096));
        for max in [GPU_TIMED_MACS, CPU_TIMED_MACS] {
            let (b, m, k, n) = huge.timed_sizes(max);
            assert!(b * m * k * n <= max, "{:?}", (b, m, k, n));
            assert_eq!(b, 1, "the batch shrinks first");
            for s in [m, k, n] {
                assert!(s >= 128, "{:?}", (b, m, k, n));
            }
        }
        assert_eq!(huge.timed_sizes(GPU_TIMED_MACS), (1, 1024, 1024, 1024));
        // A short contraction: few multiply-adds, a large result.
        let wide = MatmulClass::of(DType::F32, (1, 1 << 15, 1, 1 << 15));
        let (b, m, k, n) = wide.timed_sizes(GPU_TIMED_MACS);
        assert!(
            b * (m * k + k * n + m * n) <= MAX_TIMED_ELEMENTS,
            "{m} {k} {n}"
        );
        assert_eq!(k, 1);
    }
}
