//! The semantics table: what each op gives at NaN and what each reduction
//! starts from, as PyTorch 2.15 defines them. Code generation and the CPU
//! reference both follow it, `tests/semantics_table.rs` checks both
//! backends against it op by op, and `tests/golden.rs` checks it against
//! PyTorch's own outputs.

use super::op::{BinaryOp, ReduceOp, UnaryOp};

/// What an op gives where an operand is NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NanResult {
    /// NaN: it propagates.
    Nan,
    /// This value instead (`sign(NaN)` is 0).
    Value(f32),
    /// `false` (`NaN == x`, `NaN < x` and the other ordered comparisons).
    False,
    /// `true` (`NaN != x`).
    True,
    /// The index of the first NaN (`argmax`, `argmin`).
    FirstNanIndex,
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 18] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Recip,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Sign,
        UnaryOp::Erf,
        UnaryOp::Gelu,
    ];

    /// The result at a NaN input: NaN for all but `sign`, which gives 0
    /// (`relu` and `tanh` keep NaN too, where a clamp would hide it).
    pub fn nan_result(self) -> NanResult {
        match self {
            UnaryOp::Sign => NanResult::Value(0.0),
            _ => NanResult::Nan,
        }
    }
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 13] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
    ];

    /// The result where either operand is NaN: comparisons are false
    /// except `ne`; arithmetic, `maximum` and `minimum` give NaN. (`pow`
    /// has two exceptions, as in C and PyTorch: `x^0` and `1^y` are 1.)
    pub fn nan_result(self) -> NanResult {
        match self {
            BinaryOp::Ne => NanResult::True,
            BinaryOp::Eq | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                NanResult::False
            }
            _ => NanResult::Nan,
        }
    }
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 6] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
    ];

    /// The result over elements among which is a NaN: NaN for the values
    /// (`max` and `min` too), the first NaN's index for the arg ops.
    pub fn nan_result(self) -> NanResult {
        if self.is_arg() {
            NanResult::FirstNanIndex
        } else {
            NanResult::Nan
        }
    }

    /// The value a float reduction starts from (its result over no
    /// elements, where that is allowed): 0 for sums, 1 for products, -inf
    /// for maxima, +inf for minima.
    pub fn identity(self) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max | ReduceOp::ArgMax => f64::NEG_INFINITY,
            ReduceOp::Min | ReduceOp::ArgMin => f64::INFINITY,
        }
    }
}

/// For an op that reads by index (`gather`, `scatter_add`), the length of
/// the axis its indices point into: an index outside `0..len` is out of
/// range (anomaly mode reports it; the GPU clamps a gather's and drops a
/// scatter's). `None` for other nodes.
pub(crate) fn indexed_axis_len(nodes: &[super::GNode], n: usize) -> Option<usize> {
    use super::GKind;
    use super::op::Op;
    let node = &nodes[n];
    match &node.kind {
        GKind::Op {
            op: Op::Gather(axis),
            ..
        } => Some(nodes[node.inputs[0]].shape[*axis]),
        GKind::Op {
            op: Op::ScatterAdd(axis),
            ..
        } => Some(node.shape[*axis]),
        _ => None,
    }
}
