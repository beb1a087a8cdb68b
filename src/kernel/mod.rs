//! Kernels as values: the target description that lowering decides
//! against, what a kernel binds, and its strategy. (The kernel IR itself, with bindings, grid and body as data,
//! is being moved here from `codegen/`; see ARCHITECTURE.md.)

mod binding;
mod strategy;
mod target;

pub(crate) use binding::Binding;
pub(crate) use strategy::{
    ReduceShape, ReduceStrategy, SoftmaxStrategy, Strategy, WORKGROUP_SIZE, choose_reduce,
    choose_softmax,
};
pub(crate) use target::{LaneAdapter, MatmulKernel, Target};
