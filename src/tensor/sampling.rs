//! Sampling from categorical distributions.

use std::panic::Location;

use super::Tensor;
use crate::dtype::DType;

impl Tensor {
    /// One index per row of the last dim, drawn with probability
    /// proportional to the row's (non-negative) weights, from the
    /// device's seeded generator (PyTorch's `multinomial(probs, 1)`
    /// without the sample dim): `i32` of shape `shape[..rank - 1]`.
    /// Inverse-CDF sampling: the number of running sums at or below
    /// `u * total`, `u` uniform in `[0, 1)`, so zero weights are never drawn.
    #[track_caller]
    pub fn multinomial(&self) -> Tensor {
        let _op = crate::graph::record_as("multinomial");
        if self.rank() == 0 || self.shape()[self.rank() - 1] == 0 {
            panic!(
                "multinomial: needs weights along a non-empty last dim, got shape {:?} ({}) at {}",
                self.shape(),
                self.dtype(),
                Location::caller()
            );
        }
        let n = self.shape()[self.rank() - 1];
        let cdf = self.cumsum(-1);
        let total = cdf.narrow(-1, n - 1, 1);
        let mut row_shape = self.shape().to_vec();
        row_shape[self.rank() - 1] = 1;
        let u = Tensor::rand(row_shape, self.device()) * total;
        // The first position whose running sum passes `u` (the count of
        // those at or below it: the sums never decrease), as an arg-max
        // of the comparison; `n - 1` where rounding left none above `u`.
        // (A sum of the comparison would do, but lavapipe took 9 s to
        // compile a sum reduction reading a broadcast random draw.)
        let above = cdf.gt(&u).cast(DType::I32);
        let first = above.argmax(-1, false);
        let any = above.max([-1], false).eq(1i32);
        any.where_cond(&first, n as i32 - 1)
    }
}
