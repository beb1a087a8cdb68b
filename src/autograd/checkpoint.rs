//! Activation checkpointing (PyTorch's `torch.utils.checkpoint`): a
//! block's forward runs without recording its activations for backward,
//! and backward runs it again, recording, from its saved inputs. Memory
//! for the block's activations is traded for a second forward.
//!
//! The recomputation is recorded while backward runs, so its nodes come
//! after the forward's in the graph (graphs run in creation order): the
//! scheduler computes them where the gradient needs them, and the
//! forward's activations are dead by then (the graph merges no equal
//! nodes, so the recomputed ones are never folded back into the
//! forward's). Random draws inside the block (dropout) replay: the
//! recomputation starts the device's generator with the seed and at the
//! position the forward started it; and it runs under the forward's
//! autocast dtype.

use std::sync::Arc;

use super::grad_mode::EnableGradGuard;
use super::{no_grad, record, run_backward, save, wants};
use crate::tensor::Tensor;

/// `f(inputs)`, its activations recomputed during backward instead of
/// kept (see the module docs). Gradients reach `inputs` and every
/// parameter `f` uses, as without checkpointing, provided one of
/// `inputs` requires grad (as with PyTorch's reentrant checkpoint: a
/// block's input downstream of any parameter does). `f` is kept until
/// backward, so it owns what it uses (an `Arc` of the block):
///
/// ```
/// use std::sync::Arc;
/// use lazywgpu::nn::{self, Module};
/// use lazywgpu::{Device, Tensor};
/// let dev = Device::cpu();
/// let block = Arc::new(nn::Linear::new(8, 8, &dev));
/// let x = Tensor::randn([4, 8], &dev);
/// x.requires_grad_(true);
/// let b = block.clone();
/// let y = nn::checkpoint(&[&x], move |xs| b.forward(&xs[0]).relu());
/// y.sum_all().backward();
/// assert!(x.grad().is_some() && block.weight.grad().is_some());
/// ```
#[track_caller]
pub fn checkpoint(
    inputs: &[&Tensor],
    f: impl Fn(&[Tensor]) -> Tensor + Send + Sync + 'static,
) -> Tensor {
    let _op = crate::graph::record_as("checkpoint");
    let xs: Vec<Tensor> = inputs.iter().map(|&t| t.clone()).collect();
    if !wants(inputs) {
        return f(&xs);
    }
    let dev = xs[0].device().clone();
    let rng_start = dev.rng_state();
    // The recomputation runs inside backward, outside the caller's
    // autocast scope: it takes the forward's (PyTorch's checkpoint does).
    let amp = crate::amp::autocast_dtype();
    let y = no_grad(|| f(&xs));
    let saved: Vec<Tensor> = xs.iter().map(save).collect();
    let wanted: Vec<bool> = xs.iter().map(Tensor::requires_grad).collect();
    let f = Arc::new(f);
    record("checkpoint", &y, inputs, move |g| {
        let leaves: Vec<Tensor> = saved
            .iter()
            .zip(&wanted)
            .map(|(x, &w)| {
                let leaf = x.detach();
                if w {
                    leaf.requires_grad_(true);
                }
                leaf
            })
            .collect();
        let recomputed = {
            let _grad = EnableGradGuard::new();
            let _amp = crate::amp::AutocastGuard::new(amp);
            // Replays the forward's random draws (its seed and position),
            // then puts the generator back where backward found it.
            let now = dev.rng_state();
            dev.set_rng_state(rng_start);
            let out = f(&leaves);
            dev.set_rng_state(now);
            out
        };
        if recomputed.requires_grad() {
            run_backward(&recomputed, g.clone(), false);
        }
        leaves
            .iter()
            .zip(&wanted)
            .map(|(l, &w)| if w { l.grad() } else { None })
            .collect()
    });
    y
}
