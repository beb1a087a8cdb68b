//! Stateless activations and losses (PyTorch's `torch.nn.functional`).
//! Losses average over the batch (`reduction='mean'`).

use std::panic::Location;

use crate::dtype::DType;
use crate::tensor::Tensor;

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

/// Negative log-likelihood of `log_probs` `[N, C]` at the integer class
/// indices `target` `[N]`, averaged over `N`. Computed as a one-hot mask
/// times the log-probabilities, so it fuses into a single reduction kernel
/// (and its gradient into an elementwise one).
#[track_caller]
pub fn nll_loss(log_probs: &Tensor, target: &Tensor) -> Tensor {
    let loc = Location::caller();
    let ok = log_probs.rank() == 2
        && target.rank() == 1
        && target.shape()[0] == log_probs.shape()[0]
        && matches!(target.dtype(), DType::I32 | DType::U32);
    if !ok {
        panic!(
            "nll_loss: expects log_probs [N, C] and integer target [N], got {:?} ({}) and {:?} ({}) at {loc}",
            log_probs.shape(),
            log_probs.dtype(),
            target.shape(),
            target.dtype()
        );
    }
    let (n, c) = (log_probs.shape()[0], log_probs.shape()[1]);
    let picked = (log_probs * target.one_hot(c)).sum_all();
    picked * (-1.0 / n.max(1) as f32)
}

/// Cross-entropy of raw `logits` `[N, C]` against integer `target` `[N]`:
/// `nll_loss(log_softmax(logits, 1), target)`.
#[track_caller]
pub fn cross_entropy(logits: &Tensor, target: &Tensor) -> Tensor {
    nll_loss(&logits.log_softmax(-1), target)
}

/// Mean squared error over all elements (`target` broadcasts).
#[track_caller]
pub fn mse_loss(pred: &Tensor, target: &Tensor) -> Tensor {
    let d = pred - target;
    (&d * &d).mean_all()
}
