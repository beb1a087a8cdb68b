//! Running sums and sampling from categorical distributions.

use std::panic::Location;

use super::Tensor;
use super::dims::resolve_axis;
use crate::dtype::DType;

impl Tensor {
    /// Cumulative sum along `axis` (PyTorch's `cumsum`): `f32` for float
    /// input, `i32` for integer and bool input. Element `j` is a masked
    /// sum of elements `0..=j` (a select, not a product with a triangular
    /// matrix, so a NaN or infinity reaches only the sums after it): one
    /// fused reduction over `n x n` values, `O(n^2)` in the axis length,
    /// meant for short axes such as a vocabulary or a sequence.
    #[track_caller]
    pub fn cumsum(&self, axis: isize) -> Tensor {
        let _op = crate::graph::record_as("cumsum");
        let dtype = if self.dtype() == DType::F32 {
            DType::F32
        } else {
            DType::I32
        };
        let x = self.cast(dtype);
        if self.rank() == 0 {
            resolve_axis("cumsum", axis, 1);
            return x;
        }
        let ax = resolve_axis("cumsum", axis, self.rank()) as isize;
        let n = self.shape()[ax as usize];
        let last = x.transpose(ax, -1);
        // rows[.., j, k] = x[.., k], kept where k <= j.
        let mut square: Vec<isize> = last.shape().iter().map(|&d| d as isize).collect();
        square.insert(square.len() - 1, n as isize);
        let rows = last.unsqueeze(-2).expand(square);
        let keep = rows.lower_triangle_mask("cumsum", 0);
        keep.where_cond(&rows, rows.zeros_scalar())
            .sum([-1], false)
            .transpose(ax, -1)
    }

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
        let below = cdf.le(&u).cast(DType::I32).sum([-1], false);
        below.minimum(n as i32 - 1)
    }
}
