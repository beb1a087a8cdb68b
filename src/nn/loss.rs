//! Losses with PyTorch's semantics and options (`torch.nn.functional`):
//! cross-entropy with class weights, `ignore_index` and label smoothing
//! over `[N, C, d1, ...]`, binary cross-entropy on logits, L1, smooth L1
//! and KL divergence. Each is built from fused elementwise ops and
//! reductions, so its gradient comes from autograd.

use std::panic::Location;

use crate::dtype::DType;
use crate::tensor::Tensor;

/// How a loss combines its per-element values (PyTorch's `reduction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The mean (for cross-entropy with class weights: the weighted mean).
    #[default]
    Mean,
    /// The sum.
    Sum,
    /// Per-element values, unreduced.
    None,
    /// The sum divided by the batch size (only [`kl_div`], where it is
    /// the mathematically right mean).
    BatchMean,
}

/// Options of [`cross_entropy_with`] and [`nll_loss_with`] (PyTorch's
/// defaults from `Default`).
#[derive(Clone, Copy, Debug)]
pub struct CrossEntropyOptions<'a> {
    /// A weight per class `[C]` (`None`: all ones).
    pub weight: Option<&'a Tensor>,
    /// Targets equal to this contribute nothing, to the sum or to the
    /// mean's divisor (-100).
    pub ignore_index: i64,
    /// Mixes the target with the uniform distribution: `(1 - s)` on the
    /// class, `s / C` spread over every class (0.0). Cross-entropy only.
    pub label_smoothing: f32,
    /// Mean over the targets not ignored (weighted), sum, or none.
    pub reduction: Reduction,
}

impl Default for CrossEntropyOptions<'_> {
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            label_smoothing: 0.0,
            reduction: Reduction::Mean,
        }
    }
}

/// `x` `[N, C, d1, ...]` (or `[C]`) with the class dim moved last:
/// `[N, d1, ..., C]`.
fn classes_last(x: &Tensor) -> Tensor {
    if x.rank() <= 2 {
        return x.clone();
    }
    let mut order: Vec<isize> = (0..x.rank() as isize).filter(|&d| d != 1).collect();
    order.push(1);
    x.permute(order)
}

/// The shape a class-index target must have for input `x`: `x`'s shape
/// without its class dim (`[]` for an unbatched `[C]`).
fn target_shape(x: &Tensor) -> Vec<usize> {
    match x.rank() {
        1 => vec![],
        _ => {
            let mut s = x.shape().to_vec();
            s.remove(1);
            s
        }
    }
}

/// Negative log-likelihood of `log_probs` `[N, C, d1, ...]` at integer
/// class indices `target` `[N, d1, ...]`, with PyTorch's options (the
/// label smoothing of [`cross_entropy_with`] included).
///
/// A target outside `0..C` other than `ignore_index` matches no class
/// and adds nothing but its weight's divisor share (PyTorch raises; the
/// targets live on the device, where checking would cost a readback).
#[track_caller]
pub fn nll_loss_with(log_probs: &Tensor, target: &Tensor, options: &CrossEntropyOptions) -> Tensor {
    let loc = Location::caller();
    let rank_ok = log_probs.rank() >= 1 && log_probs.dtype().is_float();
    let c = if log_probs.rank() == 1 {
        log_probs.shape().first().copied().unwrap_or(0)
    } else {
        log_probs.shape().get(1).copied().unwrap_or(0)
    };
    let weight_ok = options.weight.is_none_or(|w| w.shape() == [c]);
    let target_ok =
        target.dtype().is_int() && rank_ok && target.shape() == target_shape(log_probs).as_slice();
    if !(rank_ok && weight_ok && target_ok) || options.reduction == Reduction::BatchMean {
        panic!(
            "nll_loss: expects float input [N, C, d1, ...] (or [C]), integer target [N, d1, ...], \
             weight [C] and a reduction of mean, sum or none; got input {:?} ({}), target {:?} ({}), \
             weight {:?}, reduction {:?} at {loc}",
            log_probs.shape(),
            log_probs.dtype(),
            target.shape(),
            target.dtype(),
            options.weight.map(Tensor::shape),
            options.reduction
        );
    }
    let logp = classes_last(&log_probs.cast(DType::F32));
    let target = target.cast(DType::I32);
    // A target out of the i32 range can never match; nothing is ignored.
    let valid = match i32::try_from(options.ignore_index) {
        Ok(ignored) => target.ne(ignored).cast(DType::F32),
        Err(_) => Tensor::ones_like(&target).cast(DType::F32),
    };
    // The ignored index matches no class (or its row is zeroed below).
    let hot = target.one_hot(c) * valid.unsqueeze(-1);
    let class_weight = |t: &Tensor| match options.weight {
        Some(w) => t * w.cast(DType::F32),
        None => t.clone(),
    };
    let weighted_hot = class_weight(&hot);
    let mut per_element = -(&logp * &weighted_hot).sum([-1], false);
    let s = options.label_smoothing;
    if s > 0.0 {
        let smooth = -(class_weight(&logp)).sum([-1], false) * &valid * (1.0 / c.max(1) as f32);
        per_element = per_element * (1.0 - s) + smooth * s;
    }
    match options.reduction {
        Reduction::None => per_element,
        Reduction::Sum => per_element.sum_all(),
        // The mean over what was not ignored, weighted. When every target
        // is ignored PyTorch gives NaN with a zero gradient: the NaN is a
        // constant branch, and the other branch divides by 1 instead of 0
        // so its gradient stays finite (times the zero mask).
        _ => {
            let divisor = weighted_hot.sum_all();
            let nothing = divisor.eq(0.0f32);
            let mean = per_element.sum_all() / nothing.where_cond(1.0f32, &divisor);
            nothing.where_cond(f32::NAN, mean)
        }
    }
}

/// Negative log-likelihood of `log_probs` `[N, C]` at the integer class
/// indices `target` `[N]`, averaged over the targets other than -100
/// (PyTorch's defaults; see [`nll_loss_with`] for the options).
#[track_caller]
pub fn nll_loss(log_probs: &Tensor, target: &Tensor) -> Tensor {
    nll_loss_with(log_probs, target, &CrossEntropyOptions::default())
}

/// Cross-entropy of raw `logits` `[N, C, d1, ...]` (or `[C]`) against
/// integer class indices `target` `[N, d1, ...]`, with PyTorch's options:
/// class weights, `ignore_index`, `label_smoothing`, reduction.
#[track_caller]
pub fn cross_entropy_with(
    logits: &Tensor,
    target: &Tensor,
    options: &CrossEntropyOptions,
) -> Tensor {
    let _op = crate::graph::record_as("cross_entropy");
    let class_dim = if logits.rank() == 1 { 0 } else { 1 };
    nll_loss_with(&logits.log_softmax(class_dim), target, options)
}

/// Cross-entropy of raw `logits` `[N, C, d1, ...]` against integer
/// `target` `[N, d1, ...]`, averaged over the targets other than -100:
/// `nll_loss(log_softmax(logits, 1), target)`.
#[track_caller]
pub fn cross_entropy(logits: &Tensor, target: &Tensor) -> Tensor {
    cross_entropy_with(logits, target, &CrossEntropyOptions::default())
}

/// Applies `reduction` to per-element losses `l` (batch size `n` for
/// [`Reduction::BatchMean`]).
fn reduce(l: Tensor, reduction: Reduction) -> Tensor {
    match reduction {
        Reduction::Mean => l.mean_all(),
        Reduction::Sum => l.sum_all(),
        Reduction::None => l,
        Reduction::BatchMean => {
            let n = l.shape().first().copied().unwrap_or(1);
            l.sum_all() * (1.0 / n.max(1) as f32)
        }
    }
}

/// Panics unless `input` and `target` are float tensors of one shape.
#[track_caller]
fn same_shape(op: &str, input: &Tensor, target: &Tensor) {
    if input.shape() != target.shape() || !input.dtype().is_float() || !target.dtype().is_float() {
        panic!(
            "{op}: input {:?} ({}) and target {:?} ({}) must be float tensors of one shape at {}",
            input.shape(),
            input.dtype(),
            target.shape(),
            target.dtype(),
            Location::caller()
        );
    }
}

/// `log(1 + e^-|x|)`, the stable tail of the softplus.
fn log1p_exp_neg_abs(x: &Tensor) -> Tensor {
    ((-x.abs()).exp() + 1.0).log()
}

/// Binary cross-entropy of `target` probabilities given raw `input`
/// logits (PyTorch's `binary_cross_entropy_with_logits`), in the stable
/// form `max(x, 0) - x * y + log(1 + e^-|x|)`, averaged.
#[track_caller]
pub fn binary_cross_entropy_with_logits(input: &Tensor, target: &Tensor) -> Tensor {
    binary_cross_entropy_with_logits_with(input, target, None, None, Reduction::Mean)
}

/// [`binary_cross_entropy_with_logits`] with a `weight` per element
/// (broadcast), a `pos_weight` per class (broadcast over the last dim:
/// the positive term's weight) and a reduction.
#[track_caller]
pub fn binary_cross_entropy_with_logits_with(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    reduction: Reduction,
) -> Tensor {
    same_shape("binary_cross_entropy_with_logits", input, target);
    if reduction == Reduction::BatchMean {
        panic!(
            "binary_cross_entropy_with_logits: reduction BatchMean is kl_div's only; use Mean, Sum or None at {}",
            Location::caller()
        );
    }
    let _op = crate::graph::record_as("binary_cross_entropy_with_logits");
    let (x, y) = (input, target);
    // softplus(-x) = log(1 + e^-x) = max(-x, 0) + log(1 + e^-|x|).
    let softplus_neg = (-x).relu() + log1p_exp_neg_abs(x);
    let l = match pos_weight {
        // (1 - y) x + (1 + (p - 1) y) softplus(-x)
        Some(p) => (-y + 1.0) * x + (y * (p - 1.0) + 1.0) * softplus_neg,
        None => (-y + 1.0) * x + softplus_neg,
    };
    let l = match weight {
        Some(w) => l * w,
        None => l,
    };
    reduce(l, reduction)
}

/// Mean absolute error `mean(|input - target|)`.
#[track_caller]
pub fn l1_loss(input: &Tensor, target: &Tensor) -> Tensor {
    same_shape("l1_loss", input, target);
    (input - target).abs().mean_all()
}

/// Smooth L1 (Huber-like) loss, averaged: `0.5 d^2 / beta` where
/// `|d| < beta`, `|d| - 0.5 beta` elsewhere (`beta = 0`: L1).
#[track_caller]
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor, beta: f32) -> Tensor {
    same_shape("smooth_l1_loss", input, target);
    if beta.is_nan() || beta < 0.0 {
        panic!(
            "smooth_l1_loss: beta must be non-negative, got {beta} at {}",
            Location::caller()
        );
    }
    let d = (input - target).abs();
    if beta == 0.0 {
        return d.mean_all();
    }
    let quadratic = &d * &d * (0.5 / beta);
    let linear = &d - 0.5 * beta;
    d.lt(beta).where_cond(quadratic, linear).mean_all()
}

/// Kullback-Leibler divergence of `target` from `input`, where `input`
/// holds log-probabilities (PyTorch's `kl_div`): pointwise
/// `target * (log(target) - input)` (0 where `target` is 0), or with
/// `log_target` `exp(target) * (target - input)`. `Reduction::Mean`
/// averages every element as PyTorch does; `BatchMean` divides the sum by
/// the batch size (the KL divergence's own mean).
#[track_caller]
pub fn kl_div(input: &Tensor, target: &Tensor, reduction: Reduction, log_target: bool) -> Tensor {
    same_shape("kl_div", input, target);
    let _op = crate::graph::record_as("kl_div");
    let l = if log_target {
        target.exp() * (target - input)
    } else {
        // xlogy(t, t): 0 at t = 0 (and NaN stays NaN).
        let t_log_t = target.eq(0.0f32).where_cond(0.0f32, target * target.log());
        t_log_t - target * input
    };
    reduce(l, reduction)
}
