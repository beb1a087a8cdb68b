//! `+ - * /` and unary `-` for tensors, tensor references and scalars.

use std::ops::{Add, Div, Mul, Neg, Sub};

use super::Tensor;
use crate::graph::op::BinaryOp;
use crate::tensor::IntoOperand;

macro_rules! binary_overloads {
    ($trait:ident, $method:ident, $op:ident) => {
        impl<R: IntoOperand> $trait<R> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                self.binary(rhs.into_operand(), BinaryOp::$op)
            }
        }
        impl<R: IntoOperand> $trait<R> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                self.binary(rhs.into_operand(), BinaryOp::$op)
            }
        }
        impl $trait<Tensor> for f32 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                let lhs = Tensor::scalar(self, rhs.device());
                lhs.binary(rhs.into_operand(), BinaryOp::$op)
            }
        }
        impl $trait<&Tensor> for f32 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                let lhs = Tensor::scalar(self, rhs.device());
                lhs.binary(rhs.into_operand(), BinaryOp::$op)
            }
        }
    };
}

binary_overloads!(Add, add, Add);
binary_overloads!(Sub, sub, Sub);
binary_overloads!(Mul, mul, Mul);
binary_overloads!(Div, div, Div);

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}
