//! From a kernel group of a graph to WGSL source, validated by naga.

mod validate;
mod wgsl;

pub(crate) use validate::validate_wgsl;
pub(crate) use wgsl::{KernelSource, WORKGROUP_SIZE, generate_kernel};
