//! Adam and AdamW, with PyTorch's bias-corrected update and parameter
//! groups.

use super::{
    Optimizer, ParamGroup, l2_decayed, nth_group, nth_group_mut, restore_into, state_entry,
};
use crate::autograd::NoGradGuard;
use crate::error::Result;
use crate::tensor::Tensor;

/// One group's hyper-parameters and moment estimates.
struct Group {
    params: Vec<Tensor>,
    lr: f32,
    weight_decay: f32,
    /// The group's beta1 (its momentum, what `OneCycleLr` cycles).
    beta1: f32,
    /// Whether the group brought its own beta1 (`betas` leaves it alone).
    own_beta1: bool,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

/// Moment estimates shared by Adam and AdamW.
struct Moments {
    groups: Vec<Group>,
    /// Every group's parameters, in group order (for `Optimizer::params`).
    all_params: Vec<Tensor>,
    beta2: f32,
    eps: f32,
    step: i32,
}

impl Moments {
    fn new(groups: Vec<ParamGroup>, lr: f32, weight_decay: f32) -> Moments {
        let groups: Vec<Group> = groups
            .into_iter()
            .map(|g| Group {
                m: g.params
                    .iter()
                    .map(|p| Tensor::stored_zeros_like(p))
                    .collect(),
                v: g.params
                    .iter()
                    .map(|p| Tensor::stored_zeros_like(p))
                    .collect(),
                lr: g.lr.unwrap_or(lr),
                weight_decay: g.weight_decay.unwrap_or(weight_decay),
                beta1: g.momentum.unwrap_or(0.9),
                own_beta1: g.momentum.is_some(),
                params: g.params,
            })
            .collect();
        let all_params = groups.iter().flat_map(|g| g.params.clone()).collect();
        Moments {
            groups,
            all_params,
            beta2: 0.999,
            eps: 1e-8,
            step: 0,
        }
    }

    /// Sets every group's weight decay (the builder's default).
    fn set_weight_decay(&mut self, weight_decay: f32) {
        for g in &mut self.groups {
            g.weight_decay = weight_decay;
        }
    }

    /// Sets the beta1 of the groups without their own, and beta2.
    fn set_betas(&mut self, beta1: f32, beta2: f32) {
        for g in self.groups.iter_mut().filter(|g| !g.own_beta1) {
            g.beta1 = beta1;
        }
        self.beta2 = beta2;
    }

    /// One update; `decoupled` is AdamW's weight decay (applied to the
    /// parameter) rather than Adam's (added to the gradient).
    fn update(&mut self, decoupled: bool) {
        let _guard = NoGradGuard::new();
        self.step += 1;
        let b2 = self.beta2;
        let bc2 = 1.0 - b2.powi(self.step);
        for group in &self.groups {
            let (lr, wd, b1) = (group.lr, group.weight_decay, group.beta1);
            // With the group's current beta1, as PyTorch: a cycled beta1
            // changes only scalar runtime parameters, so no recompilation.
            let bc1 = 1.0 - b1.powi(self.step);
            for ((p, m), v) in group.params.iter().zip(&group.m).zip(&group.v) {
                let Some(g) = p.grad() else { continue };
                if wd != 0.0 && decoupled {
                    p.mul_(1.0 - lr * wd);
                }
                let g = if decoupled { g } else { l2_decayed(g, p, wd) };
                m.mul_(b1).add_(&g * (1.0 - b1));
                v.mul_(b2).add_(&g * &g * (1.0 - b2));
                let denom = v.sqrt() * (1.0 / bc2.sqrt()) + self.eps;
                p.sub_(m / denom * (lr / bc1));
            }
        }
    }

    /// `step`, then `m.{k}` and `v.{k}` for the k-th parameter overall.
    fn state(&self) -> Vec<(String, Tensor)> {
        let dev = self.all_params.first().map(|p| p.device().clone());
        let mut out = Vec::new();
        if let Some(dev) = dev {
            out.push(("step".to_string(), Tensor::scalar(self.step, &dev)));
        }
        let moments = self.groups.iter().flat_map(|g| g.m.iter().zip(&g.v));
        for (k, (m, v)) in moments.enumerate() {
            out.push((format!("m.{k}"), m.clone()));
            out.push((format!("v.{k}"), v.clone()));
        }
        out
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        let step: Vec<i32> = state_entry(state, "step")?.to_vec()?;
        let moments = self.groups.iter().flat_map(|g| g.m.iter().zip(&g.v));
        for (k, (m, v)) in moments.enumerate() {
            restore_into(state, &format!("m.{k}"), m)?;
            restore_into(state, &format!("v.{k}"), v)?;
        }
        self.step = step.first().copied().unwrap_or(0);
        Ok(())
    }
}

/// The builders and the `Optimizer` impl shared by Adam and AdamW.
macro_rules! moment_optimizer {
    ($name:ident, $decoupled:expr, $decay_doc:literal) => {
        impl $name {
            /// Sets `(beta1, beta2)` (builder style).
            /// `beta1` is the default of the groups without their own
            /// momentum ([`ParamGroup::momentum`]).
            pub fn betas(mut self, beta1: f32, beta2: f32) -> $name {
                self.0.set_betas(beta1, beta2);
                self
            }

            /// Sets eps (builder style).
            pub fn eps(mut self, eps: f32) -> $name {
                self.0.eps = eps;
                self
            }

            #[doc = $decay_doc]
            /// Applies to every group (set it before per-group values
            /// matter, or give groups their own with [`ParamGroup`]).
            pub fn weight_decay(mut self, weight_decay: f32) -> $name {
                self.0.set_weight_decay(weight_decay);
                self
            }
        }

        impl Optimizer for $name {
            fn step(&mut self) {
                self.0.update($decoupled);
            }
            fn params(&self) -> &[Tensor] {
                &self.0.all_params
            }
            fn lr(&self) -> f32 {
                self.0.groups.first().map_or(0.0, |g| g.lr)
            }
            fn set_lr(&mut self, lr: f32) {
                for g in &mut self.0.groups {
                    g.lr = lr;
                }
            }
            fn group_count(&self) -> usize {
                self.0.groups.len()
            }
            #[track_caller]
            fn group_lr(&self, group: usize) -> f32 {
                nth_group(&self.0.groups, group, "group_lr").lr
            }
            #[track_caller]
            fn set_group_lr(&mut self, group: usize, lr: f32) {
                nth_group_mut(&mut self.0.groups, group, "set_group_lr").lr = lr;
            }
            /// The group's beta1.
            #[track_caller]
            fn group_momentum(&self, group: usize) -> Option<f32> {
                Some(nth_group(&self.0.groups, group, "group_momentum").beta1)
            }
            /// Sets the group's beta1 (PyTorch's `OneCycleLR` cycles
            /// `betas[0]`); the bias correction uses the current beta1,
            /// as in PyTorch.
            #[track_caller]
            fn set_group_momentum(&mut self, group: usize, momentum: f32) {
                nth_group_mut(&mut self.0.groups, group, "set_group_momentum").beta1 = momentum;
            }
            fn state(&self) -> Vec<(String, Tensor)> {
                self.0.state()
            }
            fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
                self.0.load_state(state)
            }
        }
    };
}

/// Adam (Kingma & Ba) with L2 weight decay added to the gradient.
pub struct Adam(Moments);

impl Adam {
    /// Adam with betas (0.9, 0.999), eps 1e-8, no weight decay.
    pub fn new(params: Vec<Tensor>, lr: f32) -> Adam {
        Adam::with_groups(vec![ParamGroup::new(params)], lr)
    }

    /// Adam over parameter groups; groups without their own learning
    /// rate, weight decay or momentum (beta1) take `lr`, 0 and 0.9.
    pub fn with_groups(groups: Vec<ParamGroup>, lr: f32) -> Adam {
        Adam(Moments::new(groups, lr, 0.0))
    }
}

moment_optimizer!(Adam, false, "Sets the L2 weight decay (builder style).");

/// AdamW (Loshchilov & Hutter): weight decay applied to the parameter,
/// decoupled from the gradient (default 0.01, as in PyTorch).
pub struct AdamW(Moments);

impl AdamW {
    /// AdamW with betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
    pub fn new(params: Vec<Tensor>, lr: f32) -> AdamW {
        AdamW::with_groups(vec![ParamGroup::new(params)], lr)
    }

    /// AdamW over parameter groups; groups without their own learning
    /// rate, weight decay or momentum (beta1) take `lr`, 0.01 and 0.9.
    pub fn with_groups(groups: Vec<ParamGroup>, lr: f32) -> AdamW {
        AdamW(Moments::new(groups, lr, 0.01))
    }
}

moment_optimizer!(
    AdamW,
    true,
    "Sets the decoupled weight decay (builder style)."
);
