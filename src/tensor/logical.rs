//! Truth values: `logical_and`/`or`/`xor`/`not` and the `any`/`all`
//! reductions, for every dtype (non-zero is true, NaN included, as in
//! PyTorch).

use super::Tensor;
use super::dims::IntoDims;
use crate::dtype::DType;

impl Tensor {
    /// Whether each element is non-zero (NaN is): a bool tensor.
    #[track_caller]
    pub fn truthy(&self) -> Tensor {
        if self.dtype() == DType::Bool {
            self.clone()
        } else {
            self.ne(self.zeros_scalar())
        }
    }

    /// Elementwise `self && other` on truth values, broadcasting.
    #[track_caller]
    pub fn logical_and(&self, other: &Tensor) -> Tensor {
        let _op = crate::graph::record_as("logical_and");
        self.truthy().where_cond(other.truthy(), false)
    }

    /// Elementwise `self || other` on truth values, broadcasting.
    #[track_caller]
    pub fn logical_or(&self, other: &Tensor) -> Tensor {
        let _op = crate::graph::record_as("logical_or");
        self.truthy().where_cond(true, other.truthy())
    }

    /// Elementwise `self != other` on truth values, broadcasting.
    #[track_caller]
    pub fn logical_xor(&self, other: &Tensor) -> Tensor {
        let _op = crate::graph::record_as("logical_xor");
        self.truthy().ne(other.truthy())
    }

    /// Elementwise `!self` on truth values.
    #[track_caller]
    pub fn logical_not(&self) -> Tensor {
        let _op = crate::graph::record_as("logical_not");
        self.truthy().eq(false)
    }

    /// Whether any element over `axes` is true (PyTorch's `any(dim,
    /// keepdim)`): bool; false over no elements.
    #[track_caller]
    pub fn any(&self, axes: impl IntoDims, keepdim: bool) -> Tensor {
        let _op = crate::graph::record_as("any");
        self.truthy().cast(DType::I32).sum(axes, keepdim).gt(0i32)
    }

    /// Whether every element over `axes` is true (PyTorch's `all(dim,
    /// keepdim)`): bool; true over no elements.
    #[track_caller]
    pub fn all(&self, axes: impl IntoDims, keepdim: bool) -> Tensor {
        let _op = crate::graph::record_as("all");
        self.logical_not()
            .cast(DType::I32)
            .sum(axes, keepdim)
            .eq(0i32)
    }

    /// Whether any element is true, as a rank-0 bool.
    #[track_caller]
    pub fn any_all(&self) -> Tensor {
        let _op = crate::graph::record_as("any");
        self.truthy().cast(DType::I32).sum_all().gt(0i32)
    }

    /// Whether every element is true, as a rank-0 bool.
    #[track_caller]
    pub fn all_all(&self) -> Tensor {
        let _op = crate::graph::record_as("all");
        self.logical_not().cast(DType::I32).sum_all().eq(0i32)
    }
}
