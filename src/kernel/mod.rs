//! Kernels as values: the target description that lowering decides
//! against, what a kernel binds, its strategy, and its body as data
//! (`ir`: SSA instructions that `codegen` prints).

mod binding;
pub(crate) mod changing;
mod donation;
pub(crate) mod generic;
pub(crate) mod ir;
mod lane_packing;
pub(crate) mod layouts;
mod legalise;
pub(crate) mod listing;
mod matmul_class;
mod program;
mod simplify;
pub(crate) mod sizes;
mod strategy;
#[cfg(test)]
mod strategy_test;
mod target;
mod visit;

pub(crate) use binding::{Binding, binding_parts};
pub(crate) use donation::{reads_output_elsewhere, reads_output_off_its_stores};
pub(crate) use lane_packing::{StoredView, lane_reads_a_in_place, lane_reads_b_in_place};
pub(crate) use legalise::legalise;
pub(crate) use matmul_class::{CPU_TIMED_MACS, GPU_TIMED_MACS, MatmulClass};
pub(crate) use program::{Declared, Entry, Helpers, Kernel, WorkgroupArray};
pub(crate) use simplify::simplify_indices;
pub(crate) use sizes::{GuardList, Guards, Sz};
pub(crate) use strategy::{
    GPU_ROW_MIN, LaneTile, Precedents, ReduceRule, ReduceShape, ReduceStrategy, SoftmaxStrategy,
    Strategy, WORKGROUP_SIZE, choose_reduce, choose_softmax, choose_vec4, choose_vec4_out,
    reduce_candidates, softmax_candidates,
};
pub(crate) use target::{
    CoopAdapter, LaneAdapter, MatmulKernel, ReduceSplit, ScanSplit, SortSplit, Target,
};
