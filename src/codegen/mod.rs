//! From a kernel group of a graph to WGSL source, validated by naga.

mod matmul_lanes;
mod roots;
mod validate;
mod wgsl;

pub(crate) use matmul_lanes::LaneAdapter;
pub(crate) use roots::{MatmulKernel, generate_root_kernel};
pub(crate) use validate::validate_wgsl;
pub(crate) use wgsl::{KernelSource, binding_part_bytes, generate_kernel, set_binding_part_bytes};
