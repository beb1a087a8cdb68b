//! In-place ops. Each records an ordinary functional node and rebinds the
//! handle to it (see [`Handle::assign`](super::Handle)): the graph that
//! lowering sees never mutates anything, and a write through a view becomes
//! a scatter into its base. The executor reuses the old buffer when nothing
//! else needs the old value (donation), so `w -= lr * g` needs no new memory.

use std::ops::{AddAssign, DivAssign, MulAssign, Range, SubAssign};
use std::panic::Location;
use std::sync::Arc;

use super::creation::scalar_node;
use super::elementwise::{cast_node, checked_bits};
use super::movement::expand_node;
use super::{IntoOperand, Operand, Tensor};
use crate::dtype::Element;
use crate::graph::Node;
use crate::graph::op::BinaryOp;
use crate::shape::broadcast_shapes;

impl Tensor {
    /// Rebinds `self` to `value`, which must have `self`'s shape and dtype.
    /// `value_requires_grad`: whether the tensor the value comes from
    /// requires grad (in-place writes are not differentiated).
    #[track_caller]
    fn assign_node(&self, value: Arc<Node>, op: &str, value_requires_grad: bool) -> &Tensor {
        let loc = Location::caller();
        if value.shape != self.shape() {
            panic!(
                "{op}: result shape {:?} does not match the shape {:?} of the tensor written in place at {loc}",
                value.shape,
                self.shape()
            );
        }
        if value.dtype != self.dtype() {
            panic!(
                "{op}: result type {} can't be cast to the tensor's type {} in place (shape {:?}) at {loc}",
                value.dtype,
                self.dtype(),
                self.shape()
            );
        }
        crate::autograd::check_inplace(self, value_requires_grad, op);
        self.h.assign(value, op);
        self
    }

    #[track_caller]
    fn binary_(&self, rhs: Operand, op: BinaryOp, name: &str) -> &Tensor {
        let rhs_requires_grad = matches!(&rhs, Operand::Tensor(t) if t.requires_grad());
        let value = if self.wraps_as_u8(&rhs, op) {
            self.binary_u8(rhs, op).node()
        } else {
            self.binary_node(&rhs, op)
        };
        self.assign_node(value, name, rhs_requires_grad)
    }

    /// In place `self += rhs` (broadcast to `self`'s shape). Returns `self`.
    #[track_caller]
    pub fn add_(&self, rhs: impl IntoOperand) -> &Tensor {
        self.binary_(rhs.into_operand(), BinaryOp::Add, "add_")
    }

    /// In place `self -= rhs`. Returns `self`.
    #[track_caller]
    pub fn sub_(&self, rhs: impl IntoOperand) -> &Tensor {
        self.binary_(rhs.into_operand(), BinaryOp::Sub, "sub_")
    }

    /// In place `self *= rhs`. Returns `self`.
    #[track_caller]
    pub fn mul_(&self, rhs: impl IntoOperand) -> &Tensor {
        self.binary_(rhs.into_operand(), BinaryOp::Mul, "mul_")
    }

    /// In place `self /= rhs` (`self` must be `f32`: true division). Returns `self`.
    #[track_caller]
    pub fn div_(&self, rhs: impl IntoOperand) -> &Tensor {
        self.binary_(rhs.into_operand(), BinaryOp::Div, "div_")
    }

    /// Copies `src` (broadcast to `self`'s shape, converted to `self`'s
    /// dtype) into `self`. Returns `self`.
    #[track_caller]
    pub fn copy_(&self, src: impl IntoOperand) -> &Tensor {
        let loc = Location::caller();
        let mut src_requires_grad = false;
        let node = match src.into_operand() {
            Operand::Tensor(t) => {
                if t.device() != self.device() {
                    panic!(
                        "copy_: source is on another device ({}) at {loc}",
                        t.device().name()
                    );
                }
                src_requires_grad = t.requires_grad();
                t.node()
            }
            Operand::Scalar(d, bits) => scalar_node(bits, d, loc),
        };
        if broadcast_shapes(&node.shape, self.shape()).as_deref() != Some(self.shape()) {
            panic!(
                "copy_: source of shape {:?} cannot be broadcast to shape {:?} at {loc}",
                node.shape,
                self.shape()
            );
        }
        let value = expand_node(&cast_node(&node, self.dtype(), loc), self.shape(), loc);
        self.assign_node(value, "copy_", src_requires_grad)
    }

    /// Sets every element to `value` (converted to `self`'s dtype). Returns `self`.
    #[track_caller]
    pub fn fill_<T: Element>(&self, value: T) -> &Tensor {
        let loc = Location::caller();
        let scalar = cast_node(
            &scalar_node(checked_bits(value), T::DTYPE, loc),
            self.dtype(),
            loc,
        );
        self.assign_node(expand_node(&scalar, self.shape(), loc), "fill_", false)
    }

    /// Sets every element to zero. Returns `self`.
    #[track_caller]
    pub fn zero_(&self) -> &Tensor {
        self.fill_(0.0f32)
    }

    /// Elementwise `min(max(self, min), max)`.
    #[track_caller]
    pub fn clamp(&self, min: f32, max: f32) -> Tensor {
        // Computed as maximum then minimum (NaN stays NaN; min > max
        // gives max everywhere, as in PyTorch), differentiated as one op.
        let out = crate::autograd::no_grad(|| self.maximum(min).minimum(max));
        crate::autograd::rules::clamp(self, min, max, &out);
        out
    }

    /// In place [`Tensor::clamp`]. Returns `self`.
    #[track_caller]
    pub fn clamp_(&self, min: f32, max: f32) -> &Tensor {
        let lower = Tensor::from_node(
            self.binary_node(&min.into_operand(), BinaryOp::Maximum),
            self.device(),
        );
        let value = lower.binary_node(&max.into_operand(), BinaryOp::Minimum);
        self.assign_node(value, "clamp_", false)
    }

    /// Writes `value` into the window `ranges` of the leading dims (as
    /// `x[r0, r1, ..] = value` in PyTorch), through a view: one fused
    /// scatter updates `self` and every view of it.
    #[track_caller]
    pub fn slice_assign(&self, ranges: &[Range<usize>], value: impl IntoOperand) -> &Tensor {
        let mut view = self.clone();
        for (d, r) in ranges.iter().enumerate() {
            view = view.slice(d as isize, r.start, r.end, 1);
        }
        view.copy_(value);
        self
    }

    /// An independent tensor with the same values (PyTorch's `clone()`;
    /// Rust's `Clone` gives a second handle to the same tensor instead).
    #[track_caller]
    pub fn deep_clone(&self) -> Tensor {
        let out = Tensor::from_node(self.node(), self.device());
        crate::autograd::rules::reshape("clone", self, &out);
        out
    }

    /// The value of the aliasing family's version counter: it increases
    /// with every in-place write to the base or any view of it.
    pub fn version(&self) -> u64 {
        self.h.version()
    }

    /// Whether `self` is a view of another tensor (writes go to its base).
    pub fn is_view(&self) -> bool {
        !self.h.is_base()
    }
}

macro_rules! assign_ops {
    ($($trait:ident $method:ident $inplace:ident),*) => {$(
        impl<R: IntoOperand> $trait<R> for Tensor {
            #[track_caller]
            fn $method(&mut self, rhs: R) {
                self.$inplace(rhs);
            }
        }
    )*};
}

assign_ops!(AddAssign add_assign add_, SubAssign sub_assign sub_, MulAssign mul_assign mul_, DivAssign div_assign div_);
