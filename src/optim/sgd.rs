//! Stochastic gradient descent with momentum, dampening, Nesterov and
//! weight decay, with PyTorch's update rule.

use super::{Optimizer, l2_decayed, state_entry};
use crate::autograd::NoGradGuard;
use crate::error::Result;
use crate::tensor::Tensor;

/// SGD: `p -= lr * d`, where `d` is the gradient (plus `weight_decay * p`),
/// or its momentum buffer `b = momentum * b + (1 - dampening) * d`.
pub struct Sgd {
    params: Vec<Tensor>,
    lr: f32,
    momentum: f32,
    dampening: f32,
    weight_decay: f32,
    nesterov: bool,
    buffers: Vec<Option<Tensor>>,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    pub fn new(params: Vec<Tensor>, lr: f32) -> Sgd {
        let n = params.len();
        Sgd {
            params,
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            buffers: vec![None; n],
        }
    }

    /// Sets the momentum factor (builder style).
    pub fn momentum(mut self, momentum: f32) -> Sgd {
        self.momentum = momentum;
        self
    }

    /// Sets the dampening of the momentum (builder style).
    pub fn dampening(mut self, dampening: f32) -> Sgd {
        self.dampening = dampening;
        self
    }

    /// Sets the L2 weight decay (builder style).
    pub fn weight_decay(mut self, weight_decay: f32) -> Sgd {
        self.weight_decay = weight_decay;
        self
    }

    /// Uses Nesterov momentum (builder style).
    pub fn nesterov(mut self, on: bool) -> Sgd {
        self.nesterov = on;
        self
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) {
        let _guard = NoGradGuard::new();
        for (p, buf) in self.params.iter().zip(&mut self.buffers) {
            let Some(g) = p.grad() else { continue };
            let mut d = l2_decayed(g, p, self.weight_decay);
            if self.momentum != 0.0 {
                let b = match buf {
                    None => buf.insert(d.deep_clone()),
                    Some(b) => {
                        b.mul_(self.momentum).add_(&d * (1.0 - self.dampening));
                        b
                    }
                };
                d = if self.nesterov {
                    d + &*b * self.momentum
                } else {
                    b.clone()
                };
            }
            p.sub_(d * self.lr);
        }
    }

    /// The momentum buffers that exist, as `momentum_buffer.{k}`.
    fn state(&self) -> Vec<(String, Tensor)> {
        self.buffers
            .iter()
            .enumerate()
            .filter_map(|(k, b)| {
                b.as_ref()
                    .map(|b| (format!("momentum_buffer.{k}"), b.clone()))
            })
            .collect()
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        for (k, (buf, p)) in self.buffers.iter_mut().zip(&self.params).enumerate() {
            let name = format!("momentum_buffer.{k}");
            *buf = match state_entry(state, &name) {
                Ok(src) if src.shape() == p.shape() => Some(src.deep_clone()),
                Ok(src) => {
                    return Err(crate::Error::State(format!(
                        "{name}: shape {:?} in the state, parameter {k} is {:?}",
                        src.shape(),
                        p.shape()
                    )));
                }
                // No buffer saved: this parameter had no update yet.
                Err(_) => None,
            };
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
