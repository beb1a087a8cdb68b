//! The layers of a Llama-style decoder: `RMSNorm`, rotary position
//! embeddings and the SwiGLU MLP.

use super::functional::rms_norm;
use super::init::constant_param;
use super::layers::Linear;
use super::{Module, ParamVisitor};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// Root mean square normalisation over the trailing `normalized_shape`
/// dims (PyTorch's `nn.RMSNorm`), with an optional elementwise weight
/// (ones at init; the parameter `weight`).
pub struct RMSNorm {
    /// The trailing dims normalised over.
    pub normalized_shape: Vec<usize>,
    /// Scale, shaped `normalized_shape` (absent: `elementwise_affine=False`).
    pub weight: Option<Tensor>,
    /// Added to the mean square; `None` takes the input dtype's machine
    /// epsilon, as PyTorch does.
    pub eps: Option<f32>,
}

impl RMSNorm {
    /// PyTorch's default: a weight of ones, `eps=None`.
    pub fn new(normalized_shape: &[usize], dev: &Device) -> RMSNorm {
        RMSNorm {
            normalized_shape: normalized_shape.to_vec(),
            weight: Some(constant_param(normalized_shape, 1.0, dev)),
            eps: None,
        }
    }

    /// The same with an explicit `eps` (Llama uses 1e-5 or 1e-6).
    pub fn with_eps(normalized_shape: &[usize], eps: f32, dev: &Device) -> RMSNorm {
        RMSNorm {
            eps: Some(eps),
            ..RMSNorm::new(normalized_shape, dev)
        }
    }

    /// No weight (`elementwise_affine=False`).
    pub fn no_affine(normalized_shape: &[usize]) -> RMSNorm {
        RMSNorm {
            normalized_shape: normalized_shape.to_vec(),
            weight: None,
            eps: None,
        }
    }
}

impl Module for RMSNorm {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        rms_norm(x, &self.normalized_shape, self.weight.as_ref(), self.eps)
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.weight_and_bias(self.weight.as_ref(), None);
    }
}

/// The feed-forward block of Llama: `down(silu(gate(x)) * up(x))`, three
/// bias-free projections (`gate_proj`, `up_proj`, `down_proj`, Hugging
/// Face's names).
pub struct SwiGlu {
    /// `dim -> hidden`, through SiLU.
    pub gate_proj: Linear,
    /// `dim -> hidden`.
    pub up_proj: Linear,
    /// `hidden -> dim`.
    pub down_proj: Linear,
}

impl SwiGlu {
    /// Three bias-free projections initialised as PyTorch's `Linear`.
    pub fn new(dim: usize, hidden: usize, dev: &Device) -> SwiGlu {
        SwiGlu {
            gate_proj: Linear::no_bias(dim, hidden, dev),
            up_proj: Linear::no_bias(dim, hidden, dev),
            down_proj: Linear::no_bias(hidden, dim, dev),
        }
    }
}

impl Module for SwiGlu {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let _op = crate::graph::record_as("swiglu");
        let gate = self.gate_proj.forward(x);
        let gated = gate.silu() * self.up_proj.forward(x);
        self.down_proj.forward(&gated)
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.module("gate_proj", &self.gate_proj);
        v.module("up_proj", &self.up_proj);
        v.module("down_proj", &self.down_proj);
    }
}
