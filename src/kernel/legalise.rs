//! Legalisation: rewrites the graph's ops in a lowered kernel body into
//! the primitives the printers spell one way each. Where an op's
//! semantics (PyTorch's) differ from the target language's built-in,
//! they are written out here, once, as IR: an f32 `maximum`/`minimum` is
//! NaN wherever either operand is (f16 and bf16 too: they are computed
//! in f32) (WGSL's `max`/`min` leave NaN
//! unspecified), so it becomes selects on `IsNan` around the built-in.
//! The printers then never decide a NaN rule.

use super::ir::{Builtin, Expr, Inst};
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
    inst.exprs_mut().into_iter().for_each(legalise_expr);
    for body in inst.bodies_mut() {
        body.iter_mut().for_each(legalise_inst);
    }
}

/// Rewrites `e` and everything in it, innermost first.
fn legalise_expr(e: &mut Expr) {
    e.children_mut().into_iter().for_each(legalise_expr);
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
}
