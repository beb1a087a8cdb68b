//! WGSL expressions for single ops: literals, unary and binary functions
//! with PyTorch's NaN and infinity semantics, casts, and the helper
//! functions a kernel includes when it uses `pow` or random numbers.

use crate::dtype::DType;
use crate::graph::op::{BinaryOp, UnaryOp};

pub(crate) fn value_type(dtype: DType, vec: bool) -> String {
    if vec {
        format!("vec4<{}>", dtype.wgsl_value_type())
    } else {
        dtype.wgsl_value_type().to_string()
    }
}

pub(super) fn storage_type(dtype: DType, vec: bool) -> String {
    if vec {
        format!("vec4<{}>", dtype.wgsl_storage_type())
    } else {
        dtype.wgsl_storage_type().to_string()
    }
}

/// A literal of `dtype` (splatted to a `vec4` when `vec`).
pub(super) fn lit(dtype: DType, v: i32, vec: bool) -> String {
    let scalar = match dtype {
        DType::F32 => format!("{v}.0"),
        DType::I32 => format!("{v}i"),
        _ => format!("{v}u"),
    };
    if vec {
        format!("vec4<{}>({scalar})", dtype.wgsl_storage_type())
    } else {
        scalar
    }
}

pub(super) fn unary_expr(u: UnaryOp, dtype: DType, a: &str, vec: bool) -> String {
    let zero = lit(dtype, 0, vec);
    match (u, dtype) {
        (UnaryOp::Neg, DType::U32) => format!("0u - {a}"),
        (UnaryOp::Neg, _) => format!("-{a}"),
        (UnaryOp::Abs, DType::U32) => a.to_string(),
        (UnaryOp::Abs, _) => format!("abs({a})"),
        (UnaryOp::Exp, _) => format!("exp({a})"),
        (UnaryOp::Log, _) => format!("log({a})"),
        (UnaryOp::Sqrt, _) => format!("sqrt({a})"),
        (UnaryOp::Rsqrt, _) => format!("inverseSqrt({a})"),
        (UnaryOp::Recip, _) => format!("1.0 / {a}"),
        (UnaryOp::Sin, _) => format!("sin({a})"),
        (UnaryOp::Cos, _) => format!("cos({a})"),
        // WGSL's tanh loses relative accuracy near zero on Mesa's
        // drivers: `shaders/tanh.wgsl` (NaN and infinities included).
        (UnaryOp::Tanh, _) if vec => format!("tanh_f32x4({a})"),
        (UnaryOp::Tanh, _) => format!("tanh_f32({a})"),
        (UnaryOp::Sigmoid, _) => format!("1.0 / (1.0 + exp(-{a}))"),
        (UnaryOp::Relu, DType::F32) => format!("select(max({a}, {zero}), {a}, {})", is_nan(a, vec)),
        (UnaryOp::Relu, _) => format!("max({a}, {zero})"),
        (UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round, d) if d != DType::F32 => a.to_string(),
        (UnaryOp::Floor, _) => format!("floor({a})"),
        (UnaryOp::Ceil, _) => format!("ceil({a})"),
        // WGSL's round() rounds half to even, as PyTorch does.
        (UnaryOp::Round, _) => format!("round({a})"),
        (UnaryOp::Sign, DType::U32) => format!("min({a}, {})", lit(dtype, 1, vec)),
        (UnaryOp::Sign, DType::F32) => format!("select(sign({a}), {zero}, {})", is_nan(a, vec)),
        (UnaryOp::Sign, _) => format!("sign({a})"),
        (UnaryOp::Erf, _) if vec => format!("erf_f32x4({a})"),
        (UnaryOp::Erf, _) => format!("erf_f32({a})"),
        // x * Phi(x); NaN propagates through erf_f32.
        (UnaryOp::Gelu, _) if vec => format!("0.5 * {a} * (1.0 + erf_f32x4({a} * 0.70710678))"),
        (UnaryOp::Gelu, _) => format!("0.5 * {a} * (1.0 + erf_f32({a} * 0.70710678))"),
    }
}

/// Whether `a` (an f32 or `vec4<f32>` expression) is NaN, tested on its
/// bits: WGSL lets a compiler assume comparisons never see NaN, and
/// lavapipe's `!=` is false for NaN.
pub(crate) fn is_nan(a: &str, vec: bool) -> String {
    if vec {
        format!("((bitcast<vec4<u32>>({a}) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u))")
    } else {
        format!("((bitcast<u32>({a}) & 0x7fffffffu) > 0x7f800000u)")
    }
}

/// Whether `a` (an f32, or lane by lane a `vec4<f32>`) is NaN or
/// infinite, tested on its exponent bits.
pub(crate) fn is_nonfinite(a: &str, vec: bool) -> String {
    if vec {
        format!("((bitcast<vec4<u32>>({a}) & vec4<u32>(0x7f800000u)) == vec4<u32>(0x7f800000u))")
    } else {
        format!("((bitcast<u32>({a}) & 0x7f800000u) == 0x7f800000u)")
    }
}

/// `operand` is the operands' dtype (both share it).
pub(super) fn binary_expr(b: BinaryOp, operand: DType, a: &str, c: &str, vec: bool) -> String {
    let float = operand == DType::F32;
    match b {
        BinaryOp::Add => format!("{a} + {c}"),
        BinaryOp::Sub => format!("{a} - {c}"),
        BinaryOp::Mul => format!("{a} * {c}"),
        BinaryOp::Div => format!("{a} / {c}"),
        BinaryOp::Pow if vec => format!(
            "vec4<f32>(pow_torch({a}.x, {c}.x), pow_torch({a}.y, {c}.y), pow_torch({a}.z, {c}.z), pow_torch({a}.w, {c}.w))"
        ),
        BinaryOp::Pow => format!("pow_torch({a}, {c})"),
        BinaryOp::Maximum | BinaryOp::Minimum if float => {
            unreachable!("legalised into selects (kernel::legalise)")
        }
        BinaryOp::Maximum => format!("max({a}, {c})"),
        BinaryOp::Minimum => format!("min({a}, {c})"),
        BinaryOp::Eq => format!("{a} == {c}"),
        // NaN differs from everything, itself included.
        BinaryOp::Ne if float => unreachable!("legalised into selects (kernel::legalise)"),
        BinaryOp::Ne => format!("{a} != {c}"),
        BinaryOp::Lt => format!("{a} < {c}"),
        BinaryOp::Le => format!("{a} <= {c}"),
        BinaryOp::Gt => format!("{a} > {c}"),
        BinaryOp::Ge => format!("{a} >= {c}"),
    }
}

pub(super) fn cast_expr(from: DType, to: DType, a: &str, vec: bool) -> String {
    match (from, to) {
        _ if from == to => a.to_string(),
        (DType::Bool, _) => format!("select({}, {}, {a})", lit(to, 0, vec), lit(to, 1, vec)),
        (_, DType::Bool) => format!("{a} != {}", lit(from, 0, vec)),
        (DType::I32, DType::U32) => format!("bitcast<{}>({a})", value_type(DType::U32, vec)),
        (DType::U32, DType::I32) => format!("bitcast<{}>({a})", value_type(DType::I32, vec)),
        (_, to) => format!("{}({a})", value_type(to, vec)),
    }
}

/// PyTorch's `pow`: defined for negative bases with integral exponents and
/// `pow(x, 0) == 1`, which WGSL's `pow` leaves undefined.
pub(super) const POW_FUNCTION: &str = include_str!("../../shaders/pow_torch.wgsl");

/// Rounding to, and reading and writing of, 16-bit floats in f32 registers
/// (`f16_round`, `bf16_round`, `bf16_bits`, `bf16_at`).
pub(super) const HALF_FUNCTIONS: &str = include_str!("../../shaders/halves.wgsl");

/// The error function, which WGSL lacks (`erf_f32`, `erf_f32x4`).
pub(super) const ERF_FUNCTIONS: &str = include_str!("../../shaders/erf.wgsl");

/// tanh accurate near zero, one exp a value (`tanh_f32`, `tanh_f32x4`).
pub(super) const TANH_FUNCTIONS: &str = include_str!("../../shaders/tanh.wgsl");

/// Counter-based random numbers: Philox4x32-10 of (seed, 64-bit position),
/// so any element can be generated independently, in any kernel, and
/// identically by the CPU reference (`cpu::rng`, which documents the
/// scheme).
pub(super) const RNG_FUNCTIONS: &str = include_str!("../../shaders/rng.wgsl");
