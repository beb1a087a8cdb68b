//! Conversions that let shapes and axis lists be written as literals
//! (`&[2, 3]`, `[2, -1]`) or passed as computed `Vec<usize>`s.

/// Something that names a shape: every entry is a size (no `-1`).
pub trait IntoShape {
    /// The sizes; panics at the caller's line on a negative entry.
    #[track_caller]
    fn into_shape(self) -> Vec<usize>;
}

/// Something that names a list of dimensions or sizes where negative
/// entries have a meaning (an axis counted from the end, or `-1` for "infer"
/// in `reshape` and "keep" in `expand`).
pub trait IntoDims {
    /// The entries, signed.
    fn into_dims(self) -> Vec<isize>;
}

macro_rules! impl_dims {
    ($($t:ty),*) => {$(
        impl IntoShape for &[$t] {
            #[track_caller]
            fn into_shape(self) -> Vec<usize> {
                self.iter()
                    .map(|&d| {
                        assert!(d as i128 >= 0, "shape {:?} has a negative size", self);
                        d as usize
                    })
                    .collect()
            }
        }
        impl<const N: usize> IntoShape for [$t; N] {
            #[track_caller]
            fn into_shape(self) -> Vec<usize> {
                self.as_slice().into_shape()
            }
        }
        impl<const N: usize> IntoShape for &[$t; N] {
            #[track_caller]
            fn into_shape(self) -> Vec<usize> {
                self.as_slice().into_shape()
            }
        }
        impl IntoShape for Vec<$t> {
            #[track_caller]
            fn into_shape(self) -> Vec<usize> {
                self.as_slice().into_shape()
            }
        }
        impl IntoShape for &Vec<$t> {
            #[track_caller]
            fn into_shape(self) -> Vec<usize> {
                self.as_slice().into_shape()
            }
        }
        impl IntoDims for &[$t] {
            fn into_dims(self) -> Vec<isize> {
                self.iter().map(|&d| d as isize).collect()
            }
        }
        impl<const N: usize> IntoDims for [$t; N] {
            fn into_dims(self) -> Vec<isize> {
                self.as_slice().into_dims()
            }
        }
        impl<const N: usize> IntoDims for &[$t; N] {
            fn into_dims(self) -> Vec<isize> {
                self.as_slice().into_dims()
            }
        }
        impl IntoDims for Vec<$t> {
            fn into_dims(self) -> Vec<isize> {
                self.as_slice().into_dims()
            }
        }
        impl IntoDims for &Vec<$t> {
            fn into_dims(self) -> Vec<isize> {
                self.as_slice().into_dims()
            }
        }
    )*};
}

impl_dims!(usize, isize, i32, i64, u32);

/// Resolves a possibly negative axis against `rank`, panicking at the
/// caller's line (naming `op`) when it is out of range.
#[track_caller]
pub(crate) fn resolve_axis(op: &str, axis: isize, rank: usize) -> usize {
    // A 0-dim tensor takes dims 0 and -1, as in PyTorch.
    let r = rank.max(1) as isize;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        panic!(
            "{op}: axis {axis} is out of range for a tensor of rank {rank} (at {})",
            std::panic::Location::caller()
        );
    }
    a as usize
}
