//! Adadelta (Zeiler 2012), the optimiser of PyTorch's MNIST example.

use super::{Optimizer, l2_decayed, restore_into};
use crate::autograd::NoGradGuard;
use crate::error::Result;
use crate::tensor::Tensor;

/// Adadelta with PyTorch's defaults (rho 0.9, eps 1e-6) and its update:
/// `sq = rho sq + (1-rho) g²`, `delta = sqrt(acc + eps) / sqrt(sq + eps) * g`,
/// `acc = rho acc + (1-rho) delta²`, `p -= lr * delta`.
pub struct Adadelta {
    params: Vec<Tensor>,
    lr: f32,
    rho: f32,
    eps: f32,
    weight_decay: f32,
    square_avg: Vec<Tensor>,
    acc_delta: Vec<Tensor>,
}

impl Adadelta {
    /// Adadelta with learning rate `lr` (PyTorch's default is 1.0).
    pub fn new(params: Vec<Tensor>, lr: f32) -> Adadelta {
        let square_avg = params
            .iter()
            .map(|p| Tensor::stored_zeros_like(p))
            .collect();
        let acc_delta = params
            .iter()
            .map(|p| Tensor::stored_zeros_like(p))
            .collect();
        Adadelta {
            params,
            lr,
            rho: 0.9,
            eps: 1e-6,
            weight_decay: 0.0,
            square_avg,
            acc_delta,
        }
    }

    /// Sets rho (builder style).
    pub fn rho(mut self, rho: f32) -> Adadelta {
        self.rho = rho;
        self
    }

    /// Sets eps (builder style).
    pub fn eps(mut self, eps: f32) -> Adadelta {
        self.eps = eps;
        self
    }

    /// Sets the L2 weight decay (builder style).
    pub fn weight_decay(mut self, weight_decay: f32) -> Adadelta {
        self.weight_decay = weight_decay;
        self
    }
}

impl Optimizer for Adadelta {
    fn step(&mut self) {
        let _guard = NoGradGuard::new();
        let rho = self.rho;
        let state = self.square_avg.iter().zip(&self.acc_delta);
        for (p, (sq, acc)) in self.params.iter().zip(state) {
            let Some(g) = p.grad() else { continue };
            let g = l2_decayed(g, p, self.weight_decay);
            sq.mul_(rho).add_(&g * &g * (1.0 - rho));
            let std = (sq + self.eps).sqrt();
            let delta = (acc + self.eps).sqrt() / std * &g;
            acc.mul_(rho).add_(&delta * &delta * (1.0 - rho));
            p.sub_(&delta * self.lr);
        }
    }

    /// `square_avg.{k}` and `acc_delta.{k}` for each parameter.
    fn state(&self) -> Vec<(String, Tensor)> {
        let pairs = self.square_avg.iter().zip(&self.acc_delta).enumerate();
        pairs
            .flat_map(|(k, (sq, acc))| {
                [
                    (format!("square_avg.{k}"), sq.clone()),
                    (format!("acc_delta.{k}"), acc.clone()),
                ]
            })
            .collect()
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        for (k, (sq, acc)) in self.square_avg.iter().zip(&self.acc_delta).enumerate() {
            restore_into(state, &format!("square_avg.{k}"), sq)?;
            restore_into(state, &format!("acc_delta.{k}"), acc)?;
        }
        Ok(())
    }

    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn lr(&self) -> f32 {
        self.lr
    }

    fn set_lr(&mut self, lr: f32) {
        self.lr = lr;
    }
}
