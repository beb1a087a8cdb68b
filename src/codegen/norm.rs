//! Row normalisation (the core of layer norm) and its gradient, built as
//! IR: one invocation per row of the last axis, which reads the row three
//! times (mean, centred second moment, write) forward and four times
//! backward. Rows of a layer norm are short (the model width), so a row
//! stays in cache and no workgroup barrier is needed (they are dear on
//! CPU drivers).

use super::emit::Gen;
use super::roots::store_outputs;
use super::wgsl::{WORKGROUP_SIZE, unroll_for};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::{BinaryOp, UnaryOp};
use crate::kernel::Entry;
use crate::kernel::ir::{Arith, Expr, Inst, Ty};
use crate::shape::numel;

/// What one pass does with (generator, element index, x there, gy there).
type PassBody<'a> = dyn Fn(&mut Gen, &Expr, &Expr, Option<&Expr>) + 'a;

/// The kernel of `Normalize` (or `NormalizeBackward` when `backward`) at
/// `root`, whose `eps` is parameter word `eps_slot`: its entry, its body
/// and its workgroup count.
pub(super) fn normalize(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    eps_slot: usize,
    backward: bool,
    outputs: &[usize],
) -> (Entry, Vec<Inst>, usize) {
    let inputs = key.nodes[root].inputs.clone();
    let x = inputs[0];
    let shape = &key.nodes[x].shape;
    let len = shape.last().copied().unwrap_or(1);
    let rows = numel(shape) / len.max(1);
    // Three passes over the row forward, four backward, each within its
    // share of the kernel's loop budget.
    let budget = g.context().target.loop_budget(if backward { 4 } else { 3 });
    let unroll = unroll_for(len, budget);
    // Each pass reads x (and gy) at element k of row gi, then runs `f`.
    let pass = |g: &mut Gen, f: &PassBody<'_>| {
        let counter = g.fresh("k");
        let body = g.block(|g| {
            let at = Expr::arith(
                Arith::Add,
                Expr::arith(Arith::Mul, Expr::Invocation, Expr::U32(len as u64)),
                Expr::Var(counter),
            );
            let i = g.emit("i", Ty::U32, at);
            let v = g.value(x, &i, false, false);
            let gv = backward.then(|| g.value(inputs[1], &i, false, false));
            f(g, &i, &v, gv.as_ref());
        });
        g.push(Inst::Loop {
            counter,
            count: Expr::count(len),
            unroll,
            body,
        });
    };
    let len_f = Expr::Cast {
        from: DType::U32,
        to: DType::F32,
        vec: false,
        x: Box::new(Expr::U32(len as u64)),
    };
    let eps = g.param(eps_slot, DType::F32);
    // The row's first element, the shift its moments are taken about.
    let first = Expr::arith(Arith::Mul, Expr::Invocation, Expr::U32(len as u64));
    let first = g.emit("i0", Ty::U32, first);
    let shift = g.value(x, &first, false, false);
    let stats = row_stats(g, &pass, &len_f, eps, shift);
    if backward {
        write_gradient(g, &pass, &stats, &len_f, |g, i, dx| {
            store_outputs(g, key, (root, outputs), i, dx)
        });
    } else {
        pass(g, &|g, i, v, _| {
            let y = stats.normalised(g, v);
            store_outputs(g, key, (root, outputs), i, &y);
        });
    }
    let entry = Entry {
        workgroup_size: WORKGROUP_SIZE as usize,
        per_invocation: true,
        count: Expr::count(rows),
        arrays: Vec::new(),
        subgroup_id: false,
    };
    (
        entry,
        g.body().to_vec(),
        rows.div_ceil(WORKGROUP_SIZE as usize),
    )
}

/// Runs one pass over the row: `body` at each element.
type Pass<'a> = dyn Fn(&mut Gen, &PassBody<'_>) + 'a;

/// A row's mean and reciprocal standard deviation.
struct RowStats {
    mean: Expr,
    rstd: Expr,
}

impl RowStats {
    /// `(v - mean) * rstd`.
    fn normalised(&self, g: &mut Gen, v: &Expr) -> Expr {
        let d = g.emit(
            "d",
            Ty::F32,
            f32_op(BinaryOp::Sub, v.clone(), self.mean.clone()),
        );
        g.emit("xh", Ty::F32, f32_op(BinaryOp::Mul, d, self.rstd.clone()))
    }
}

/// The row's mean, then its centred second moment (two passes).
///
/// The mean is `shift + sum(v - shift) / len`, `shift` being the row's
/// first element: a constant row then has a mean equal to its elements
/// whatever the driver does with the division (NVIDIA's Vulkan driver
/// multiplies by a reciprocal, within the 2.5 ulp Vulkan allows, and
/// fuses `v - s * (1 / len)` into one FMA, which left `3 - 15 / 5` at
/// -4.5e-8 and a normalised constant row at -1.4e-5 where PyTorch has 0);
/// the shift also keeps the sum small where a row sits far from zero.
fn row_stats(g: &mut Gen, pass: &Pass<'_>, len_f: &Expr, eps: Expr, shift: Expr) -> RowStats {
    let s = g.accumulator("s");
    pass(g, &|g, _, v, _| {
        let d = g.emit(
            "d",
            Ty::F32,
            f32_op(BinaryOp::Sub, v.clone(), shift.clone()),
        );
        g.accumulate(&s, d)
    });
    let ms = g.emit("ms", Ty::F32, f32_op(BinaryOp::Div, s, len_f.clone()));
    let mean = g.emit("mean", Ty::F32, f32_op(BinaryOp::Add, shift, ms));
    let q = g.accumulator("q");
    pass(g, &|g, _, v, _| {
        let d = g.emit("d", Ty::F32, f32_op(BinaryOp::Sub, v.clone(), mean.clone()));
        let dd = g.emit("dd", Ty::F32, f32_op(BinaryOp::Mul, d.clone(), d));
        g.accumulate(&q, dd);
    });
    let var = g.emit("var", Ty::F32, f32_op(BinaryOp::Div, q, len_f.clone()));
    let var_eps = g.emit("ve", Ty::F32, f32_op(BinaryOp::Add, var, eps));
    let rstd = g.emit("rstd", Ty::F32, f32_unary(UnaryOp::Rsqrt, var_eps));
    RowStats { mean, rstd }
}

/// The gradient with respect to x, `rstd * (gy - mean(gy) - xhat *
/// mean(gy * xhat))`: a pass for the two means, a pass that writes it
/// (`store` at each element).
fn write_gradient(
    g: &mut Gen,
    pass: &Pass<'_>,
    stats: &RowStats,
    len_f: &Expr,
    store: impl Fn(&mut Gen, &Expr, &Expr),
) {
    let (sg, sgx) = (g.accumulator("sg"), g.accumulator("sgx"));
    pass(g, &|g, _, v, gv| {
        let gv = gv.expect("backward reads gy");
        g.accumulate(&sg, gv.clone());
        let xh = stats.normalised(g, v);
        let t = g.emit("t", Ty::F32, f32_op(BinaryOp::Mul, gv.clone(), xh));
        g.accumulate(&sgx, t);
    });
    let mg = g.emit("mg", Ty::F32, f32_op(BinaryOp::Div, sg, len_f.clone()));
    let mgx = g.emit("mgx", Ty::F32, f32_op(BinaryOp::Div, sgx, len_f.clone()));
    pass(g, &|g, i, v, gv| {
        let gv = gv.expect("backward reads gy");
        let a = g.emit("a", Ty::F32, f32_op(BinaryOp::Sub, gv.clone(), mg.clone()));
        let xh = stats.normalised(g, v);
        let b = g.emit("b", Ty::F32, f32_op(BinaryOp::Mul, xh, mgx.clone()));
        let c = g.emit("c", Ty::F32, f32_op(BinaryOp::Sub, a, b));
        let dx = g.emit("dx", Ty::F32, f32_op(BinaryOp::Mul, stats.rstd.clone(), c));
        store(g, i, &dx);
    });
}

/// `a op b` on f32 values.
pub(super) fn f32_op(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::f32_binary(op, a, b, false)
}

/// `op x` on an f32 value.
pub(super) fn f32_unary(op: UnaryOp, x: Expr) -> Expr {
    Expr::f32_unary(op, x, false)
}
