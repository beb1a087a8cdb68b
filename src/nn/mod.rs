//! Neural-network building blocks: the [`Module`] trait, layers with
//! PyTorch's default initialisations, [`Sequential`], functional losses and
//! activations ([`functional`]), and saving/loading parameters in the
//! safetensors format.
//!
//! ```no_run
//! use lazywgpu::nn::{self, Module};
//! use lazywgpu::{Device, Tensor};
//! # fn main() -> lazywgpu::Result<()> {
//! let dev = Device::default();
//! let model = nn::Sequential::new()
//!     .add(nn::Linear::new(784, 128, &dev))
//!     .add(nn::ReLU)
//!     .add(nn::Linear::new(128, 10, &dev));
//! let x = Tensor::rand([64, 784], &dev);
//! let logits = model.forward(&x);
//! println!("{} parameters", model.parameters().len());
//! # Ok(()) }
//! ```

mod checkpoint;
pub mod functional;
pub mod gpt;
mod init;
mod layers;
mod params;
mod serialize;
mod transformer;

pub use checkpoint::{load_checkpoint, save_checkpoint};
pub use gpt::{Gpt, GptConfig};
pub use init::{kaiming_uniform, normal_param};
pub use layers::{Conv2d, Dropout, Flatten, Linear, MaxPool2d, ReLU};
pub use params::{ParamVisitor, Parameters};
pub use serialize::{load_safetensors, save_safetensors};
pub use transformer::{CausalSelfAttention, Embedding, GELU, LayerNorm, SiLU};

use crate::tensor::Tensor;

/// A layer or model: a function of a tensor with parameters.
pub trait Module: Send + Sync {
    /// Records the forward pass on `x`.
    fn forward(&self, x: &Tensor) -> Tensor;

    /// The parameters with their names (`"0.weight"`, `"0.bias"`, ... in a
    /// [`Sequential`], as PyTorch's `state_dict` names them).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// The parameters, in [`Module::named_parameters`] order.
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// Switches training behaviour (dropout) on or off; PyTorch's
    /// `train()` / `eval()`.
    fn set_training(&self, _training: bool) {}
}

/// The parameters of the sub-modules `layers` under `name.<theirs>`, in
/// order (the naming of `named_parameters` for a module made of others).
pub(crate) fn prefixed<'a>(
    layers: impl IntoIterator<Item = (String, &'a dyn Module)>,
) -> Vec<(String, Tensor)> {
    layers
        .into_iter()
        .flat_map(|(prefix, layer)| {
            layer
                .named_parameters()
                .into_iter()
                .map(move |(n, t)| (format!("{prefix}.{n}"), t))
        })
        .collect()
}

/// Modules applied one after another.
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Module>>,
}

impl Sequential {
    /// An empty sequence (the identity).
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// Appends `layer` (builder style).
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, layer: impl Module + 'static) -> Sequential {
        self.layers.push(Box::new(layer));
        self
    }

    /// Number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether there are no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Module for Sequential {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let mut y = x.clone();
        for layer in &self.layers {
            y = layer.forward(&y);
        }
        y
    }

    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        prefixed(
            self.layers
                .iter()
                .enumerate()
                .map(|(i, l)| (i.to_string(), l.as_ref())),
        )
    }

    fn set_training(&self, training: bool) {
        for l in &self.layers {
            l.set_training(training);
        }
    }
}
