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

pub mod functional;
pub mod gpt;
pub mod hub;
pub mod init;
mod kv_cache;
mod layers;
mod llama;
mod llama_model;
mod loss;
mod norm;
mod params;
mod run_checkpoint;
mod sampling;
mod serialize;
mod transformer;

pub use crate::autograd::checkpoint;
pub use gpt::{Gpt, GptConfig};
pub use init::{kaiming_uniform, normal_param};
pub use kv_cache::KvCache;
pub use layers::{
    AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv2d, ConvTranspose2d, Dropout, Flatten, Linear,
    MaxPool2d, ReLU, Upsample,
};
pub use llama::{RMSNorm, RopeLayout, RotaryEmbedding, SwiGlu};
pub use llama_model::{Llama, LlamaAttention, LlamaBlock, LlamaConfig, LlamaModel};
pub use norm::{BatchNorm, BatchNorm1d, BatchNorm2d, BatchNormOptions, GroupNorm};
pub use params::{ParamVisitor, Parameters};
pub use run_checkpoint::{load_checkpoint, save_checkpoint};
pub use sampling::{Sampling, sample_logits};
pub use serialize::{load_safetensors, save_safetensors};
pub use transformer::{CausalSelfAttention, Embedding, GELU, LayerNorm, SiLU};

use crate::tensor::Tensor;

/// A layer or model: a function of a tensor with parameters and buffers.
///
/// Implement [`forward`](Module::forward) and, for a module that holds
/// tensors, training flags or other modules, [`visit`](Module::visit);
/// everything else (names, state dict, `train()`/`eval()`) is derived
/// from that one walk (see [`ParamVisitor`]).
///
/// ```
/// use lazywgpu::nn::{self, Module, ParamVisitor};
/// use lazywgpu::{Device, Tensor};
///
/// /// conv -> batch norm -> relu, named as PyTorch names it.
/// struct ConvBn {
///     conv1: nn::Conv2d,
///     bn1: nn::BatchNorm2d,
/// }
///
/// impl Module for ConvBn {
///     fn forward(&self, x: &Tensor) -> Tensor {
///         self.bn1.forward(&self.conv1.forward(x)).relu()
///     }
///     fn visit(&self, v: &mut ParamVisitor) {
///         v.module("conv1", &self.conv1);
///         v.module("bn1", &self.bn1);
///     }
/// }
///
/// let dev = Device::cpu();
/// let m = ConvBn {
///     conv1: nn::Conv2d::no_bias(3, 4, 3, &dev),
///     bn1: nn::BatchNorm2d::new(4, &dev),
/// };
/// let names: Vec<String> = m.state_dict().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(
///     names,
///     ["conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
///      "bn1.running_var", "bn1.num_batches_tracked"]
/// );
/// m.eval(); // reaches bn1 without forwarding by hand
/// assert!(!m.bn1.is_training());
/// ```
pub trait Module: Send + Sync {
    /// Records the forward pass on `x`.
    fn forward(&self, x: &Tensor) -> Tensor;

    /// Shows the module's parameters ([`ParamVisitor::param`]), buffers
    /// ([`ParamVisitor::buffer`]), training flag
    /// ([`ParamVisitor::training_flag`]) and sub-modules
    /// ([`ParamVisitor::module`]) to `v`, in a fixed order. The default
    /// shows nothing (a function without state, like [`ReLU`]).
    fn visit(&self, _v: &mut ParamVisitor) {}

    /// The parameters with their names (`"0.weight"`, `"0.bias"`, ... in a
    /// [`Sequential`], as PyTorch's `named_parameters` names them).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.named_params()
    }

    /// The parameters, in [`Module::named_parameters`] order.
    fn parameters(&self) -> Vec<Tensor> {
        self.params()
    }

    /// The buffers (saved and loaded, never trained: BatchNorm's running
    /// statistics) with their names (`"1.running_mean"`).
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        params::buffers_of(self)
    }

    /// The buffers, in [`Module::named_buffers`] order.
    fn buffers(&self) -> Vec<Tensor> {
        self.named_buffers().into_iter().map(|(_, t)| t).collect()
    }

    /// Parameters and buffers under their names, in PyTorch's
    /// `state_dict` order (each module's parameters, then its buffers,
    /// then its children's). [`save_safetensors`] writes these.
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        params::state_of(self)
            .into_iter()
            .map(|(n, t, _)| (n, t))
            .collect()
    }

    /// Switches training behaviour (dropout, batch statistics) on or off
    /// in this module and every module below it.
    fn set_training(&self, training: bool) {
        params::set_training_of(self, training);
    }

    /// Training mode everywhere below (PyTorch's `train()`).
    fn train(&self) {
        self.set_training(true);
    }

    /// Evaluation mode everywhere below (PyTorch's `eval()`).
    fn eval(&self) {
        self.set_training(false);
    }
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

    fn visit(&self, v: &mut ParamVisitor) {
        for (i, layer) in self.layers.iter().enumerate() {
            v.module(&i.to_string(), layer.as_ref());
        }
    }
}
