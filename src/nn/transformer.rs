//! The layers of a transformer: `Embedding`, `LayerNorm`, `GELU`, `SiLU`
//! and causal multi-head self-attention.

use std::panic::Location;

use super::functional::{embedding, layer_norm, scaled_dot_product_attention};
use super::init::{constant_param, normal_param};
use super::layers::Linear;
use super::{Module, ParamVisitor};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// A lookup table: integer ids `[*]` to rows of `weight` `[*, dim]`.
pub struct Embedding {
    /// `[num_embeddings, dim]`.
    pub weight: Tensor,
}

impl Embedding {
    /// A table initialised from `normal(0, 1)`, as PyTorch's.
    pub fn new(num_embeddings: usize, dim: usize, dev: &Device) -> Embedding {
        Embedding::normal(num_embeddings, dim, 1.0, dev)
    }

    /// A table initialised from `normal(0, std)` (GPT-2 uses 0.02).
    pub fn normal(num_embeddings: usize, dim: usize, std: f32, dev: &Device) -> Embedding {
        Embedding {
            weight: normal_param(&[num_embeddings, dim], std, dev),
        }
    }
}

impl Module for Embedding {
    #[track_caller]
    fn forward(&self, ids: &Tensor) -> Tensor {
        embedding(ids, &self.weight)
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.param("weight", &self.weight);
    }
}

/// Layer normalisation over the trailing `normalized_shape` dims, with an
/// optional elementwise weight (ones at init) and bias (zeros).
pub struct LayerNorm {
    /// The trailing dims normalised over.
    pub normalized_shape: Vec<usize>,
    /// Scale, shaped `normalized_shape` (absent: no affine transform).
    pub weight: Option<Tensor>,
    /// Shift, shaped `normalized_shape`.
    pub bias: Option<Tensor>,
    /// Added to the variance.
    pub eps: f32,
}

impl LayerNorm {
    /// PyTorch's default: weight and bias, eps 1e-5.
    pub fn new(normalized_shape: &[usize], dev: &Device) -> LayerNorm {
        LayerNorm {
            normalized_shape: normalized_shape.to_vec(),
            weight: Some(constant_param(normalized_shape, 1.0, dev)),
            bias: Some(constant_param(normalized_shape, 0.0, dev)),
            eps: 1e-5,
        }
    }

    /// A weight but no bias (`LayerNorm(..., bias=False)`, nanoGPT's).
    pub fn no_bias(normalized_shape: &[usize], dev: &Device) -> LayerNorm {
        LayerNorm {
            bias: None,
            ..LayerNorm::new(normalized_shape, dev)
        }
    }

    /// Neither weight nor bias (`elementwise_affine=False`).
    pub fn no_affine(normalized_shape: &[usize]) -> LayerNorm {
        LayerNorm {
            normalized_shape: normalized_shape.to_vec(),
            weight: None,
            bias: None,
            eps: 1e-5,
        }
    }
}

impl Module for LayerNorm {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        layer_norm(
            x,
            &self.normalized_shape,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.weight_and_bias(self.weight.as_ref(), self.bias.as_ref());
    }
}

/// The exact GELU as a module.
#[allow(clippy::upper_case_acronyms)]
pub struct GELU;

impl Module for GELU {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.gelu()
    }
}

/// SiLU (swish) as a module.
pub struct SiLU;

impl Module for SiLU {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.silu()
    }
}

/// Causal multi-head self-attention over `[B, T, C]`: one fused
/// `qkv` projection `C -> 3C`, attention per head with the causal mask,
/// and an output projection `C -> C`. No biases, no dropout (nanoGPT's
/// `bias=False`, `dropout=0`).
pub struct CausalSelfAttention {
    /// `Linear(C, 3C)`: queries, keys and values, in that order.
    pub qkv: Linear,
    /// `Linear(C, C)`.
    pub proj: Linear,
    /// Number of heads (divides `C`).
    pub heads: usize,
}

impl CausalSelfAttention {
    /// Weights from `normal(0, std)`; the output projection from
    /// `normal(0, proj_std)` (GPT-2 scales it by the depth).
    pub fn new(
        embed: usize,
        heads: usize,
        std: f32,
        proj_std: f32,
        dev: &Device,
    ) -> CausalSelfAttention {
        assert!(
            heads > 0 && embed.is_multiple_of(heads),
            "CausalSelfAttention: {heads} heads do not divide the embedding size {embed}"
        );
        CausalSelfAttention {
            qkv: Linear {
                weight: normal_param(&[3 * embed, embed], std, dev),
                bias: None,
            },
            proj: Linear {
                weight: normal_param(&[embed, embed], proj_std, dev),
                bias: None,
            },
            heads,
        }
    }
}

impl Module for CausalSelfAttention {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let s = x.shape();
        let c = self.proj.weight.shape()[0];
        if s.len() != 3 || s[2] != c {
            panic!(
                "CausalSelfAttention: expects [B, T, {c}], got {s:?} at {}",
                Location::caller()
            );
        }
        let (b, t, h) = (s[0], s[1], self.heads);
        let qkv = self.qkv.forward(x);
        // [B, T, C] -> [B, H, T, C/H] for each of q, k, v (views).
        let head = |i: usize| {
            qkv.narrow(2, i * c, c)
                .reshape([b, t, h, c / h])
                .transpose(1, 2)
        };
        let y = scaled_dot_product_attention(&head(0), &head(1), &head(2), None, true);
        self.proj.forward(&y.transpose(1, 2).reshape([b, t, c]))
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.module("qkv", &self.qkv);
        v.module("proj", &self.proj);
    }
}
