//! Legalisation: rewrites the graph's ops in a lowered kernel body into
//! the primitives the printers spell one way each. Where an op's
//! semantics (PyTorch's) differ from the target language's built-in,
//! they are written out here, once, as IR: an f32 `maximum`/`minimum` is
//! NaN wherever either operand is (f16 and bf16 too: they are computed
//! in f32) (WGSL's `max`/`min` leave NaN
//! unspecified), so it becomes selects on `IsNan` around the built-in.
//! Anomaly checks become an `If` around an `AtomicMax` of the flags.
//! The printers then never decide a NaN rule or how a check flags.

use super::ir::{Arith, Builtin, Check, Expr, Inst};
use crate::dtype::DType;
use crate::graph::op::BinaryOp;

/// `body` with every op that has a legal form rewritten to it.
pub(crate) fn legalise(mut body: Vec<Inst>) -> Vec<Inst> {
    for inst in &mut body {
        legalise_inst(inst);
    }
    body
}

fn legalise_inst(inst: &mut Inst) {
    if let Inst::Check { check, node } = inst {
        *inst = flag_if_failed(check, *node);
    }
    inst.exprs_mut().into_iter().for_each(legalise_expr);
    if let Some(body) = inst.nested_body_mut() {
        body.iter_mut().for_each(legalise_inst);
    }
}

/// An anomaly check as primitives: where `check` fails, the atomic
/// maximum of its word of the `checks` flags and `u32::MAX - node` (the
/// earliest node flagged wins: see `Check::slot`).
fn flag_if_failed(check: &Check, node: usize) -> Inst {
    let nonfinite = |e: &Expr, vec| Expr::IsNonFinite {
        x: Box::new(e.clone()),
        vec,
    };
    let any = |cond: Expr, vec: bool| {
        if vec {
            Expr::call(Builtin::Any, vec![cond])
        } else {
            cond
        }
    };
    let cond = match check {
        Check::NonFinite { value, inputs, vec } => {
            // Lanes combine as vectors of bools, lane by lane.
            let (and, or) = if *vec {
                (Arith::LaneAnd, Arith::LaneOr)
            } else {
                (Arith::And, Arith::Or)
            };
            let produced = nonfinite(value, *vec);
            let seen = inputs
                .iter()
                .map(|i| nonfinite(i, *vec))
                .reduce(|a, b| Expr::arith(or, a, b));
            let cond = match seen {
                Some(seen) => Expr::arith(and, produced, Expr::Not(Box::new(seen))),
                None => produced,
            };
            any(cond, *vec)
        }
        Check::Nan { value, vec } => any(
            Expr::IsNan {
                x: Box::new(value.clone()),
                vec: *vec,
            },
            *vec,
        ),
        Check::Index { index, size } => Expr::arith(
            Arith::Or,
            Expr::arith(Arith::Lt, index.clone(), Expr::I32(0)),
            Expr::arith(Arith::Ge, index.clone(), size.clone()),
        ),
    };
    Inst::If {
        cond,
        body: vec![Inst::AtomicMax {
            array: "checks",
            index: Expr::count(check.slot()),
            value: Expr::U32((u32::MAX - node as u32) as u64),
        }],
    }
}

/// A float `a != b` with PyTorch's (and IEEE's) rule that NaN differs
/// from everything, itself included, which WGSL lets a compiler assume
/// away: `(a != b) | nan(a) | nan(b)` (lane by lane for `vec4`s), the
/// comparison itself the plain `!=` (`Arith::Ne`). `None` for other
/// expressions.
fn nan_aware_ne(e: &Expr) -> Option<Expr> {
    let Expr::Binary {
        op: BinaryOp::Ne,
        operand,
        vec,
        a,
        b,
    } = e
    else {
        return None;
    };
    if operand.compute() != DType::F32 {
        return None;
    }
    let plain = Expr::arith(Arith::Ne, (**a).clone(), (**b).clone());
    let nan = |x: &Expr| Expr::IsNan {
        x: Box::new(x.clone()),
        vec: *vec,
    };
    let or = if *vec { Arith::LaneOr } else { Arith::Or };
    let either = Expr::arith(or, nan(a), nan(b));
    Some(Expr::arith(or, plain, either))
}

/// Rewrites `e` and everything in it, innermost first.
fn legalise_expr(e: &mut Expr) {
    e.for_each_child_mut(&mut legalise_expr);
    if let Some(ne) = nan_aware_ne(e) {
        *e = ne;
        return;
    }
    if let Expr::Binary {
        op: op @ (BinaryOp::Maximum | BinaryOp::Minimum),
        operand,
        vec,
        a,
        b,
    } = e
        && operand.compute() == DType::F32
    {
        let f = if *op == BinaryOp::Maximum {
            Builtin::Max
        } else {
            Builtin::Min
        };
        let nan = |x: &Expr| Expr::IsNan {
            x: Box::new(x.clone()),
            vec: *vec,
        };
        let plain = Expr::call(f, vec![(**a).clone(), (**b).clone()]);
        let b_or_plain = Expr::select(nan(b), (**b).clone(), plain);
        *e = Expr::select(nan(a), (**a).clone(), b_or_plain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ir::{Ty, Var};

    #[test]
    fn an_f32_maximum_becomes_nan_selects_around_the_builtin_and_integers_stay() {
        let (a, b) = (Var { prefix: "v", id: 1 }, Var { prefix: "v", id: 2 });
        let max = |operand| Expr::Binary {
            op: BinaryOp::Maximum,
            operand,
            vec: false,
            a: Box::new(Expr::Var(a)),
            b: Box::new(Expr::Var(b)),
        };
        let let_of = |value| Inst::Let {
            var: Var { prefix: "v", id: 3 },
            ty: Ty::F32,
            value,
            node: None,
        };
        let body = legalise(vec![let_of(max(DType::F32)), let_of(max(DType::I32))]);
        let mut listing = String::new();
        crate::kernel::listing::print_body(&body, 0, &mut listing);
        assert_eq!(
            listing,
            "v3: f32 = (nan(v1) ? v1 : (nan(v2) ? v2 : max(v1, v2)))\n\
             v3: f32 = Maximum(v1, v2)\n"
        );
    }

    #[test]
    fn a_float_not_equal_is_also_true_where_either_side_is_nan() {
        let (a, b) = (Var { prefix: "v", id: 1 }, Var { prefix: "v", id: 2 });
        let ne = |vec| Expr::Binary {
            op: BinaryOp::Ne,
            operand: DType::F32,
            vec,
            a: Box::new(Expr::Var(a)),
            b: Box::new(Expr::Var(b)),
        };
        let let_of = |value| Inst::Let {
            var: Var { prefix: "h", id: 3 },
            ty: Ty::BOOL,
            value,
            node: None,
        };
        let body = legalise(vec![let_of(ne(false)), let_of(ne(true))]);
        let mut listing = String::new();
        crate::kernel::listing::print_body(&body, 0, &mut listing);
        assert_eq!(
            listing,
            "h3: bool = ((v1 != v2) || (nan(v1) || nan(v2)))\n\
             h3: bool = ((v1 != v2) | (nan(v1) | nan(v2)))\n"
        );
    }
}
