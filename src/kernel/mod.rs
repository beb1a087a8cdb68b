//! Kernels as values: the target description that lowering decides
//! against. (The kernel IR itself, with bindings, grid and body as data,
//! is being moved here from `codegen/`; see ARCHITECTURE.md.)

mod target;

pub(crate) use target::{LaneAdapter, MatmulKernel, Target};
