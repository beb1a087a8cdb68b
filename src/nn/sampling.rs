//! Choosing the next token from logits on the device: greedy, or
//! temperature with top-k and top-p (nucleus) filtering, then a seeded
//! draw.

use crate::dtype::DType;
use crate::tensor::Tensor;

/// How [`sample_logits`] picks a token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Logits are divided by it; 0 picks the most likely token (greedy).
    pub temperature: f32,
    /// Keep only the `k` most likely tokens (Hugging Face's `top_k`).
    pub top_k: Option<usize>,
    /// Keep the most likely tokens whose probabilities add up to `p`,
    /// at least one (Hugging Face's `top_p`).
    pub top_p: Option<f32>,
}

impl Default for Sampling {
    /// Plain sampling at temperature 1.
    fn default() -> Sampling {
        Sampling {
            temperature: 1.0,
            top_k: None,
            top_p: None,
        }
    }
}

/// The next token of each row of `logits` `[batch, vocab]`: `i64`
/// `[batch]`, drawn from the device's seeded generator (see
/// [`Device::manual_seed`](crate::Device::manual_seed)). Top-k keeps the
/// tokens at least as likely as the `k`-th; top-p keeps, in order of
/// probability, the tokens until their sum reaches `p` (ties with the
/// last one kept are kept too). Everything runs on the device: a sort of
/// the row for top-p, a running sum, one draw.
#[track_caller]
pub fn sample_logits(logits: &Tensor, how: &Sampling) -> Tensor {
    let _op = crate::graph::record_as("sample_logits");
    if logits.rank() != 2 || logits.shape()[1] == 0 || !logits.dtype().is_float() {
        panic!(
            "sample_logits: needs float logits [batch, vocab], got {:?} ({}) at {}",
            logits.shape(),
            logits.dtype(),
            std::panic::Location::caller()
        );
    }
    let vocab = logits.shape()[1];
    let logits = logits.cast(DType::F32);
    if how.temperature <= 0.0 {
        return logits.argmax(1, false).cast(DType::I64);
    }
    let mut scaled = logits / how.temperature;
    if let Some(k) = how.top_k.filter(|&k| k > 0 && k < vocab) {
        let (top, _) = scaled.topk(k, 1, true);
        let kth = top.narrow(1, k - 1, 1);
        scaled = scaled.lt(&kth).where_cond(f32::NEG_INFINITY, &scaled);
    }
    let mut probs = scaled.softmax(1);
    if let Some(p) = how.top_p.filter(|&p| p < 1.0) {
        let (sorted, _) = probs.sort(1, true);
        // Tokens before which the sum is still below p are kept: the
        // first always.
        let before = sorted.cumsum(1) - &sorted;
        let kept = before.lt(p).cast(DType::I32).sum([1], true).maximum(1i32);
        let smallest_kept = sorted.gather(1, &(kept - 1i32));
        probs = probs.lt(&smallest_kept).where_cond(0.0f32, &probs);
    }
    probs.multinomial().cast(DType::I64)
}
