//! How each kernel computes its values, as data: decided by pure
//! functions of the shapes involved (testable without a device, printed
//! in dumps), then carried out by the templates in `codegen/`.

use crate::dtype::DType;
use crate::graph::op::ReduceOp;

use super::target::MatmulKernel;

/// Invocations per workgroup of the generated kernels.
pub(crate) const WORKGROUP_SIZE: usize = 256;

/// The strategy of one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Elementwise work: one invocation per element, or per four elements
    /// loaded and stored as `vec4`s.
    Elementwise { vec4: bool },
    /// A reduction.
    Reduce(ReduceStrategy),
    /// A softmax or log-softmax.
    Softmax(SoftmaxStrategy),
    /// A matmul, with the kernel actually generated (the lane kernel falls
    /// back to `Blocked` where its textures would not fit).
    Matmul(MatmulKernel),
    /// A packing kernel writing a matmul operand into a texture.
    Pack,
    /// A row normalisation (layer norm) or its gradient: a row per
    /// invocation, the row read three or four times.
    RowNorm,
    /// Fused attention: a query row per invocation, online softmax.
    Attention,
}

/// How a reduction is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceStrategy {
    /// One invocation per output (or per part), looping over its elements:
    /// for short reductions.
    PerInvocation,
    /// The first stage of a split sum, one invocation per part reading a
    /// `vec4` per group of four elements (8 ms against 18 ms one element
    /// at a time for 16M f32 on lavapipe).
    SumByFours,
    /// A workgroup per output: invocations stride over the elements, then
    /// a tree in workgroup memory.
    WorkgroupTree,
}

/// The facts a reduction's strategy depends on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReduceShape {
    pub op: ReduceOp,
    /// The input's dtype.
    pub dtype: DType,
    /// Elements reduced into each output (all parts together).
    pub reduced: usize,
    /// Parts of a split reduction's first stage (1: not split).
    pub parts: usize,
    /// Whether the reduced dims are the input's trailing ones (so groups
    /// of four reduced elements are neighbours in memory).
    pub trailing: bool,
    /// Whether the input can be read four elements at a time.
    pub vectorizable: bool,
}

/// The strategy for a reduction of `shape`.
pub(crate) fn choose_reduce(shape: ReduceShape) -> ReduceStrategy {
    let chunk = shape.reduced.div_ceil(shape.parts).max(1);
    if chunk >= WORKGROUP_SIZE {
        return ReduceStrategy::WorkgroupTree;
    }
    let by_fours = shape.op == ReduceOp::Sum
        && shape.dtype != DType::Bool
        && shape.parts >= 2
        && shape.reduced.is_multiple_of(4)
        && shape.trailing
        && shape.vectorizable;
    if by_fours {
        ReduceStrategy::SumByFours
    } else {
        ReduceStrategy::PerInvocation
    }
}

/// How a softmax is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SoftmaxStrategy {
    /// One invocation per row, reading and writing `vec4`s in three
    /// passes (two exponentials an element).
    RowPerInvocationVec4,
    /// One invocation per row, one element at a time.
    RowPerInvocation,
    /// A workgroup per row (few long rows).
    RowPerWorkgroup,
}

/// The strategy for a softmax over rows of `len` elements, `rows` of
/// them, `inner` the stride between a row's elements; `vectorizable`:
/// the input can be read four elements at a time.
pub(crate) fn choose_softmax(
    len: usize,
    rows: usize,
    inner: usize,
    vectorizable: bool,
) -> SoftmaxStrategy {
    // Many rows, or rows too short to keep a workgroup busy (a
    // classifier's 10 logits): one invocation per row.
    if rows >= 1024 || len <= 256 {
        if inner == 1 && len.is_multiple_of(4) && vectorizable {
            SoftmaxStrategy::RowPerInvocationVec4
        } else {
            SoftmaxStrategy::RowPerInvocation
        }
    } else {
        SoftmaxStrategy::RowPerWorkgroup
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(reduced: usize, parts: usize) -> ReduceShape {
        ReduceShape {
            op: ReduceOp::Sum,
            dtype: DType::F32,
            reduced,
            parts,
            trailing: true,
            vectorizable: true,
        }
    }

    #[test]
    fn reductions_by_size_and_layout() {
        // W2's first stage: 16M elements in 131,072 parts of 128.
        assert_eq!(
            choose_reduce(sum(1 << 24, 1 << 17)),
            ReduceStrategy::SumByFours
        );
        // Its second stage: 131,072 partial sums, one output.
        assert_eq!(
            choose_reduce(sum(1 << 17, 1)),
            ReduceStrategy::WorkgroupTree
        );
        // A row sum of 100: one invocation per row.
        assert_eq!(choose_reduce(sum(100, 1)), ReduceStrategy::PerInvocation);
        // A split max, or a strided split sum, is not read by fours.
        let max = ReduceShape {
            op: ReduceOp::Max,
            ..sum(1 << 20, 8192)
        };
        assert_eq!(choose_reduce(max), ReduceStrategy::PerInvocation);
        let strided = ReduceShape {
            trailing: false,
            ..sum(1 << 20, 8192)
        };
        assert_eq!(choose_reduce(strided), ReduceStrategy::PerInvocation);
    }

    #[test]
    fn softmax_by_rows() {
        // W3: 4,096 rows of 1,024.
        assert_eq!(
            choose_softmax(1024, 4096, 1, true),
            SoftmaxStrategy::RowPerInvocationVec4
        );
        // Ten logits, 64 rows; 37 columns.
        assert_eq!(
            choose_softmax(10, 64, 1, true),
            SoftmaxStrategy::RowPerInvocation
        );
        assert_eq!(
            choose_softmax(37, 5000, 1, true),
            SoftmaxStrategy::RowPerInvocation
        );
        // Few long rows; a softmax along a leading axis.
        assert_eq!(
            choose_softmax(4096, 8, 1, true),
            SoftmaxStrategy::RowPerWorkgroup
        );
        assert_eq!(
            choose_softmax(512, 2048, 3, true),
            SoftmaxStrategy::RowPerInvocation
        );
    }
}
