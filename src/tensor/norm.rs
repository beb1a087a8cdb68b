//! Row normalisation, the fused core of `layer_norm`, and its gradient.

use std::panic::Location;

use super::Tensor;
use super::elementwise::cast_node;
use crate::autograd::rules;
use crate::dtype::DType;
use crate::graph::Node;
use crate::graph::op::Op;

impl Tensor {
    /// Each row along the last axis as `(x - mean) / sqrt(var + eps)`,
    /// with the biased variance, in one kernel (a row per invocation).
    /// `layer_norm` reshapes its normalised dims into one last axis and
    /// calls this; its gradient is one more kernel of the same kind.
    #[track_caller]
    pub(crate) fn normalize_rows(&self, eps: f32) -> Tensor {
        self.normalize_rows_by(eps, false)
    }

    /// Each row along the last axis as `x / sqrt(mean(x^2) + eps)`, in
    /// one kernel: the core of `rms_norm`.
    #[track_caller]
    pub(crate) fn rms_normalize_rows(&self, eps: f32) -> Tensor {
        self.normalize_rows_by(eps, true)
    }

    /// [`Tensor::normalize_rows`], or its root mean square variant when
    /// `rms`.
    #[track_caller]
    fn normalize_rows_by(&self, eps: f32, rms: bool) -> Tensor {
        let loc = Location::caller();
        // Computed in f32; a 16-bit input gives a result of its dtype.
        let dtype = crate::amp::float32_list(self.dtype());
        let x = cast_node(&self.node(), dtype, loc);
        let shape = x.shape.clone();
        let node = Node::pending(
            Op::Normalize { rms },
            vec![x],
            vec![eps.to_bits()],
            shape,
            dtype,
            loc,
        );
        let out = Tensor::from_node(node, self.device());
        rules::normalize(self, (eps, rms), &out);
        out
    }

    /// The gradient of [`Tensor::normalize_rows`] (or, with `rms`, of
    /// [`Tensor::rms_normalize_rows`]) at `self` for the output gradient
    /// `gy` (same shape).
    #[track_caller]
    pub(crate) fn normalize_rows_backward(&self, gy: &Tensor, (eps, rms): (f32, bool)) -> Tensor {
        let loc = Location::caller();
        let dtype = match self.dtype() {
            d if d.is_half() && gy.dtype() == d => d,
            _ => DType::F32,
        };
        let x = cast_node(&self.node(), dtype, loc);
        let g = cast_node(&gy.node(), dtype, loc);
        let shape = x.shape.clone();
        let node = Node::pending(
            Op::NormalizeBackward { rms },
            vec![x, g],
            vec![eps.to_bits()],
            shape,
            dtype,
            loc,
        );
        Tensor::from_node(node, self.device())
    }
}
