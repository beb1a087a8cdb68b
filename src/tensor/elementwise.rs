//! Elementwise ops: type promotion, broadcasting, and the op methods.

use std::panic::Location;
use std::sync::Arc;

use super::Tensor;
use super::creation::scalar_node;
use super::movement::expand_node;
use crate::autograd::rules;
use crate::dtype::{DType, Element, promote};
use crate::graph::Node;
use crate::graph::op::{BinaryOp, Op, UnaryOp};
use crate::shape::broadcast_shapes;

/// The right-hand side of a binary op: a tensor or a host scalar.
pub enum Operand {
    /// A tensor operand, broadcast against the other side.
    Tensor(Tensor),
    /// A scalar (dtype and 32-bit pattern); it travels as a runtime
    /// parameter, so a new value never recompiles.
    Scalar(DType, u32),
}

/// Anything usable as the right-hand side of a binary op.
pub trait IntoOperand {
    /// The operand.
    fn into_operand(self) -> Operand;
}

impl IntoOperand for Tensor {
    fn into_operand(self) -> Operand {
        Operand::Tensor(self)
    }
}

impl IntoOperand for &Tensor {
    fn into_operand(self) -> Operand {
        Operand::Tensor(self.clone())
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl IntoOperand for $t {
            #[track_caller]
            fn into_operand(self) -> Operand {
                Operand::Scalar(<$t as Element>::DTYPE, checked_bits(self))
            }
        }
    )*};
}
scalar_operand!(f32, i32, u32, bool, i64, u8);

/// `value`'s 32-bit pattern; panics at the caller's line when the value
/// does not survive it (an `i64` outside `i32`'s range).
#[track_caller]
pub(crate) fn checked_bits<T: Element>(value: T) -> u32 {
    if !value.fits() {
        panic!(
            "scalar {value:?} of dtype {} does not fit the 32 bits it is stored in at {}",
            T::DTYPE,
            Location::caller()
        );
    }
    value.to_bits()
}

/// Converts a scalar's bits from one dtype to another on the host. A float
/// scalar's bits are an f32 pattern whatever its float dtype (kernels
/// compute 16-bit floats in f32).
pub(crate) fn convert_scalar(bits: u32, from: DType, to: DType) -> u32 {
    let to_u8 = to == DType::U8 && from != DType::U8;
    let (from, to) = (from.compute(), to.compute());
    let as_f64 = match from {
        DType::F32 => f32::from_bits(bits) as f64,
        DType::I32 => bits as i32 as f64,
        DType::U32 => bits as f64,
        DType::Bool => (bits != 0) as u32 as f64,
        DType::F16 | DType::BF16 | DType::I64 | DType::U8 => unreachable!("not a compute dtype"),
    };
    match to {
        // Into u8: saturated, as the cast op does (NaN gives 0).
        _ if to_u8 => as_f64.clamp(0.0, 255.0) as u32,
        _ if to == from => bits,
        DType::F32 => (as_f64 as f32).to_bits(),
        DType::I32 => as_f64 as i32 as u32,
        DType::U32 => as_f64 as u32,
        DType::Bool => (as_f64 != 0.0) as u32,
        DType::F16 | DType::BF16 | DType::I64 | DType::U8 => unreachable!("not a compute dtype"),
    }
}

/// The shape and dtype of `a op b`: their broadcast shape and promoted
/// dtype (bools counted as integers except by `==` and `!=`). Panics,
/// naming both operands, where there is none.
#[track_caller]
fn broadcast_and_promote(
    op: BinaryOp,
    a: &Node,
    b: &Node,
    loc: &'static Location<'static>,
) -> (Vec<usize>, DType) {
    let Some(shape) = broadcast_shapes(&a.shape, &b.shape) else {
        panic!(
            "{}: shapes {:?} and {:?} cannot be broadcast together (dtypes {}, {}) at {loc}",
            op.name(),
            a.shape,
            b.shape,
            a.dtype,
            b.dtype
        );
    };
    let Some(mut dt) = promote(a.dtype, b.dtype) else {
        panic!(
            "{}: no common dtype for {} and {} (shapes {:?}, {:?}); cast one side first, at {loc}",
            op.name(),
            a.dtype,
            b.dtype,
            a.shape,
            b.shape
        );
    };
    // Arithmetic on bools counts them as integers; ordering compares
    // them as 0 and 1.
    if dt == DType::Bool && !matches!(op, BinaryOp::Eq | BinaryOp::Ne) {
        dt = DType::I32;
    }
    (shape, dt)
}

/// An integer pow's f32 result `node` rounded and cast back to `dt`.
fn rounded_to(node: &Arc<Node>, dt: DType, loc: &'static Location<'static>) -> Arc<Node> {
    cast_node(
        &Node::pending(
            Op::Unary(UnaryOp::Round),
            vec![node.clone()],
            Vec::new(),
            node.shape.clone(),
            DType::F32,
            loc,
        ),
        dt,
        loc,
    )
}

/// `node` converted to `dtype` (itself if it already is).
pub(crate) fn cast_node(
    node: &Arc<Node>,
    dtype: DType,
    loc: &'static Location<'static>,
) -> Arc<Node> {
    if node.dtype == dtype {
        return node.clone();
    }
    let source = if dtype == DType::U8 && !matches!(node.dtype, DType::Bool | DType::U8) {
        saturate_u8(node, loc)
    } else {
        node.clone()
    };
    // The op converts to the storage dtype (I64 is I32 below the front
    // end); the node keeps the front end's dtype.
    Node::pending(
        Op::Cast(dtype.storage()),
        vec![source],
        Vec::new(),
        node.shape.clone(),
        dtype,
        loc,
    )
}

/// Whether a `u8` tensor (`dtype`) meets an integer scalar outside
/// `0..=255`, which the tensor's dtype cannot hold.
fn byte_against_wider_int(dtype: DType, rhs: &Operand) -> bool {
    let &Operand::Scalar(sd, bits) = rhs else {
        return false;
    };
    let value = match sd.compute() {
        DType::I32 => bits as i32 as i64,
        DType::U32 => bits as i64,
        _ => return false,
    };
    dtype == DType::U8 && !(0..=255).contains(&value)
}

/// `node` clamped into `[0, 255]` in its own dtype (NaN stays NaN and
/// becomes 0 in the cast), so a cast into `u8` saturates.
fn saturate_u8(node: &Arc<Node>, loc: &'static Location<'static>) -> Arc<Node> {
    let bound = |op: BinaryOp, x: Arc<Node>, v: f64| {
        let bits = match node.dtype.compute() {
            DType::F32 => (v as f32).to_bits(),
            _ => v as i32 as u32,
        };
        let s = expand_node(&scalar_node(bits, node.dtype, loc), &node.shape, loc);
        Node::pending(
            Op::Binary(op),
            vec![x, s],
            Vec::new(),
            node.shape.clone(),
            node.dtype,
            loc,
        )
    };
    let low = if node.dtype.compute() == DType::U32 {
        node.clone()
    } else {
        bound(BinaryOp::Maximum, node.clone(), 0.0)
    };
    bound(BinaryOp::Minimum, low, 255.0)
}

impl Tensor {
    #[track_caller]
    pub(super) fn unary(&self, op: UnaryOp) -> Tensor {
        if op == UnaryOp::Neg && self.dtype() == DType::U8 {
            // 0 - x, modulo 256 (as PyTorch's negation of bytes).
            let zero = Tensor::zeros_dtype(self.shape().to_vec(), DType::U8, self.device());
            return zero.binary(Operand::Tensor(self.clone()), BinaryOp::Sub);
        }
        let loc = Location::caller();
        let mut x = self.node();
        if op.needs_float() && !x.dtype.is_float() {
            x = cast_node(&x, DType::F32, loc);
        } else if x.dtype == DType::Bool {
            panic!(
                "{}: not defined for bool tensors (shape {:?}) at {loc}",
                op.name(),
                self.shape()
            );
        }
        let node = Node::pending(
            Op::Unary(op),
            vec![x.clone()],
            Vec::new(),
            x.shape.clone(),
            x.dtype,
            loc,
        );
        let out = Tensor::from_node(node, self.device());
        rules::unary(op, self, &out);
        out
    }

    /// Records `self op rhs` with broadcasting and PyTorch's type promotion.
    #[track_caller]
    pub(crate) fn binary(&self, rhs: Operand, op: BinaryOp) -> Tensor {
        if self.wraps_as_u8(&rhs, op) {
            return self.binary_u8(rhs, op);
        }
        let out = Tensor::from_node(self.binary_node(&rhs, op), self.device());
        rules::binary(op, self, &rhs, &out);
        out
    }

    /// Whether `self op rhs` is `u8` arithmetic that can leave `[0, 255]`
    /// (and so wraps modulo 256, as PyTorch's does).
    pub(super) fn wraps_as_u8(&self, rhs: &Operand, op: BinaryOp) -> bool {
        let result = match rhs {
            Operand::Tensor(t) => promote(self.dtype(), t.dtype()),
            Operand::Scalar(sd, _) if sd.category() <= self.dtype().category() => {
                Some(self.dtype())
            }
            Operand::Scalar(..) => None,
        };
        result == Some(DType::U8)
            && matches!(
                op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Pow
            )
    }

    /// `u8` arithmetic: computed in `i32` (exact for sums, differences
    /// and products of bytes), then reduced modulo 256 as
    /// `r - floor(r / 256) * 256` (exact in f32 below 2^24).
    #[track_caller]
    pub(super) fn binary_u8(&self, rhs: Operand, op: BinaryOp) -> Tensor {
        let wide = |t: &Tensor| t.cast(DType::I32);
        let rhs = match rhs {
            Operand::Tensor(t) => Operand::Tensor(wide(&t)),
            Operand::Scalar(sd, bits) => {
                Operand::Scalar(DType::I32, convert_scalar(bits, sd, DType::I32))
            }
        };
        let r = wide(self).binary(rhs, op);
        let quotient = (r.cast(DType::F32) / 256.0f32).floor().cast(DType::I32);
        (&r - &(quotient * 256i32)).cast(DType::U8)
    }

    /// The node of `self op rhs`, without a handle (in-place ops bind it to
    /// `self`'s handle instead of registering a new one).
    #[track_caller]
    pub(crate) fn binary_node(&self, rhs: &Operand, op: BinaryOp) -> Arc<Node> {
        if op.is_comparison() && byte_against_wider_int(self.dtype(), rhs) {
            // A byte compared with an integer outside 0..=255: compared in
            // i32, where both values are what they are.
            return self.cast(DType::I32).binary_node(rhs, op);
        }
        let loc = Location::caller();
        let a = self.node();
        let b = self.rhs_node(rhs, &a, op, loc);
        let (shape, dt) = broadcast_and_promote(op, &a, &b, loc);
        // True division and pow are computed in f32 (pow's integer result
        // is cast back, matching PyTorch's integer pow for exact values).
        let compute_dt = if matches!(op, BinaryOp::Div | BinaryOp::Pow) && !dt.is_float() {
            DType::F32
        } else {
            dt
        };
        let a = expand_node(&cast_node(&a, compute_dt, loc), &shape, loc);
        let b = expand_node(&cast_node(&b, compute_dt, loc), &shape, loc);
        let out_dt = if op.is_comparison() {
            DType::Bool
        } else {
            compute_dt
        };
        let node = Node::pending(Op::Binary(op), vec![a, b], Vec::new(), shape, out_dt, loc);
        if op == BinaryOp::Pow && !dt.is_float() {
            return rounded_to(&node, dt, loc);
        }
        node
    }

    /// The node of the right-hand side `rhs` of `a op rhs`: a tensor's
    /// own (on `self`'s device), or a scalar's, in `a`'s dtype where its
    /// category is no higher.
    #[track_caller]
    fn rhs_node(
        &self,
        rhs: &Operand,
        a: &Node,
        op: BinaryOp,
        loc: &'static Location<'static>,
    ) -> Arc<Node> {
        match rhs {
            Operand::Tensor(t) => {
                if t.device() != self.device() {
                    panic!(
                        "{}: operands are on different devices ({} and {}) at {loc}",
                        op.name(),
                        self.device().name(),
                        t.device().name()
                    );
                }
                t.node()
            }
            &Operand::Scalar(sd, bits) => {
                // A scalar of a lower or equal category takes the tensor's
                // dtype; a higher one promotes to that category's default.
                let dt = if sd.category() <= a.dtype.category() {
                    a.dtype
                } else if sd == DType::F32 {
                    DType::F32
                } else {
                    DType::I32
                };
                scalar_node(convert_scalar(bits, sd, dt), dt, loc)
            }
        }
    }

    /// Elementwise `cond ? on_true : on_false`, broadcasting all three.
    /// `self` is the condition and must be `Bool`.
    #[track_caller]
    pub fn where_cond(&self, on_true: impl IntoOperand, on_false: impl IntoOperand) -> Tensor {
        let loc = Location::caller();
        let c = self.node();
        if c.dtype != DType::Bool {
            panic!(
                "where_cond: condition must be bool, got {} (shape {:?}) at {loc}",
                c.dtype, c.shape
            );
        }
        // Tensor operands are kept for the backward rule; scalars get no
        // gradient, so they stay bare nodes.
        let operand = |o: Operand| match o {
            Operand::Tensor(t) => (t.node(), Some(t)),
            Operand::Scalar(d, bits) => (scalar_node(bits, d, loc), None),
        };
        let (a, ta) = operand(on_true.into_operand());
        let (b, tb) = operand(on_false.into_operand());
        let shape = broadcast_shapes(&c.shape, &a.shape)
            .and_then(|s| broadcast_shapes(&s, &b.shape))
            .unwrap_or_else(|| {
                panic!(
                    "where_cond: shapes {:?}, {:?} and {:?} cannot be broadcast together at {loc}",
                    c.shape, a.shape, b.shape
                )
            });
        let dt = promote(a.dtype, b.dtype).unwrap_or_else(|| {
            panic!(
                "where_cond: no common dtype for {} and {} at {loc}",
                a.dtype, b.dtype
            )
        });
        let inputs = vec![
            expand_node(&c, &shape, loc),
            expand_node(&cast_node(&a, dt, loc), &shape, loc),
            expand_node(&cast_node(&b, dt, loc), &shape, loc),
        ];
        let out = Tensor::from_node(
            Node::pending(Op::Where, inputs, Vec::new(), shape, dt, loc),
            self.device(),
        );
        rules::where_cond(self, ta.as_ref(), tb.as_ref(), &out);
        out
    }

    /// The tensor converted to `dtype` (float to int truncates toward zero
    /// and saturates; anything to bool is `!= 0`).
    #[track_caller]
    pub fn cast(&self, dtype: DType) -> Tensor {
        // As PyTorch's `.to(dtype)`: already of `dtype`, the tensor itself
        // (no node, no grad function).
        if self.dtype() == dtype {
            return self.clone();
        }
        let node = cast_node(&self.node(), dtype, Location::caller());
        let out = Tensor::from_node(node, self.device());
        rules::cast(self, &out);
        out
    }

    /// Alias of [`Tensor::cast`], as in PyTorch's `.to(dtype)`.
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Tensor {
        self.cast(dtype)
    }

    /// The tensor in `f16` (rounded to nearest, ties to even; past 65504
    /// to infinity), as PyTorch's `.half()`.
    #[track_caller]
    pub fn half(&self) -> Tensor {
        self.cast(DType::F16)
    }

    /// The tensor in `bf16` (rounded to nearest, ties to even), as
    /// PyTorch's `.bfloat16()`.
    #[track_caller]
    pub fn bfloat16(&self) -> Tensor {
        self.cast(DType::BF16)
    }

    /// The tensor in `f32`, as PyTorch's `.float()`.
    #[track_caller]
    pub fn float(&self) -> Tensor {
        self.cast(DType::F32)
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(&self) -> Tensor {
                self.unary(UnaryOp::$op)
            }
        )*}
    };
}

unary_methods! {
    /// Elementwise `-x`.
    neg => Neg,
    /// Elementwise `|x|`.
    abs => Abs,
    /// Elementwise `e^x` (integers are promoted to `f32`).
    exp => Exp,
    /// Elementwise natural logarithm.
    log => Log,
    /// Elementwise square root.
    sqrt => Sqrt,
    /// Elementwise `1 / sqrt(x)`.
    rsqrt => Rsqrt,
    /// Elementwise `1 / x`.
    recip => Recip,
    /// Elementwise sine.
    sin => Sin,
    /// Elementwise cosine.
    cos => Cos,
    /// Elementwise hyperbolic tangent.
    tanh => Tanh,
    /// Elementwise `1 / (1 + e^-x)`.
    sigmoid => Sigmoid,
    /// Elementwise `max(x, 0)`.
    relu => Relu,
    /// Elementwise floor (identity on integers).
    floor => Floor,
    /// Elementwise ceiling (identity on integers).
    ceil => Ceil,
    /// Elementwise rounding, half to even as in PyTorch.
    round => Round,
    /// Elementwise sign: -1, 0 or 1.
    sign => Sign,
    /// Elementwise error function `2/sqrt(pi) * integral_0^x e^(-t^2) dt`
    /// (integers are promoted to `f32`).
    erf => Erf,
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(&self, rhs: impl IntoOperand) -> Tensor {
                self.binary(rhs.into_operand(), BinaryOp::$op)
            }
        )*}
    };
}

binary_methods! {
    /// Elementwise `self + rhs`, broadcasting.
    add => Add,
    /// Elementwise `self - rhs`, broadcasting.
    sub => Sub,
    /// Elementwise `self * rhs`, broadcasting.
    mul => Mul,
    /// Elementwise true division (integers give `f32`, as in PyTorch).
    div => Div,
    /// Elementwise `self ^ rhs` with PyTorch's conventions (`pow(x, 0) == 1`,
    /// negative bases with integral exponents).
    pow => Pow,
    /// Elementwise maximum.
    maximum => Maximum,
    /// Elementwise minimum.
    minimum => Minimum,
    /// Elementwise `==` (bool result).
    eq => Eq,
    /// Elementwise `!=` (bool result).
    ne => Ne,
    /// Elementwise `<` (bool result).
    lt => Lt,
    /// Elementwise `<=` (bool result).
    le => Le,
    /// Elementwise `>` (bool result).
    gt => Gt,
    /// Elementwise `>=` (bool result).
    ge => Ge,
}
