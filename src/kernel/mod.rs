//! Kernels as values: the target description that lowering decides
//! against, and what a kernel binds. (The kernel IR itself, with bindings, grid and body as data,
//! is being moved here from `codegen/`; see ARCHITECTURE.md.)

mod binding;
mod target;

pub(crate) use binding::Binding;
pub(crate) use target::{LaneAdapter, MatmulKernel, Target};
