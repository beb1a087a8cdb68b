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

/// How rotary embeddings pair a head's dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeLayout {
    /// Dim `i` rotates with dim `i + d/2` (Hugging Face's `rotate_half`,
    /// Llama, Qwen and Mistral checkpoints in that layout).
    HalfSplit,
    /// Dim `2i` rotates with dim `2i + 1` (Meta's original Llama code,
    /// GPT-J).
    Interleaved,
}

/// Rotary position embeddings: the cos and sin tables for positions
/// `0..max_len`, built once on the host, and their application to
/// queries and keys `[..., L, head_dim]` at any starting position
/// without recompiling (positions are gathered by a runtime index).
pub struct RotaryEmbedding {
    /// `[max_len, head_dim / 2]`.
    cos: Tensor,
    /// `[max_len, head_dim / 2]`.
    sin: Tensor,
    head_dim: usize,
    max_len: usize,
    layout: RopeLayout,
}

impl RotaryEmbedding {
    /// Tables for `head_dim` (even) and positions `0..max_len`, with
    /// frequencies `base^(-2i/head_dim)` (`base` is Llama's `rope_theta`,
    /// 10,000 or 500,000). The angles are computed in f32 as Hugging
    /// Face's code computes them (`position * inv_freq`), their cos and
    /// sin in f64, so the tables agree with PyTorch's to an ulp.
    #[track_caller]
    pub fn new(
        head_dim: usize,
        max_len: usize,
        base: f32,
        layout: RopeLayout,
        dev: &Device,
    ) -> RotaryEmbedding {
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            panic!(
                "RotaryEmbedding: head_dim must be even and positive, got {head_dim} at {}",
                std::panic::Location::caller()
            );
        }
        let half = head_dim / 2;
        let inv_freq: Vec<f32> = (0..half)
            .map(|i| 1.0 / base.powf((2 * i) as f32 / head_dim as f32))
            .collect();
        let angles: Vec<f64> = (0..max_len)
            .flat_map(|p| inv_freq.iter().map(move |&f| f64::from(p as f32 * f)))
            .collect();
        let table = |f: fn(f64) -> f64| {
            let values: Vec<f32> = angles.iter().map(|&a| f(a) as f32).collect();
            Tensor::from_vec(values, [max_len, half], dev).unwrap_or_else(|e| {
                panic!("RotaryEmbedding: {e} at {}", std::panic::Location::caller())
            })
        };
        RotaryEmbedding {
            cos: table(f64::cos),
            sin: table(f64::sin),
            head_dim,
            max_len,
            layout,
        }
    }

    /// The positions the tables cover.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// `x` `[..., L, head_dim]` rotated for positions `start..start + L`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor, start: usize) -> Tensor {
        let len = if x.rank() >= 2 {
            x.shape()[x.rank() - 2]
        } else {
            0
        };
        if start + len > self.max_len {
            panic!(
                "RotaryEmbedding: positions {start}..{} past the {} the tables hold at {}",
                start + len,
                self.max_len,
                std::panic::Location::caller()
            );
        }
        // The start is a runtime parameter of `arange`, so decoding one
        // position after another reuses one compiled graph.
        let positions = Tensor::arange(start as i32, (start + len) as i32, 1, x.device());
        self.apply_at(x, &positions)
    }

    /// `x` `[..., L, head_dim]` rotated for the integer `positions`:
    /// `[L]`, shared by every sequence, or `[B, L]` for `x` `[B, H, L,
    /// head_dim]`, a row of positions a sequence (left-padded batches).
    /// Each below `max_len`.
    #[track_caller]
    pub fn apply_at(&self, x: &Tensor, positions: &Tensor) -> Tensor {
        let _op = crate::graph::record_as("rotary_embedding");
        let r = x.rank();
        let l = if r >= 2 { x.shape()[r - 2] } else { 0 };
        let shared = positions.shape() == [l];
        let per_row = r == 4 && positions.shape() == [x.shape()[0], l];
        if r < 2 || x.shape()[r - 1] != self.head_dim || !(shared || per_row) {
            panic!(
                "RotaryEmbedding: x {:?} must be [..., L, {}] and positions [L] (or [B, L] for x [B, H, L, D]), got positions {:?} at {}",
                x.shape(),
                self.head_dim,
                positions.shape(),
                std::panic::Location::caller()
            );
        }
        let dtype = x.dtype();
        let half = self.head_dim / 2;
        let at = |t: &Tensor| {
            let t = if shared {
                t.index_select(0, positions)
            } else {
                let b = x.shape()[0] as isize;
                t.index_select(0, &positions.reshape([-1])).reshape([
                    b,
                    1,
                    l as isize,
                    half as isize,
                ])
            };
            if dtype.is_half() { t.cast(dtype) } else { t }
        };
        let (cos, sin) = (at(&self.cos), at(&self.sin));
        match self.layout {
            RopeLayout::HalfSplit => {
                let x1 = x.narrow(-1, 0, half);
                let x2 = x.narrow(-1, half, half);
                let a = &x1 * &cos - &x2 * &sin;
                let b = &x2 * &cos + &x1 * &sin;
                Tensor::cat(&[&a, &b], -1)
            }
            RopeLayout::Interleaved => {
                let mut pairs: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
                pairs[r - 1] = half as isize;
                pairs.push(2);
                let xp = x.reshape(pairs);
                let (x1, x2) = (xp.select(-1, 0), xp.select(-1, 1));
                let a = &x1 * &cos - &x2 * &sin;
                let b = &x2 * &cos + &x1 * &sin;
                let shape: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
                Tensor::stack(&[&a, &b], -1).reshape(shape)
            }
        }
    }
}
