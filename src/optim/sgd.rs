//! Stochastic gradient descent with momentum, dampening, Nesterov and
//! weight decay, with PyTorch's update rule and parameter groups.

use super::{Optimizer, ParamGroup, l2_decayed, nth_group, nth_group_mut, state_entry};
use crate::autograd::NoGradGuard;
use crate::error::Result;
use crate::tensor::Tensor;

/// One group's hyper-parameters and momentum buffers.
struct Group {
    params: Vec<Tensor>,
    lr: f32,
    momentum: f32,
    weight_decay: f32,
    /// Whether the group brought its own momentum / weight decay: the
    /// builders set the default of the groups that did not.
    own_momentum: bool,
    own_weight_decay: bool,
    /// One per parameter, made at its first update with momentum.
    buffers: Vec<Option<Tensor>>,
}

impl Group {
    fn new(g: ParamGroup, lr: f32) -> Group {
        let n = g.params.len();
        Group {
            lr: g.lr.unwrap_or(lr),
            momentum: g.momentum.unwrap_or(0.0),
            weight_decay: g.weight_decay.unwrap_or(0.0),
            own_momentum: g.momentum.is_some(),
            own_weight_decay: g.weight_decay.is_some(),
            params: g.params,
            buffers: vec![None; n],
        }
    }
}

/// SGD: `p -= lr * d`, where `d` is the gradient (plus `weight_decay * p`),
/// or its momentum buffer `b = momentum * b + (1 - dampening) * d`
/// (`d + momentum * b` with Nesterov). Each [`ParamGroup`] may have its
/// own learning rate, weight decay and momentum.
pub struct Sgd {
    groups: Vec<Group>,
    /// Every group's parameters, in group order (for `Optimizer::params`).
    all_params: Vec<Tensor>,
    dampening: f32,
    nesterov: bool,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    pub fn new(params: Vec<Tensor>, lr: f32) -> Sgd {
        Sgd::with_groups(vec![ParamGroup::new(params)], lr)
    }

    /// SGD over parameter groups; groups without their own learning rate,
    /// weight decay or momentum take `lr`, and the builders' values (0
    /// until set).
    pub fn with_groups(groups: Vec<ParamGroup>, lr: f32) -> Sgd {
        let groups: Vec<Group> = groups.into_iter().map(|g| Group::new(g, lr)).collect();
        let all_params = groups.iter().flat_map(|g| g.params.clone()).collect();
        Sgd {
            groups,
            all_params,
            dampening: 0.0,
            nesterov: false,
        }
    }

    /// Sets the momentum factor of the groups without their own (builder
    /// style).
    pub fn momentum(mut self, momentum: f32) -> Sgd {
        for g in self.groups.iter_mut().filter(|g| !g.own_momentum) {
            g.momentum = momentum;
        }
        self
    }

    /// Sets the dampening of the momentum (builder style).
    pub fn dampening(mut self, dampening: f32) -> Sgd {
        self.dampening = dampening;
        self
    }

    /// Sets the L2 weight decay of the groups without their own (builder
    /// style).
    pub fn weight_decay(mut self, weight_decay: f32) -> Sgd {
        for g in self.groups.iter_mut().filter(|g| !g.own_weight_decay) {
            g.weight_decay = weight_decay;
        }
        self
    }

    /// Uses Nesterov momentum (builder style).
    pub fn nesterov(mut self, on: bool) -> Sgd {
        self.nesterov = on;
        self
    }

    /// Every momentum buffer slot, in parameter order across the groups.
    fn buffers(&self) -> impl Iterator<Item = &Option<Tensor>> {
        self.groups.iter().flat_map(|g| g.buffers.iter())
    }
}

/// The hyper-parameters that one parameter's update reads.
#[derive(Clone, Copy)]
struct Settings {
    momentum: f32,
    dampening: f32,
    weight_decay: f32,
    nesterov: bool,
}

/// The step direction of parameter `p` with gradient `g`, moving its
/// momentum buffer. The momentum and the dampening are scalar runtime
/// parameters: a new momentum each step compiles nothing.
fn direction(s: Settings, p: &Tensor, g: Tensor, buf: &mut Option<Tensor>) -> Tensor {
    let d = l2_decayed(g, p, s.weight_decay);
    if s.momentum == 0.0 {
        return d;
    }
    let b = match buf {
        // PyTorch starts the buffer at the first direction, undamped.
        None => buf.insert(d.deep_clone()),
        Some(b) => {
            b.mul_(s.momentum).add_(&d * (1.0 - s.dampening));
            b
        }
    };
    if s.nesterov {
        d + &*b * s.momentum
    } else {
        b.clone()
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) {
        let _guard = NoGradGuard::new();
        for group in &mut self.groups {
            let settings = Settings {
                momentum: group.momentum,
                dampening: self.dampening,
                weight_decay: group.weight_decay,
                nesterov: self.nesterov,
            };
            for (p, buf) in group.params.iter().zip(&mut group.buffers) {
                let Some(g) = p.grad() else { continue };
                p.sub_(direction(settings, p, g, buf) * group.lr);
            }
        }
    }

    /// The momentum buffers that exist, as `momentum_buffer.{k}` for the
    /// k-th parameter overall.
    fn state(&self) -> Vec<(String, Tensor)> {
        self.buffers()
            .enumerate()
            .filter_map(|(k, b)| {
                b.as_ref()
                    .map(|b| (format!("momentum_buffer.{k}"), b.clone()))
            })
            .collect()
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        let slots = self
            .groups
            .iter_mut()
            .flat_map(|g| g.buffers.iter_mut().zip(&g.params));
        for (k, (buf, p)) in slots.enumerate() {
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
        &self.all_params
    }

    fn lr(&self) -> f32 {
        self.groups.first().map_or(0.0, |g| g.lr)
    }

    fn set_lr(&mut self, lr: f32) {
        for g in &mut self.groups {
            g.lr = lr;
        }
    }

    fn group_count(&self) -> usize {
        self.groups.len()
    }

    #[track_caller]
    fn group_lr(&self, group: usize) -> f32 {
        nth_group(&self.groups, group, "group_lr").lr
    }

    #[track_caller]
    fn set_group_lr(&mut self, group: usize, lr: f32) {
        nth_group_mut(&mut self.groups, group, "set_group_lr").lr = lr;
    }

    #[track_caller]
    fn group_momentum(&self, group: usize) -> Option<f32> {
        Some(nth_group(&self.groups, group, "group_momentum").momentum)
    }

    /// Sets the group's momentum factor; from 0 to non-zero starts its
    /// momentum buffers at the next step, as in PyTorch.
    #[track_caller]
    fn set_group_momentum(&mut self, group: usize, momentum: f32) {
        nth_group_mut(&mut self.groups, group, "set_group_momentum").momentum = momentum;
    }
}
