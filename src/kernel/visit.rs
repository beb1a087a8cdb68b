//! The IR's visitors: the expressions directly inside an expression and
//! inside an instruction, and the body an instruction nests, each by
//! reference and by mutable reference from one list of variants (a
//! macro per list), without a heap allocation: every pass over a kernel
//! (legalisation, index simplification, donation checks, a new size's
//! comparison with its generic kernel) walks all of them.

use smallvec::SmallVec;

use super::ir::{Check, Expr, Inst, PartAccess};

/// The children of an expression, by reference (`iter`) or mutable
/// reference (`iter_mut`), in a fixed order: one list of variants for
/// both visitors.
macro_rules! expr_children {
    ($e:expr, $f:expr, $iter:ident) => {
        match $e {
            Expr::IsNonFinite { x, .. }
            | Expr::IsNan { x, .. }
            | Expr::Not(x)
            | Expr::NonZero { x, .. }
            | Expr::FromBool { x, .. }
            | Expr::Unary { x, .. }
            | Expr::Round { x, .. }
            | Expr::Cast { x, .. }
            | Expr::Construct { x, .. }
            | Expr::Rng { index: x, .. }
            | Expr::Load { index: x, .. } => $f(x),
            Expr::Binary { a, b, .. }
            | Expr::Arith { a, b, .. }
            | Expr::ClampIndex { k: a, top: b }
            | Expr::Index {
                base: a, index: b, ..
            } => {
                $f(a);
                $f(b);
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                $f(cond);
                $f(then);
                $f(otherwise);
            }
            Expr::Call { args, .. } => args.$iter().for_each($f),
            Expr::Sized { lit, .. } => $f(lit),
            Expr::Var(_)
            | Expr::Invocation
            | Expr::Local
            | Expr::SubgroupLane
            | Expr::Bool(_)
            | Expr::U32(_)
            | Expr::F32(_)
            | Expr::I32(_)
            | Expr::Size { .. }
            | Expr::Param { .. } => {}
        }
    };
}

impl Expr {
    /// Calls `f` on each expression directly inside this one (no list is
    /// made, and `f` is inlined: lowering, legalisation and a new size's
    /// comparison walk every expression of every kernel).
    pub fn for_each_child_mut<F: FnMut(&mut Expr)>(&mut self, mut f: F) {
        expr_children!(self, &mut f, iter_mut)
    }

    /// Calls `f` on each expression directly inside this one, read only
    /// (analyses of a finished kernel walk it without copying it).
    pub fn for_each_child<'a, F: FnMut(&'a Expr)>(&'a self, mut f: F) {
        expr_children!(self, &mut f, iter)
    }
}

/// An instruction's expressions (at most four but for an anomaly check's
/// inputs), kept inline: every pass over a kernel walks every
/// instruction's, and a new size lowers and walks its whole graph.
pub(crate) type InstExprs<E> = SmallVec<[E; 4]>;

/// The expressions directly in an instruction, by reference (`iter`) or
/// mutable reference (`iter_mut, mut`): one list of variants for both.
macro_rules! inst_exprs {
    ($inst:expr, $iter:ident $(, $m:tt)?) => {
        match $inst {
            Inst::Let { value, .. }
            | Inst::Accumulate { value, .. }
            | Inst::Assign { value, .. } => smallvec::smallvec![value],
            Inst::Declare { init, .. } => init.$iter().collect(),
            Inst::SetElement { index, value, .. } | Inst::Store { index, value, .. } => {
                smallvec::smallvec![index, value]
            }
            Inst::Parts { index, access, .. } => match access {
                PartAccess::Write(value) => smallvec::smallvec![index, value],
                PartAccess::Read(_) => smallvec::smallvec![index],
            },
            Inst::TextureStore {
                x, y, layer, value, ..
            } => smallvec::smallvec![x, y, layer, value],
            Inst::If { cond, .. } => smallvec::smallvec![cond],
            Inst::AtomicMax { index, value, .. } => smallvec::smallvec![index, value],
            Inst::Loop { count, .. } => smallvec::smallvec![count],
            Inst::Check { check, .. } => match check {
                Check::NonFinite { value, inputs, .. } => {
                    std::iter::once(value).chain(inputs.$iter()).collect()
                }
                Check::Nan { value, .. } => smallvec::smallvec![value],
                Check::Index { index, size } => smallvec::smallvec![index, size],
            },
            Inst::CoopLoad { from: access, .. } | Inst::CoopStore { to: access, .. } => {
                smallvec::smallvec![&$($m)? access.offset, &$($m)? access.stride]
            }
            Inst::DeclareArray { .. }
            | Inst::CoopMultiplyAdd { .. }
            | Inst::Barrier
            | Inst::StorageBarrier
            | Inst::Break => SmallVec::new(),
        }
    };
}

impl Inst {
    /// The expressions directly in this instruction (not those of the
    /// bodies nested in it), in a fixed order.
    pub fn exprs_mut(&mut self) -> InstExprs<&mut Expr> {
        inst_exprs!(self, iter_mut, mut)
    }

    /// The expressions directly in this instruction, read only, in the
    /// order of `exprs_mut`.
    pub fn exprs(&self) -> InstExprs<&Expr> {
        inst_exprs!(self, iter)
    }

    /// The body nested in this instruction (an `If`'s or a `Loop`'s).
    pub fn nested_body_mut(&mut self) -> Option<&mut Vec<Inst>> {
        match self {
            Inst::If { body, .. } | Inst::Loop { body, .. } => Some(body),
            _ => None,
        }
    }

    /// The body nested in this instruction, read only.
    pub fn nested_body(&self) -> Option<&Vec<Inst>> {
        match self {
            Inst::If { body, .. } | Inst::Loop { body, .. } => Some(body),
            _ => None,
        }
    }
}
