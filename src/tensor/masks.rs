//! Triangular parts of matrices (`tril`, `triu`): a comparison of row and
//! column coordinates selects between the input and zero, so the mask is
//! index arithmetic fused into the reading kernel, never a stored tensor.

use std::panic::Location;

use super::Tensor;

impl Tensor {
    /// Whether element (row, col) of the last two dims lies on or below
    /// diagonal `diagonal` (`col - row <= diagonal`): a bool tensor of
    /// shape `[rows, cols]` that broadcasts over leading dims.
    #[track_caller]
    pub(crate) fn lower_triangle_mask(&self, op: &str, diagonal: isize) -> Tensor {
        if self.rank() < 2 {
            panic!(
                "{op}: needs at least 2 dims, got shape {:?} ({}) at {}",
                self.shape(),
                self.dtype(),
                Location::caller()
            );
        }
        let rows = self.shape()[self.rank() - 2] as i32;
        let cols = self.shape()[self.rank() - 1] as i32;
        let row = Tensor::arange(0, rows, 1, self.device()).unsqueeze(1);
        let col = Tensor::arange(0, cols, 1, self.device()).unsqueeze(0);
        (col - row).le(diagonal as i32)
    }

    /// The lower triangle of the last two dims: elements with
    /// `col - row <= diagonal` are kept, the rest are 0 (PyTorch's `tril`;
    /// `diagonal` 0 is the main diagonal, positive values go above it).
    #[track_caller]
    pub fn tril(&self, diagonal: isize) -> Tensor {
        let _op = crate::graph::record_as("tril");
        let keep = self.lower_triangle_mask("tril", diagonal);
        keep.where_cond(self, self.zeros_scalar())
    }

    /// The upper triangle of the last two dims: elements with
    /// `col - row >= diagonal` are kept, the rest are 0 (PyTorch's `triu`).
    #[track_caller]
    pub fn triu(&self, diagonal: isize) -> Tensor {
        let _op = crate::graph::record_as("triu");
        let below = self.lower_triangle_mask("triu", diagonal - 1);
        below.where_cond(self.zeros_scalar(), self)
    }

    /// A 0-dim zero of `self`'s dtype, for `where_cond` (a scalar
    /// operand would be promoted to `f32`).
    pub(super) fn zeros_scalar(&self) -> Tensor {
        Tensor::zeros_dtype(Vec::<usize>::new(), self.dtype(), self.device())
    }
}
