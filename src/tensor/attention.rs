//! Fused attention, the core of `scaled_dot_product_attention` when no
//! mask tensor is given.

use std::panic::Location;

use super::Tensor;
use super::elementwise::cast_node;
use crate::autograd::rules;
use crate::dtype::DType;
use crate::graph::Node;
use crate::graph::op::Op;

/// Value widths up to which the fused kernel is used: each invocation
/// keeps one accumulator per output column.
pub(crate) const FUSED_ATTENTION_MAX_EV: usize = 256;

impl Tensor {
    /// The attention scores `self k^T * scale` for queries `self`, with
    /// positions above the diagonal at -inf when `causal` (the form both
    /// the three-kernel forward and the fused kernel's gradient use).
    #[track_caller]
    pub(crate) fn attention_scores(&self, k: &Tensor, scale: f32, causal: bool) -> Tensor {
        let scores = self.matmul(&k.transpose(-2, -1)) * scale;
        if causal {
            let keep = scores.lower_triangle_mask("scaled_dot_product_attention", 0);
            keep.where_cond(&scores, f32::NEG_INFINITY)
        } else {
            scores
        }
    }

    /// `softmax(q k^T * scale) v` for `self` = q `[.., L, E]`, k
    /// `[.., S, E]`, v `[.., S, Ev]` with equal batch dims (checked by the
    /// caller), causal when asked: one kernel, the scores never stored.
    #[track_caller]
    pub(crate) fn attention_fused(
        &self,
        k: &Tensor,
        v: &Tensor,
        scale: f32,
        causal: bool,
    ) -> Tensor {
        let loc = Location::caller();
        // Computed in f32 whatever the float dtype; q, k and v of one
        // 16-bit dtype are read as they are and the result is of theirs.
        let dtype = match self.dtype() {
            d if d.is_half() && k.dtype() == d && v.dtype() == d => d,
            _ => DType::F32,
        };
        let nodes: Vec<_> = [self, k, v]
            .iter()
            .map(|t| cast_node(&t.node(), dtype, loc))
            .collect();
        let mut shape = self.shape().to_vec();
        *shape.last_mut().expect("rank >= 2") = v.shape()[v.rank() - 1];
        let node = Node::pending(
            Op::Attention { causal },
            nodes,
            vec![scale.to_bits()],
            shape,
            dtype,
            loc,
        );
        let out = Tensor::from_node(node, self.device());
        rules::attention(self, k, v, scale, causal, &out);
        out
    }
}
