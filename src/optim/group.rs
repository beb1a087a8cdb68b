//! Parameter groups: parameters that share a learning rate, a weight
//! decay and a momentum (PyTorch's `param_groups`), e.g. decay on
//! matrices only.

use crate::tensor::Tensor;

/// Parameters with their own hyper-parameters; unset ones take the
/// optimiser's defaults.
#[derive(Clone)]
pub struct ParamGroup {
    /// The parameters (each in one group only).
    pub params: Vec<Tensor>,
    /// This group's learning rate, if not the optimiser's.
    pub lr: Option<f32>,
    /// This group's weight decay, if not the optimiser's.
    pub weight_decay: Option<f32>,
    /// This group's momentum, if not the optimiser's: SGD's momentum
    /// factor, Adam's and AdamW's beta1 (what [`Optimizer::set_momentum`]
    /// sets).
    ///
    /// [`Optimizer::set_momentum`]: super::Optimizer::set_momentum
    pub momentum: Option<f32>,
}

impl ParamGroup {
    /// A group with the optimiser's defaults.
    pub fn new(params: Vec<Tensor>) -> ParamGroup {
        ParamGroup {
            params,
            lr: None,
            weight_decay: None,
            momentum: None,
        }
    }

    /// Sets this group's learning rate (builder style).
    pub fn lr(mut self, lr: f32) -> ParamGroup {
        self.lr = Some(lr);
        self
    }

    /// Sets this group's weight decay (builder style).
    pub fn weight_decay(mut self, weight_decay: f32) -> ParamGroup {
        self.weight_decay = Some(weight_decay);
        self
    }

    /// Sets this group's momentum: SGD's momentum factor, Adam's and
    /// AdamW's beta1 (builder style).
    pub fn momentum(mut self, momentum: f32) -> ParamGroup {
        self.momentum = Some(momentum);
        self
    }

    /// Splits `params` into the usual two groups for transformers:
    /// weight decay `decay` for tensors of rank >= 2 (matrices,
    /// embeddings), none for the rest (norm weights, biases).
    pub fn decay_matrices_only(params: Vec<Tensor>, decay: f32) -> Vec<ParamGroup> {
        let (matrices, rest): (Vec<Tensor>, Vec<Tensor>) =
            params.into_iter().partition(|p| p.rank() >= 2);
        vec![
            ParamGroup::new(matrices).weight_decay(decay),
            ParamGroup::new(rest).weight_decay(0.0),
        ]
    }
}
