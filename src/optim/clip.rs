//! Gradient clipping by the global norm.

use crate::autograd::NoGradGuard;
use crate::tensor::Tensor;

/// Scales the gradients of `params` in place so that their global L2 norm
/// (all gradients as one vector) is at most `max_norm`, and returns that
/// norm from before clipping, as PyTorch's `clip_grad_norm_`: every
/// gradient is multiplied by `min(1, max_norm / (norm + 1e-6))`.
///
/// Nothing is read back: the norm and the factor are lazy values, and the
/// scaling fuses into whatever reads the gradients next (the optimiser's
/// update). The norm is one sum-of-squares reduction per gradient plus one
/// small kernel that combines them. Parameters without a gradient are
/// skipped; with none at all the norm is 0.
#[track_caller]
pub fn clip_grad_norm_(params: &[Tensor], max_norm: f32) -> Tensor {
    let _guard = NoGradGuard::new();
    let grads: Vec<Tensor> = params.iter().filter_map(Tensor::grad).collect();
    if grads.is_empty() {
        let dev = params
            .first()
            .map(|p| p.device().clone())
            .unwrap_or_default();
        return Tensor::scalar(0.0f32, &dev);
    }
    let squares: Vec<Tensor> = grads.iter().map(|g| (g * g).sum_all()).collect();
    let refs: Vec<&Tensor> = squares.iter().collect();
    let norm = Tensor::stack(&refs, 0).sum_all().sqrt();
    let scale = ((&norm + 1e-6).recip() * max_norm).minimum(1.0f32);
    for g in &grads {
        g.mul_(&scale);
    }
    norm
}
