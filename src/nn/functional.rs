//! Stateless activations and losses (PyTorch's `torch.nn.functional`).
//! Losses average over the batch (`reduction='mean'`).

use std::panic::Location;

use crate::dtype::DType;
use crate::tensor::{FUSED_ATTENTION_MAX_EV, InterpolateMode, Tensor};

pub use super::norm::{batch_norm, group_norm};

pub use super::loss::{
    CrossEntropyOptions, Reduction, binary_cross_entropy_with_logits,
    binary_cross_entropy_with_logits_with, cross_entropy, cross_entropy_with, kl_div, l1_loss,
    nll_loss, nll_loss_with, smooth_l1_loss,
};

/// `max(x, 0)`.
#[track_caller]
pub fn relu(x: &Tensor) -> Tensor {
    x.relu()
}

/// Log-softmax along `axis`.
#[track_caller]
pub fn log_softmax(x: &Tensor, axis: isize) -> Tensor {
    x.log_softmax(axis)
}

/// Mean squared error over all elements (`target` broadcasts).
#[track_caller]
pub fn mse_loss(pred: &Tensor, target: &Tensor) -> Tensor {
    let d = pred - target;
    (&d * &d).mean_all()
}

/// The exact GELU (`x * Phi(x)`, through `erf`).
#[track_caller]
pub fn gelu(x: &Tensor) -> Tensor {
    x.gelu()
}

/// SiLU (swish), `x * sigmoid(x)`.
#[track_caller]
pub fn silu(x: &Tensor) -> Tensor {
    x.silu()
}

/// Layer normalisation over the trailing dims `normalized_shape` (PyTorch's
/// `layer_norm`): `(x - mean) / sqrt(var + eps)` with the biased variance,
/// then times `weight` and plus `bias` when given (each shaped
/// `normalized_shape`).
///
/// An f16 or bf16 input is normalised in f32 and its result rounded once
/// to its own dtype, as PyTorch's half-precision kernels do.
///
/// One kernel (a row per invocation, or a workgroup per row on GPUs:
/// mean, centred second moment, write), with the weight and bias in its
/// epilogue; the gradient with respect to `x` is one more such kernel
/// (and the weight's a reduction).
#[track_caller]
pub fn layer_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f32,
) -> Tensor {
    let _op = crate::graph::record_as("layer_norm");
    let loc = Location::caller();
    let k = normalized_shape.len();
    let fits = k <= x.rank() && x.shape()[x.rank() - k..] == *normalized_shape;
    let params_fit = [weight, bias]
        .iter()
        .flatten()
        .all(|p| p.shape() == normalized_shape);
    if !fits || !params_fit || !x.dtype().is_float() {
        panic!(
            "layer_norm: input {:?} ({}) must be a float (f32, f16, bf16) and end in normalized_shape {normalized_shape:?}, \
             weight {:?} and bias {:?} shaped like it, at {loc}",
            x.shape(),
            x.dtype(),
            weight.map(Tensor::shape),
            bias.map(Tensor::shape),
        );
    }
    // The normalised dims as one last axis: one fused row kernel.
    let len: usize = normalized_shape.iter().product();
    let rows = x.numel().checked_div(len).unwrap_or(0);
    let y = x
        .reshape([rows as isize, len as isize])
        .normalize_rows(eps)
        .reshape(x.shape().iter().map(|&d| d as isize).collect::<Vec<_>>());
    // Out-of-place ops: `*=` would write into the normalised value's
    // own handle.
    let y = match weight {
        Some(w) => y * w,
        None => y,
    };
    match bias {
        Some(b) => y + b,
        None => y,
    }
}

/// Root mean square normalisation over the trailing `normalized_shape`
/// dims (PyTorch's `F.rms_norm`): `x / sqrt(mean(x^2) + eps) * weight`,
/// the mean over those dims. `eps: None` takes the input dtype's machine
/// epsilon, as PyTorch does (`1.19e-7` for f32, `9.77e-4` for f16,
/// `7.81e-3` for bf16). One fused row kernel forward and one backward,
/// computed in f32 for f16/bf16 input and rounded once to its dtype.
#[track_caller]
pub fn rms_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f32>,
) -> Tensor {
    let _op = crate::graph::record_as("rms_norm");
    let loc = Location::caller();
    let k = normalized_shape.len();
    let fits = k <= x.rank() && x.shape()[x.rank() - k..] == *normalized_shape;
    let weight_fits = weight.is_none_or(|w| w.shape() == normalized_shape);
    if !fits || !weight_fits || !x.dtype().is_float() {
        panic!(
            "rms_norm: input {:?} ({}) must be a float (f32, f16, bf16) and end in normalized_shape {normalized_shape:?}, \
             weight {:?} shaped like it, at {loc}",
            x.shape(),
            x.dtype(),
            weight.map(Tensor::shape),
        );
    }
    let eps = eps.unwrap_or_else(|| machine_epsilon(x.dtype()));
    let len: usize = normalized_shape.iter().product();
    let rows = x.numel().checked_div(len).unwrap_or(0);
    let y = x
        .reshape([rows as isize, len as isize])
        .rms_normalize_rows(eps)
        .reshape(x.shape().iter().map(|&d| d as isize).collect::<Vec<_>>());
    match weight {
        Some(w) => y * w,
        None => y,
    }
}

/// The gap between 1 and the next float of `dtype` (PyTorch's
/// `torch.finfo(dtype).eps`).
fn machine_epsilon(dtype: DType) -> f32 {
    match dtype {
        DType::F16 => half::f16::EPSILON.to_f32(),
        DType::BF16 => half::bf16::EPSILON.to_f32(),
        _ => f32::EPSILON,
    }
}

/// Rows of `weight` `[num_embeddings, dim]` picked by the integer `ids`
/// (any shape): `[*ids.shape, dim]`. The gradient scatter-adds into the
/// rows that were picked (repeated ids accumulate).
#[track_caller]
pub fn embedding(ids: &Tensor, weight: &Tensor) -> Tensor {
    let _op = crate::graph::record_as("embedding");
    let loc = Location::caller();
    if weight.rank() != 2 || !ids.dtype().is_int() {
        panic!(
            "embedding: expects integer ids and a [num_embeddings, dim] weight, got ids {:?} ({}) and weight {:?} ({}) at {loc}",
            ids.shape(),
            ids.dtype(),
            weight.shape(),
            weight.dtype()
        );
    }
    let mut shape: Vec<usize> = ids.shape().to_vec();
    shape.push(weight.shape()[1]);
    let flat = ids.cast(DType::I32).reshape([ids.numel()]);
    weight.index_select(0, &flat).reshape(shape)
}

/// Whether the fused attention kernel's loops fit the device's loop
/// budget: a query row loops over every key, and per key over the head
/// dims of the query and value (lavapipe counts them all against one
/// limit per invocation); otherwise the three-kernel form runs.
fn fused_attention_loops_fit(q: &Tensor, k: &Tensor, v: &Tensor) -> bool {
    let keys = k.shape()[k.rank() - 2];
    let (e, ev) = (q.shape()[q.rank() - 1], v.shape()[v.rank() - 1]);
    let iterations = keys * (1 + e + ev) + ev;
    q.device()
        .loop_budget(1)
        .is_none_or(|budget| iterations <= budget)
}

/// Attention `softmax(q k^T * scale + mask) v` over `q` `[..., L, E]`,
/// `k` `[..., S, E]` and `v` `[..., S, Ev]` (leading dims broadcast), with
/// `scale = 1/sqrt(E)` (PyTorch's `scaled_dot_product_attention`, without
/// dropout). `attn_mask` is a bool tensor (true keeps a position) or a
/// float one added to the scores; `is_causal` keeps position `j` for query
/// `i` only when `j <= i` (the top-left-aligned triangle PyTorch uses).
/// [`scaled_dot_product_attention_with`] takes PyTorch's other
/// arguments (`scale`, `enable_gqa`) and a bottom-right causal mask.
///
/// It runs as three kernels: the score matmul with the scale and mask in
/// its epilogue, the softmax, and the matmul with `v`. With
/// [`DeviceConfig::fused_attention`](crate::DeviceConfig::fused_attention)
/// (and no mask tensor) it is one kernel instead: a query row per
/// invocation computes its scores, an online softmax and the weighted sum
/// of the value rows, so the `[L, S]` scores never go through memory, and
/// the gradient recomputes the probabilities.
#[track_caller]
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    attn_mask: Option<&Tensor>,
    is_causal: bool,
) -> Tensor {
    let options = AttentionOptions {
        attn_mask,
        is_causal,
        ..AttentionOptions::default()
    };
    scaled_dot_product_attention_with(q, k, v, &options)
}

/// The arguments of PyTorch's `scaled_dot_product_attention` after
/// `q, k, v` (dropout aside), and the bottom-right causal alignment.
#[derive(Clone, Copy, Default, Debug)]
pub struct AttentionOptions<'a> {
    /// A bool mask (true keeps a position) or a float one added to the
    /// scores, broadcast to `[..., L, S]`.
    pub attn_mask: Option<&'a Tensor>,
    /// Keep key `j` for query `i` only when `j <= i` (top-left aligned,
    /// as PyTorch's `is_causal`).
    pub is_causal: bool,
    /// With `is_causal`, align the triangle bottom-right instead: query
    /// `i` of `L` keeps keys `j <= i + S - L` (PyTorch's
    /// `causal_lower_right`), what a decoder needs when its queries are
    /// the last `L` of `S` positions.
    pub lower_right: bool,
    /// The score scale; `None` is `1/sqrt(E)`.
    pub scale: Option<f32>,
    /// Grouped-query attention: `q` has `Hq` heads (dim -3) and `k`, `v`
    /// `Hkv`, `Hq` a multiple of `Hkv`; query head `h` attends with
    /// key/value head `h / (Hq / Hkv)`, read in place (the repeated keys
    /// are a broadcast, never stored).
    pub enable_gqa: bool,
}

/// [`scaled_dot_product_attention`] with all of PyTorch's arguments but
/// dropout (see [`AttentionOptions`]).
#[track_caller]
pub fn scaled_dot_product_attention_with(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    options: &AttentionOptions<'_>,
) -> Tensor {
    let _op = crate::graph::record_as("scaled_dot_product_attention");
    let loc = Location::caller();
    let ok = q.rank() >= 2
        && k.rank() >= 2
        && v.rank() >= 2
        && q.shape().last() == k.shape().last()
        && k.shape()[k.rank() - 2] == v.shape()[v.rank() - 2];
    if !ok {
        panic!(
            "scaled_dot_product_attention: q {:?}, k {:?}, v {:?} must be [..., L, E], [..., S, E], [..., S, Ev] at {loc}",
            q.shape(),
            k.shape(),
            v.shape()
        );
    }
    let e = q.shape()[q.rank() - 1];
    let scale = options
        .scale
        .unwrap_or_else(|| 1.0 / (e.max(1) as f32).sqrt());
    let heads = |t: &Tensor| (t.rank() >= 3).then(|| t.shape()[t.rank() - 3]);
    if options.enable_gqa && heads(q) != heads(k) {
        return grouped_query_attention(q, k, v, options, loc);
    }
    let (l, s) = (q.shape()[q.rank() - 2], k.shape()[k.rank() - 2]);
    // A bottom-right triangle is the top-left one when L == S, and keeps
    // every key for queries at or past the end.
    let offset = if options.is_causal && options.lower_right {
        s as isize - l as isize
    } else {
        0
    };
    let (rq, rk, rv) = (q.rank(), k.rank(), v.rank());
    let same_batch = rq == rk
        && rq == rv
        && q.shape()[..rq - 2] == k.shape()[..rk - 2]
        && k.shape()[..rk - 2] == v.shape()[..rv - 2];
    let sizes_fit = q.numel() > 0
        && k.numel() > 0
        && v.numel() > 0
        && v.shape()[rv - 1] <= FUSED_ATTENTION_MAX_EV
        && fused_attention_loops_fit(q, k, v);
    let attn_mask = options.attn_mask;
    if q.device().config().fused_attention
        && attn_mask.is_none()
        && offset == 0
        && same_batch
        && sizes_fit
    {
        return q.attention_fused(k, v, scale, options.is_causal);
    }
    let scores = q.attention_scores(k, scale, false);
    let scores = if options.is_causal {
        let keep = scores.lower_triangle_mask("scaled_dot_product_attention", offset);
        keep.where_cond(&scores, f32::NEG_INFINITY)
    } else {
        scores
    };
    let scores = match attn_mask {
        Some(mask) if mask.dtype() == DType::Bool => mask.where_cond(&scores, f32::NEG_INFINITY),
        Some(mask) => scores + mask,
        None => scores,
    };
    // The mask's -inf (an f32 scalar) promotes 16-bit scores to f32; the
    // probabilities meet the values in the values' dtype.
    let probs = scores.softmax(-1);
    let probs = if probs.dtype() != v.dtype() && v.dtype().is_float() {
        probs.cast(v.dtype())
    } else {
        probs
    };
    probs.matmul(v)
}

/// Grouped-query attention: `q` `[.., Hq, L, E]` viewed as `[.., Hkv, g,
/// L, E]` against `k`, `v` `[.., Hkv, 1, S, E]` broadcast over the group
/// (never copied), then back to `[.., Hq, L, Ev]`.
fn grouped_query_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    options: &AttentionOptions<'_>,
    loc: &'static Location<'static>,
) -> Tensor {
    let (rq, rk) = (q.rank(), k.rank());
    let fits = rq >= 3
        && rk == rq
        && v.rank() == rq
        && q.shape()[..rq - 3] == k.shape()[..rk - 3]
        && k.shape()[..rk - 3] == v.shape()[..rk - 3]
        && k.shape()[rk - 3] == v.shape()[rk - 3]
        && k.shape()[rk - 3] > 0
        && q.shape()[rq - 3].is_multiple_of(k.shape()[rk - 3]);
    if !fits {
        panic!(
            "scaled_dot_product_attention: enable_gqa needs q [..., Hq, L, E] and k, v [..., Hkv, S, E] with the same leading dims and Hq a multiple of Hkv, got q {:?}, k {:?}, v {:?} at {loc}",
            q.shape(),
            k.shape(),
            v.shape()
        );
    }
    let (hq, hkv) = (q.shape()[rq - 3], k.shape()[rk - 3]);
    let group = hq / hkv;
    let grouped = |t: &Tensor, inner: usize| -> Vec<isize> {
        let mut shape: Vec<isize> = t.shape()[..rq - 3].iter().map(|&d| d as isize).collect();
        shape.extend([hkv as isize, group as isize]);
        shape.extend(t.shape()[rq - 2..].iter().map(|&d| d as isize));
        shape[rq - 1] = inner as isize;
        shape
    };
    let qg = q.reshape(grouped(q, q.shape()[rq - 2]));
    let spread = |t: &Tensor| {
        let shape = grouped(t, t.shape()[rk - 2]);
        t.unsqueeze(rk as isize - 2).expand(shape)
    };
    let mask = options.attn_mask.map(|m| {
        // A mask with a head dim (of Hq, or 1) gets the group dim after
        // it; masks without one broadcast as they are.
        let r = m.rank();
        if r < 3 {
            return m.clone();
        }
        let mut shape: Vec<isize> = m.shape().iter().map(|&d| d as isize).collect();
        if m.shape()[r - 3] == hq {
            shape.splice(r - 3..r - 2, [hkv as isize, group as isize]);
        } else {
            shape.insert(r - 2, 1);
        }
        m.reshape(shape)
    });
    let inner = AttentionOptions {
        attn_mask: mask.as_ref(),
        enable_gqa: false,
        ..*options
    };
    let out = scaled_dot_product_attention_with(&qg, &spread(k), &spread(v), &inner);
    let mut shape: Vec<isize> = q.shape()[..rq - 2].iter().map(|&d| d as isize).collect();
    shape.extend([q.shape()[rq - 2] as isize, v.shape()[rk - 1] as isize]);
    out.reshape(shape)
}

/// 2-D convolution (PyTorch's `F.conv2d`): see [`Tensor::conv2d_groups`].
#[track_caller]
pub fn conv2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
) -> Tensor {
    x.conv2d_groups(weight, bias, stride, padding, dilation, groups)
}

/// 1-D convolution (PyTorch's `F.conv1d`): see [`Tensor::conv1d`].
#[track_caller]
pub fn conv1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: usize,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Tensor {
    x.conv1d(weight, bias, stride, padding, dilation, groups)
}

/// Transposed 2-D convolution (PyTorch's `F.conv_transpose2d`, arguments
/// in its order): see [`Tensor::conv_transpose2d`].
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn conv_transpose2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: (usize, usize),
    padding: (usize, usize),
    output_padding: (usize, usize),
    groups: usize,
    dilation: (usize, usize),
) -> Tensor {
    x.conv_transpose2d(
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )
}

/// Max pooling (PyTorch's `F.max_pool2d`; padding counts as -inf).
#[track_caller]
pub fn max_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
) -> Tensor {
    x.max_pool2d(kernel, stride, padding)
}

/// Average pooling (PyTorch's `F.avg_pool2d`, `count_include_pad=True`).
#[track_caller]
pub fn avg_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
) -> Tensor {
    x.avg_pool2d(kernel, stride, padding)
}

/// Adaptive average pooling to `output` (PyTorch's
/// `F.adaptive_avg_pool2d`): see [`Tensor::adaptive_avg_pool2d`].
#[track_caller]
pub fn adaptive_avg_pool2d(x: &Tensor, output: (usize, usize)) -> Tensor {
    x.adaptive_avg_pool2d(output)
}

/// Resizing (PyTorch's `F.interpolate` for 4-D input): see
/// [`Tensor::interpolate`].
#[track_caller]
pub fn interpolate(
    x: &Tensor,
    size: Option<(usize, usize)>,
    scale_factor: Option<(f64, f64)>,
    mode: InterpolateMode,
    align_corners: bool,
) -> Tensor {
    x.interpolate(size, scale_factor, mode, align_corners)
}

/// One-hot encoding, `i64` (PyTorch's `F.one_hot`): see [`Tensor::one_hot`].
#[track_caller]
pub fn one_hot(x: &Tensor, num_classes: usize) -> Tensor {
    x.one_hot(num_classes)
}
