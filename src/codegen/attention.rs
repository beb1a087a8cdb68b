//! Fused attention: one invocation per query row computes its scores
//! against every (unmasked) key, an online softmax (the running sum is
//! rescaled when the running max grows) and the weighted sum of the value
//! rows, so the `[L, S]` score matrix never goes through memory. Built as
//! IR; where its loops would pass the loop budget the graph keeps the
//! three-kernel path instead, so its loops are never unrolled.

use super::emit::Gen;
use super::norm::{f32_op, f32_unary};
use super::roots::store_outputs;
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::{BinaryOp, UnaryOp};
use crate::kernel::ir::{Arith, Expr, Inst, Ty, Var};
use crate::kernel::{Entry, Sz};

/// The kernel of `Attention { causal }` at `root`, whose scale is
/// parameter word `scale_slot`: its entry, body and workgroup count.
pub(super) fn attention(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    scale_slot: usize,
    causal: bool,
    outputs: &[usize],
) -> (Entry, Vec<Inst>, usize) {
    let inputs = key.nodes[root].inputs.clone();
    let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
    let q_shape = &key.nodes[q].shape;
    let r = q_shape.len();
    let qs = Sz::shape(q, q_shape);
    let (l, e) = (&qs[r - 2], &qs[r - 1]);
    let s_len = Sz::dim(k, r - 2, key.nodes[k].shape[r - 2]);
    let ev_sz = Sz::dim(v, r - 1, key.nodes[v].shape[r - 1]);
    // The value row is held in a private array, whose length is code.
    let ev = g
        .guards
        .value(&ev_sz, "attention's value row (a private array)");
    let rows = Sz::dims_product(q, q_shape, 0..r - 2).mul(l);
    let scale = g.param(scale_slot, DType::F32);
    // Row gi is query i = gi % L of batch b = gi / L.
    let b = g.emit("b", Ty::U32, u(Arith::Div, Expr::Invocation, l));
    let i = g.emit("qrow", Ty::U32, u(Arith::Rem, Expr::Invocation, l));
    let acc = g.fresh("acc");
    g.push(Inst::DeclareArray {
        var: acc,
        element: Ty::F32,
        len: ev,
    });
    // The lowest finite value, so that exp(m - mn) is never NaN.
    let m = g.variable("m", Expr::F32(f32::MIN.to_bits()));
    let s = g.variable("s", Expr::F32(0.0f32.to_bits()));
    let j = g.fresh("j");
    let key_row = g.block(|g| {
        if causal {
            // Keys after the query are masked: the loop ends there.
            let past = Expr::arith(Arith::Lt, i.clone(), Expr::Var(j));
            g.push(Inst::If {
                cond: past,
                body: vec![Inst::Break],
            });
        }
        let row = u(Arith::Mul, b.clone(), &s_len);
        let key_at = g.emit("kr", Ty::U32, Expr::arith(Arith::Add, row, Expr::Var(j)));
        let d = dot_product(g, (q, k, e), &key_at);
        let x = g.emit("x", Ty::F32, f32_op(BinaryOp::Mul, d, scale.clone()));
        let (mn, corr, p) = online_update(g, (&m, &s), x);
        weigh_values(g, (v, &ev_sz, acc), &key_at, (&corr, &p));
        g.assign(&m, mn);
    });
    g.push(plain_loop(j, &s_len, key_row));
    write_row(g, key, (root, outputs), (acc, &ev_sz), &s);
    let entry = Entry::per_invocation_of(&rows);
    (entry, g.take_body(), Entry::groups_for(rows.literal()))
}

/// The online softmax's step for score `x`: the new maximum `mn`, the
/// rescale `corr = exp(m - mn)` of what was summed before, and this key's
/// weight `p = exp(x - mn)`, which it adds to the rescaled sum `s` (the
/// caller moves `m` to `mn` once the value row is weighed).
fn online_update(g: &mut Gen, (m, s): (&Expr, &Expr), x: Expr) -> (Expr, Expr, Expr) {
    let mn = g.emit(
        "mn",
        Ty::F32,
        f32_op(BinaryOp::Maximum, m.clone(), x.clone()),
    );
    let dm = f32_op(BinaryOp::Sub, m.clone(), mn.clone());
    let corr = g.emit("corr", Ty::F32, f32_unary(UnaryOp::Exp, dm));
    let dx = f32_op(BinaryOp::Sub, x, mn.clone());
    let p = g.emit("p", Ty::F32, f32_unary(UnaryOp::Exp, dx));
    let scaled = f32_op(BinaryOp::Mul, s.clone(), corr.clone());
    g.assign(s, f32_op(BinaryOp::Add, scaled, p.clone()));
    (mn, corr, p)
}

/// Writes the invocation's output row: the `ev` weighted sums in `acc`
/// divided by the sum of weights `s`, with the epilogue.
fn write_row(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    (acc, ev): (Var, &Sz),
    s: &Expr,
) {
    let c = g.fresh("c");
    let write = g.block(|g| {
        let at = u(Arith::Mul, Expr::Invocation, ev);
        let idx = g.emit("idx", Ty::U32, Expr::arith(Arith::Add, at, Expr::Var(c)));
        let y = g.emit(
            "y",
            Ty::F32,
            f32_op(BinaryOp::Div, element(acc, c), s.clone()),
        );
        store_outputs(g, key, (root, outputs), &idx, &y);
    });
    g.push(plain_loop(c, ev, write));
}

/// The score of the invocation's query row against key row `key_at`:
/// the dot product of their `e` elements (`q` and `k` are the operands).
fn dot_product(g: &mut Gen, (q, k, e): (usize, usize, &Sz), key_at: &Expr) -> Expr {
    let d = g.accumulator("d");
    let t = g.fresh("t");
    let dot = g.block(|g| {
        let qi = u(Arith::Mul, Expr::Invocation, e);
        let qi = g.emit("qi", Ty::U32, Expr::arith(Arith::Add, qi, Expr::Var(t)));
        let ki = u(Arith::Mul, key_at.clone(), e);
        let ki = g.emit("ki", Ty::U32, Expr::arith(Arith::Add, ki, Expr::Var(t)));
        let qv = g.value(q, &qi, false, false);
        let kv = g.value(k, &ki, false, false);
        g.accumulate(&d, f32_op(BinaryOp::Mul, qv, kv));
    });
    g.push(plain_loop(t, e, dot));
    d
}

/// `acc = acc * corr + p * v[key_at]` over the `ev` elements of value row
/// `key_at` (`v` the operand): the online softmax's rescale and this
/// key's weight.
fn weigh_values(
    g: &mut Gen,
    (v, ev, acc): (usize, &Sz, Var),
    key_at: &Expr,
    (corr, p): (&Expr, &Expr),
) {
    let c = g.fresh("c");
    let weigh = g.block(|g| {
        let vi = u(Arith::Mul, key_at.clone(), ev);
        let vi = g.emit("vi", Ty::U32, Expr::arith(Arith::Add, vi, Expr::Var(c)));
        let vv = g.value(v, &vi, false, false);
        let kept = f32_op(BinaryOp::Mul, element(acc, c), corr.clone());
        let added = f32_op(BinaryOp::Mul, p.clone(), vv);
        let value = f32_op(BinaryOp::Add, kept, added);
        g.push(Inst::SetElement {
            var: acc,
            index: Expr::Var(c),
            value,
        });
    });
    g.push(plain_loop(c, ev, weigh));
}

/// `a op n` for a size `n`, a `u32` literal with its provenance.
fn u(op: Arith, a: Expr, n: &Sz) -> Expr {
    Expr::arith(op, a, Expr::size_u32(n))
}

/// Element `c` of the private array `acc`.
fn element(acc: Var, c: Var) -> Expr {
    Expr::index(Expr::Var(acc), Expr::Var(c))
}

/// `body` for `counter` in `0..count`, never unrolled (see the module).
fn plain_loop(counter: Var, count: &Sz, body: Vec<Inst>) -> Inst {
    Inst::Loop {
        counter,
        count: Expr::size_u32(count),
        unroll: 1,
        body,
    }
}
