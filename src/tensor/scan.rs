//! Running sums and products along an axis (`cumsum`, `cumprod`): one
//! linear scan kernel each (`Op::Scan`), forward and backward.

use std::panic::Location;

use super::Tensor;
use super::dims::resolve_axis;
use super::elementwise::cast_node;
use crate::autograd::rules;
use crate::dtype::DType;
use crate::graph::Node;
use crate::graph::op::{Op, ReduceOp};

impl Tensor {
    /// Cumulative sum along `axis` (PyTorch's `cumsum`): element `j` is
    /// the sum of elements `0..=j` in order, so a NaN or infinity reaches
    /// only the sums after it. Floats keep their dtype (f16/bf16 summed
    /// in f32 and rounded once per element); `i32` and bool give `i32`,
    /// `i64` and `u8` give `i64`. One kernel, a linear walk of each line.
    #[track_caller]
    pub fn cumsum(&self, axis: isize) -> Tensor {
        let _op = crate::graph::record_as("cumsum");
        self.scan(ReduceOp::Sum, axis)
    }

    /// Cumulative product along `axis` (PyTorch's `cumprod`), with
    /// `cumsum`'s dtypes. Its gradient is PyTorch's where elements are
    /// zero: the first zero of a line gets the product of the others up
    /// to each later position, later ones get 0.
    #[track_caller]
    pub fn cumprod(&self, axis: isize) -> Tensor {
        let _op = crate::graph::record_as("cumprod");
        self.scan(ReduceOp::Prod, axis)
    }

    #[track_caller]
    fn scan(&self, op: ReduceOp, axis: isize) -> Tensor {
        let loc = Location::caller();
        let name = if op == ReduceOp::Prod {
            "cumprod"
        } else {
            "cumsum"
        };
        let dtype = match self.dtype() {
            d if d.is_float() => d,
            DType::I64 | DType::U8 => DType::I64,
            _ => DType::I32,
        };
        if self.rank() == 0 {
            // A 0-dim tensor scans as a line of one element.
            resolve_axis(name, axis, 1);
            return self.reshape([1]).scan(op, 0).reshape(Vec::<isize>::new());
        }
        let x = cast_node(&self.node(), dtype, loc);
        let axis = resolve_axis(name, axis, self.rank());
        let shape = x.shape.clone();
        let node = Node::pending(
            Op::Scan { op, axis, chunk: 0 },
            vec![x],
            vec![],
            shape,
            dtype,
            loc,
        );
        let out = Tensor::from_node(node, self.device());
        rules::scan(op, self, axis, &out);
        out
    }

    /// Sums of elements `j..` for each `j` along `axis` (the gradient of
    /// `cumsum`).
    #[track_caller]
    pub(crate) fn reverse_cumsum(&self, axis: usize) -> Tensor {
        let a = axis as isize;
        self.flip([a]).cumsum(a).flip([a])
    }
}
