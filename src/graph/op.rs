//! The operations a node can hold. This enum is the whole vocabulary that
//! lowering, code generation and the CPU reference have to understand.

use crate::dtype::DType;
use crate::shape::Layout;

/// Elementwise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Recip,
    Sin,
    Cos,
    Tanh,
    Sigmoid,
    Relu,
    Floor,
    Ceil,
    Round,
    Sign,
}

impl UnaryOp {
    /// The user-facing name, for messages and dumps.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Recip => "recip",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Sign => "sign",
        }
    }

    /// Whether the op only makes sense on floats, so integer operands are
    /// promoted to `f32` first (as PyTorch does for `exp(int_tensor)`).
    pub fn needs_float(self) -> bool {
        !matches!(
            self,
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Relu
                | UnaryOp::Sign
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
        )
    }
}

/// Elementwise functions of two operands of equal shape and dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinaryOp {
    /// The user-facing name, for messages and dumps.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
        }
    }

    /// Whether the result is `Bool` rather than the operands' dtype.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// What a node computes. Leaves (`Scalar`, `Arange`, `Rand`) carry their
/// runtime values separately (see `Leaf values` in the graph module), so that
/// the op itself, and with it the cache key, does not change with them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A rank-0 constant whose value is a runtime parameter.
    Scalar,
    /// `start + i * step` over the flattened output; both runtime parameters.
    Arange,
    /// Counter-based random numbers: uniform in [0, 1) or standard normal.
    Rand {
        /// Box-Muller normal rather than uniform.
        normal: bool,
    },
    /// Elementwise unary function.
    Unary(UnaryOp),
    /// Elementwise binary function (operands already broadcast and promoted).
    Binary(BinaryOp),
    /// `cond ? a : b` elementwise (operands already broadcast).
    Where,
    /// Conversion to another dtype.
    Cast(DType),
    /// Same elements in row-major order, new shape.
    Reshape,
    /// Size-1 dims repeated to the node's shape (same rank as the input).
    Expand,
    /// A strided view of the input's row-major elements: output element
    /// `(i0, i1, ..)` is input element number `offset + Σ ik * strides[k]`.
    /// This is how a view handle reads its base (functionalization).
    AsStrided(Layout),
    /// The first input (the base) with the elements that the strided view
    /// `Layout` selects replaced by the second input (the view's new
    /// values). This is how a write through a view updates its base.
    StridedScatter(Layout),
}

impl Op {
    /// Short name for messages and dumps.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Scalar => "scalar",
            Op::Arange => "arange",
            Op::Rand { normal: false } => "rand",
            Op::Rand { normal: true } => "randn",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Where => "where",
            Op::Cast(_) => "cast",
            Op::Reshape => "reshape",
            Op::Expand => "expand",
            Op::AsStrided(_) => "as_strided",
            Op::StridedScatter(_) => "strided_scatter",
        }
    }

    /// Movement ops change only which element is read, never values.
    pub fn is_movement(&self) -> bool {
        matches!(self, Op::Reshape | Op::Expand | Op::AsStrided(_))
    }
}
