//! # lazywgpu
//!
//! Lazy tensors that run on any GPU through wgpu's portable compute shaders
//! (Vulkan, Metal, DX12, and Mesa's lavapipe where there is no GPU), with a
//! CPU reference backend on ndarray, autograd, layers, optimisers and
//! mixed precision: enough to train a small GPT.
//!
//! Ops are recorded, not run. At [`mark_step`] or when a value is read, the
//! recorded trace becomes a graph: elementwise chains, broadcasts and views
//! are fused into single WGSL kernels (also around the reductions, softmax
//! and matmuls they feed or read), compiled pipelines are cached by the
//! graph's structure (scalars are runtime parameters, so a new learning
//! rate never recompiles), and the work is submitted without waiting; only
//! reading a value waits.
//!
//! ```
//! use lazywgpu::{Device, Tensor};
//! # fn main() -> lazywgpu::Result<()> {
//! // `Device::default()` takes the GPU where there is an adapter; the
//! // examples in these docs run on the CPU reference backend.
//! let dev = Device::cpu();
//! let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev)?;
//! let y = ((&x * 2.0 + 1.0).tanh() - &x).sigmoid() * &x + 0.5; // recorded
//! let values = y.to_vec::<f32>()?; // one graph: one fused kernel on a GPU
//! assert_eq!(values.len(), 4);
//! assert_eq!(dev.metrics().counter("graphs_executed"), 1);
//! # Ok(()) }
//! ```
//!
//! ## Where things are
//! - [`Device`]: [`Device::gpu`], [`Device::cpu`], [`Device::default`]
//!   (the GPU, else the CPU with one line on standard error saying why),
//!   [`Device::mark_step`], [`Device::wait`], [`Device::metrics`],
//!   [`Device::manual_seed`]; [`DeviceConfig`] for per-device settings.
//! - [`Tensor`]: constructors, elementwise ops with PyTorch's broadcasting
//!   and type promotion, reductions, `matmul`, indexing, `conv2d` and
//!   pools, views that alias their base, in-place ops, readback, and
//!   autograd ([`Tensor::backward`], [`no_grad`]). dtypes are [`DType`]s:
//!   `f32`, `f16`, `bf16` (host values from the re-exported [`half`]),
//!   `i32`, `u32`, `i64` (stored in 32 bits: values must fit `i32`),
//!   `u8`, `bool`.
//! - [`nn`]: layers with PyTorch's initialisations (up to nanoGPT's
//!   [`nn::Gpt`]), the [`nn::Module`] and [`nn::Parameters`] traits, losses
//!   and activations in [`nn::functional`], safetensors files and
//!   checkpoints with optimiser state.
//! - [`optim`]: SGD, Adam, AdamW with parameter groups, Adadelta; gradient
//!   clipping ([`optim::clip_grad_norm_`]); learning-rate schedules
//!   ([`optim::StepLr`], [`optim::ReduceLrOnPlateau`],
//!   [`optim::Scheduler`] with warm-up, cosine, multi-step, one-cycle
//!   with momentum cycling, and custom schedules); an exponential moving
//!   average of the weights ([`optim::Ema`]).
//! - [`amp`]: [`amp::autocast`] and [`amp::GradScaler`], mixed precision
//!   as PyTorch's `torch.autocast` and `GradScaler`.
//! - [`data`]: the [`data::Dataset`] trait (MNIST, CIFAR-10, your own),
//!   [`data::DataLoader`] (batches uploaded on a background thread),
//!   device-side augmentation from seeded draws ([`data::augment`]),
//!   character-level text datasets, seeded shuffling.
//! - [`distributed`]: data parallelism over the GPUs of one process or,
//!   with the cargo feature `mpi`, over MPI processes and hosts.
//! - [`metrics`]: the counters and timers behind [`Device::metrics`].
//! - [`from_pytorch`]: PyTorch's names and idioms beside lazywgpu's, and
//!   what differs.
//!
//! The repository's `ARCHITECTURE.md` follows a value from a line of user
//! code to a number read back; `PERFORMANCE.md` has the measurements.
//!
//! ## Errors
//! Misuse while tracing (shapes that do not broadcast, a bad axis, a dtype
//! an op does not take) panics at the caller's line, naming the op, shapes
//! and dtypes. Everything that depends on data from outside or on the
//! device returns [`Result`]; see [`Error`].
//!
//! ## When something goes wrong
//! Recompiles, graphs that keep growing without `mark_step()` and tensors
//! that leak across steps are warned about (through the `log` crate, and
//! kept in [`MetricsSnapshot::warnings`]), naming the source lines
//! involved. [`Device::set_recompile_budget`] turns recompiles past a
//! budget into [`Error::RecompileBudget`]; anomaly mode
//! ([`Device::set_checks`]) makes the first op that creates NaN or
//! infinity from finite values, or reads an index out of range, an
//! [`Error::NonFinite`] or [`Error::IndexOutOfRange`] naming it.
//!
//! ## Environment
//! The per-device switches are fields of [`DeviceConfig`], read from the
//! environment by [`Device::gpu`] and [`Device::cpu`]; pass one to
//! [`Device::gpu_with`] or [`Device::cpu_with`] to set them in code.
//!
//! | variable | effect |
//! | --- | --- |
//! | `LAZYWGPU_DEVICE=auto\|gpu\|cpu` | what [`Device::default`] gives (`gpu`: a panic without an adapter) |
//! | `LAZYWGPU_NO_FUSION=1` | one kernel per op |
//! | `LAZYWGPU_EAGER=1` | run every op as it is recorded |
//! | `LAZYWGPU_VERIFY=1` | rerun every GPU graph on the CPU reference and compare |
//! | `LAZYWGPU_CHECK=1` | anomaly mode ([`Device::set_checks`]) |
//! | `LAZYWGPU_RECOMPILE_BUDGET=N` | recompiles of a trace site past `N` are errors |
//! | `LAZYWGPU_DUMP=DIR` | write each new graph's IR, DOT and WGSL |
//! | `LAZYWGPU_CHECK_BINDS=1` | lower the graphs a new size binds unlowered too, and compare ([`DeviceConfig::check_binds`]) |
//! | `LAZYWGPU_PROFILE=1` | time every kernel ([`Device::kernel_profile`]) |
//! | `LAZYWGPU_MATMUL=tiled\|blocked\|lanes\|coop` | the matmul kernel ([`MatmulChoice`]) |
//! | `LAZYWGPU_REDUCE=per-invocation\|by-fours\|tree` | the reduction kernel wherever it is valid ([`ReduceChoice`]) |
//! | `LAZYWGPU_FUSED_ATTENTION=1` | attention without a mask tensor as one kernel |
//! | `LAZYWGPU_SUBMIT_THREAD=0\|1` | submit from a thread of its own (default on CPU adapters) |
//! | `LAZYWGPU_CACHE_DIR=DIR\|off` | where compiled pipelines are kept across processes |
//! | `LAZYWGPU_COLLECTIVE_TIMEOUT=S` | seconds a collective may wait for the other ranks |
//! | `WGPU_BACKEND`, `WGPU_ADAPTER_NAME`, `WGPU_POWER_PREF` | which adapter wgpu picks |
//! | `RUST_LOG=lazywgpu=debug` | compiles, cache misses, scheduling decisions (with a logger such as `env_logger`) |

#![warn(missing_docs)]

pub mod amp;
mod autograd;
mod codegen;
mod config;
mod cpu;
pub mod data;
mod debug;
pub mod distributed;
pub mod dtype;
mod error;
#[doc = include_str!("../docs/from-pytorch.md")]
pub mod from_pytorch {}
mod graph;
mod kernel;
pub mod metrics;
pub mod nn;
pub mod optim;
mod runtime;
mod schedule;
pub mod shape;
mod tensor;
#[cfg(test)]
mod test_values;
mod tune;

pub use autograd::{NoGradGuard, is_grad_enabled, no_grad};
pub use config::{Autotune, DeviceConfig, MatmulChoice, ReduceChoice};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use graph::op::{BinaryOp, ReduceOp, UnaryOp};
pub use graph::semantics::NanResult;
/// The `half` crate, whose `f16` and `bf16` are the host types of
/// [`DType::F16`] and [`DType::BF16`] tensors.
pub use half;
pub use metrics::{MetricsSnapshot, TimerStats};
pub use runtime::adapter::AdapterReport;
pub use runtime::device::{Device, mark_step};
pub use runtime::guards::LiveTensorGroup;
pub use runtime::memory_report::{BufferRole, MemoryReport, ReportedBuffer};
pub use tensor::{InterpolateMode, IntoDims, IntoOperand, IntoShape, Operand, Tensor};
pub use tune::{CandidateTiming, Tuning};
