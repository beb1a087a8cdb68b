//! From a kernel group of a graph to WGSL source, validated by naga.

mod attention;
mod emit;
mod exprs;
mod keys;
mod lane_operands;
mod lane_packs;
mod lane_tile;
mod matmul;
mod matmul_coop;
mod matmul_lanes;
mod norm;
mod planned;
mod radix;
mod rebind;
mod reduce;
mod reduce_ir;
mod render;
mod roots;
mod scan;
mod softmax;
mod sort;
mod source;
mod topk;
mod validate;
mod vectorize;
mod wgsl;

#[cfg(test)]
mod bindings_test;
#[cfg(test)]
mod golden_test;
#[cfg(test)]
mod guards_test;
#[cfg(test)]
mod norm_test;
#[cfg(test)]
mod planned_test;
#[cfg(test)]
mod primitives_test;
#[cfg(test)]
mod provenance_test;

pub(crate) use matmul::matmul_class;
pub(crate) use planned::generate;
pub(crate) use rebind::{launch_difference, source_at};
pub(crate) use render::kernel_wgsl;
pub(crate) use roots::generate_root_kernel;
pub(crate) use validate::validate_wgsl;
pub(crate) use wgsl::{CodegenContext, KernelSource, SizeLiterals, TextureCopy, lower_kernel};
