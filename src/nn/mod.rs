//! Neural-network building blocks: the [`Module`] trait, layers with
//! PyTorch's default initialisations, [`Sequential`], functional losses and
//! activations ([`functional`]), and saving/loading parameters in the
//! safetensors format, alone ([`save_safetensors`]) or with an
//! optimiser's state and metadata ([`save_checkpoint`]).
//!
//! A layer is a [`Module`] (a function of one tensor); a model whose
//! `forward` takes more (nanoGPT's [`Gpt`] takes ids and targets) lists its
//! parameters through [`Parameters`], and its dotted names
//! (`blocks.0.attn.qkv.weight`) follow its structure.
//!
//! ```
//! use lazywgpu::nn::{self, Module, Parameters, functional as F};
//! use lazywgpu::{DType, Device, Tensor};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dev = Device::cpu();
//! dev.manual_seed(0); // the initial weights
//! let model = nn::Sequential::new()
//!     .add(nn::Linear::new(4, 8, &dev))
//!     .add(nn::ReLU)
//!     .add(nn::Linear::new(8, 3, &dev));
//! let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
//! assert_eq!(model.num_params(), 4 * 8 + 8 + 8 * 3 + 3);
//!
//! let x = Tensor::randn([5, 4], &dev);
//! let labels = Tensor::from_vec(vec![0i32, 2, 1, 1, 0], [5], &dev)?;
//! let loss = F::cross_entropy(&model.forward(&x), &labels);
//! loss.backward(); // gradients are lazy too
//! let first = &model.parameters()[0];
//! assert_eq!(first.grad().expect("a gradient").shape(), &[8, 4]);
//!
//! // Parameters under their names, in the safetensors format.
//! let path = std::env::temp_dir().join("lazywgpu-doc-nn.safetensors");
//! nn::save_safetensors(&model, &path)?;
//! let again = nn::Sequential::new()
//!     .add(nn::Linear::new(4, 8, &dev))
//!     .add(nn::ReLU)
//!     .add(nn::Linear::new(8, 3, &dev));
//! nn::load_safetensors(&again, &path)?;
//! let (a, b) = (model.forward(&x), again.forward(&x));
//! assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
//! # std::fs::remove_file(&path)?;
//! # let _ = DType::F32;
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
