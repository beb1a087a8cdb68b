//! Activations built from elementwise primitives (`erf`, `tanh`,
//! `sigmoid`): they fuse into whatever kernel reads them, and their
//! gradients come from the primitives' rules.

use super::Tensor;
use crate::graph::op::UnaryOp;

impl Tensor {
    /// The exact GELU, `x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))`
    /// (PyTorch's `gelu(x)`, `approximate='none'`).
    #[track_caller]
    /// One unary op (not a composite of erf), so that its gradient is
    /// recomputed from `x` alone instead of saving three intermediates.
    pub fn gelu(&self) -> Tensor {
        self.unary(UnaryOp::Gelu)
    }

    /// GELU's tanh approximation,
    /// `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`
    /// (PyTorch's `gelu(x, approximate='tanh')`).
    #[track_caller]
    pub fn gelu_tanh(&self) -> Tensor {
        let sqrt_2_over_pi = (2.0 / std::f32::consts::PI).sqrt();
        let inner = (self + self * self * self * 0.044715) * sqrt_2_over_pi;
        self * (inner.tanh() + 1.0) * 0.5
    }

    /// SiLU (swish), `x * sigmoid(x)`.
    #[track_caller]
    pub fn silu(&self) -> Tensor {
        self * self.sigmoid()
    }
}
