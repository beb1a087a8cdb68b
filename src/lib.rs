//! # lazywgpu
//!
//! Lazy tensors that run on any GPU through wgpu's portable compute shaders
//! (Vulkan, Metal, DX12, and Mesa's lavapipe where there is no GPU), with a
//! CPU reference backend on ndarray.
//!
//! Ops are recorded, not run. At [`mark_step`] or when a value is read, the
//! recorded trace becomes a graph: elementwise chains, broadcasts and views
//! are fused into single WGSL kernels, compiled pipelines are cached by a
//! structural hash of the graph (scalars are runtime parameters, so a new
//! learning rate never recompiles), and the work is submitted without
//! waiting; only reading a value waits.
//!
//! ```no_run
//! use lazywgpu::{Device, Tensor};
//! # fn main() -> lazywgpu::Result<()> {
//! let dev = Device::default();
//! let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2], &dev)?;
//! let y = ((&x * 2.0 + 1.0).tanh() - &x).sigmoid() * &x + 0.5; // one kernel
//! println!("{y}");
//! println!("{}", dev.metrics());
//! # Ok(()) }
//! ```
//!
//! ## Errors
//! Misuse while tracing (shapes that do not broadcast, a bad axis, a dtype
//! an op does not take) panics at the caller's line, naming the op, shapes
//! and dtypes. Everything that depends on data from outside or on the
//! device returns [`Result`].
//!
//! ## Environment
//! The per-device switches are fields of [`DeviceConfig`], read from the
//! environment by [`Device::gpu`] and [`Device::cpu`]; pass one to
//! [`Device::gpu_with`] or [`Device::cpu_with`] to set them in code.
//! `LAZYWGPU_DEVICE=auto|gpu|cpu` picks [`Device::default`];
//! `LAZYWGPU_NO_FUSION=1` runs one kernel per op; `LAZYWGPU_EAGER=1` runs
//! every op as it is recorded; `LAZYWGPU_VERIFY=1` reruns every GPU graph
//! on the CPU reference and compares; `LAZYWGPU_DUMP=DIR` writes each new
//! graph's IR, DOT and WGSL; `WGPU_BACKEND` and `WGPU_ADAPTER_NAME` choose
//! the adapter; `RUST_LOG=lazywgpu=debug` logs compiles and cache misses;
//! `LAZYWGPU_PROFILE=1` times every kernel ([`Device::kernel_profile`]).
//!
//! ## Training
//! [`Tensor::backward`] differentiates through the lazy graph (gradients
//! are lazy nodes too), [`nn`] has layers, losses and safetensors
//! checkpoints, [`optim`] has SGD, Adam, AdamW, Adadelta and StepLR, and
//! [`data`] reads MNIST's IDX files. See `examples/mnist.rs`.

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
mod graph;
mod kernel;
pub mod metrics;
pub mod nn;
pub mod optim;
mod runtime;
mod schedule;
pub mod shape;
mod tensor;

pub use autograd::{NoGradGuard, is_grad_enabled, no_grad};
pub use config::{DeviceConfig, MatmulChoice};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use graph::op::{BinaryOp, ReduceOp, UnaryOp};
pub use graph::semantics::NanResult;
/// The `half` crate, whose `f16` and `bf16` are the host types of
/// [`DType::F16`] and [`DType::BF16`] tensors.
pub use half;
pub use metrics::{MetricsSnapshot, TimerStats};
pub use runtime::device::{Device, mark_step};
pub use runtime::guards::LiveTensorGroup;
pub use tensor::{IntoDims, IntoOperand, IntoShape, Operand, Tensor};
