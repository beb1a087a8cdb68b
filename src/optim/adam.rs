//! Adam and AdamW, with PyTorch's bias-corrected update.

use super::{Optimizer, l2_decayed};
use crate::autograd::NoGradGuard;
use crate::tensor::Tensor;

/// Moment estimates shared by Adam and AdamW.
struct Moments {
    params: Vec<Tensor>,
    lr: f32,
    betas: (f32, f32),
    eps: f32,
    weight_decay: f32,
    step: i32,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

impl Moments {
    fn new(params: Vec<Tensor>, lr: f32, weight_decay: f32) -> Moments {
        let m = params.iter().map(Tensor::zeros_like).collect();
        let v = params.iter().map(Tensor::zeros_like).collect();
        Moments {
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay,
            step: 0,
            m,
            v,
        }
    }

    /// One update; `decoupled` is AdamW's weight decay (applied to the
    /// parameter) rather than Adam's (added to the gradient).
    fn update(&mut self, decoupled: bool) {
        let _guard = NoGradGuard::new();
        self.step += 1;
        let (b1, b2) = self.betas;
        let bc1 = 1.0 - b1.powi(self.step);
        let bc2 = 1.0 - b2.powi(self.step);
        for ((p, m), v) in self.params.iter().zip(&self.m).zip(&self.v) {
            let Some(g) = p.grad() else { continue };
            if self.weight_decay != 0.0 && decoupled {
                p.mul_(1.0 - self.lr * self.weight_decay);
            }
            let g = if decoupled {
                g
            } else {
                l2_decayed(g, p, self.weight_decay)
            };
            m.mul_(b1).add_(&g * (1.0 - b1));
            v.mul_(b2).add_(&g * &g * (1.0 - b2));
            let denom = v.sqrt() * (1.0 / bc2.sqrt()) + self.eps;
            p.sub_(m / denom * (self.lr / bc1));
        }
    }
}

/// The builders and the `Optimizer` impl shared by Adam and AdamW.
macro_rules! moment_optimizer {
    ($name:ident, $decoupled:expr, $decay_doc:literal) => {
        impl $name {
            /// Sets `(beta1, beta2)` (builder style).
            pub fn betas(mut self, beta1: f32, beta2: f32) -> $name {
                self.0.betas = (beta1, beta2);
                self
            }

            /// Sets eps (builder style).
            pub fn eps(mut self, eps: f32) -> $name {
                self.0.eps = eps;
                self
            }

            #[doc = $decay_doc]
            pub fn weight_decay(mut self, weight_decay: f32) -> $name {
                self.0.weight_decay = weight_decay;
                self
            }
        }

        impl Optimizer for $name {
            fn step(&mut self) {
                self.0.update($decoupled);
            }
            fn params(&self) -> &[Tensor] {
                &self.0.params
            }
            fn lr(&self) -> f32 {
                self.0.lr
            }
            fn set_lr(&mut self, lr: f32) {
                self.0.lr = lr;
            }
        }
    };
}

/// Adam (Kingma & Ba) with L2 weight decay added to the gradient.
pub struct Adam(Moments);

impl Adam {
    /// Adam with betas (0.9, 0.999), eps 1e-8, no weight decay.
    pub fn new(params: Vec<Tensor>, lr: f32) -> Adam {
        Adam(Moments::new(params, lr, 0.0))
    }
}

moment_optimizer!(Adam, false, "Sets the L2 weight decay (builder style).");

/// AdamW (Loshchilov & Hutter): weight decay applied to the parameter,
/// decoupled from the gradient (default 0.01, as in PyTorch).
pub struct AdamW(Moments);

impl AdamW {
    /// AdamW with betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
    pub fn new(params: Vec<Tensor>, lr: f32) -> AdamW {
        AdamW(Moments::new(params, lr, 0.01))
    }
}

moment_optimizer!(
    AdamW,
    true,
    "Sets the decoupled weight decay (builder style)."
);
