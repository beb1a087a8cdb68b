//! Legalisation: rewrites the graph's ops in a lowered kernel body into
//! the primitives the printers spell one way each. Where an op's
//! semantics (PyTorch's) differ from the target language's built-in,
//! they are written out here, once, as IR: an f32 `maximum`/`minimum` is
//! NaN wherever either operand is (f16 and bf16 too: they are computed
//! in f32) (WGSL's `max`/`min` leave NaN
//! unspecified), so it becomes selects on `IsNan` around the built-in.
//! The printers then never decide a NaN rule.

use super::ir::{Builtin, Check, Expr, Inst, PartAccess};
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
    match inst {
        Inst::Let { value, .. } | Inst::Accumulate { value, .. } | Inst::Assign { value, .. } => {
            legalise_expr(value)
        }
        Inst::Declare { init, .. } => {
            if let Some(init) = init {
                legalise_expr(init)
            }
        }
        Inst::SetElement { index, value, .. } | Inst::Store { index, value, .. } => {
            legalise_expr(index);
            legalise_expr(value);
        }
        Inst::Parts { index, access, .. } => {
            legalise_expr(index);
            if let PartAccess::Write(value) = access {
                legalise_expr(value);
            }
        }
        Inst::TextureStore {
            x, y, layer, value, ..
        } => [x, y, layer, value].into_iter().for_each(legalise_expr),
        Inst::If { cond, body } => {
            legalise_expr(cond);
            body.iter_mut().for_each(legalise_inst);
        }
        Inst::Loop { body, .. } => body.iter_mut().for_each(legalise_inst),
        Inst::Check { check, .. } => match check {
            Check::NonFinite { value, inputs, .. } => {
                legalise_expr(value);
                inputs.iter_mut().for_each(legalise_expr);
            }
            Check::Nan { value, .. } => legalise_expr(value),
            Check::Index { index, .. } => legalise_expr(index),
        },
        Inst::CoopLoad { from: access, .. } | Inst::CoopStore { to: access, .. } => {
            legalise_expr(&mut access.offset);
            legalise_expr(&mut access.stride);
        }
        Inst::DeclareArray { .. } | Inst::CoopMultiplyAdd { .. } | Inst::Barrier | Inst::Break => {}
    }
}

/// Rewrites `e` and everything in it, innermost first.
fn legalise_expr(e: &mut Expr) {
    children(e).into_iter().for_each(legalise_expr);
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

/// The expressions directly inside `e`.
fn children(e: &mut Expr) -> Vec<&mut Expr> {
    match e {
        Expr::IsNonFinite { x, .. }
        | Expr::IsNan { x, .. }
        | Expr::Not(x)
        | Expr::NonZero { x, .. }
        | Expr::FromBool { x, .. }
        | Expr::Unary { x, .. }
        | Expr::Round { x, .. }
        | Expr::Cast { x, .. }
        | Expr::Construct { x, .. }
        | Expr::ClampIndex { k: x, .. }
        | Expr::Rng { index: x, .. }
        | Expr::Load { index: x, .. } => vec![&mut **x],
        Expr::Binary { a, b, .. } | Expr::Arith { a, b, .. } => vec![&mut **a, &mut **b],
        Expr::Index { base, index } => vec![&mut **base, &mut **index],
        Expr::Select {
            cond,
            then,
            otherwise,
        } => vec![&mut **cond, &mut **then, &mut **otherwise],
        Expr::Call { args, .. } => args.iter_mut().collect(),
        Expr::Var(_)
        | Expr::Invocation
        | Expr::Local
        | Expr::SubgroupLane
        | Expr::Bool(_)
        | Expr::U32(_)
        | Expr::F32(_)
        | Expr::I32(_)
        | Expr::Param { .. } => Vec::new(),
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
        crate::kernel::ir::print_body(&body, 0, &mut listing);
        assert_eq!(
            listing,
            "v3: f32 = select(nan(v1) ? v1 : select(nan(v2) ? v2 : max(v1, v2)))\n\
             v3: f32 = Maximum(v1, v2)\n"
        );
    }
}
