//! Softmax and log-softmax kernels: a row per invocation (vec4 or not)
//! or a row per workgroup (see `SoftmaxStrategy`), with PyTorch's NaN
//! rules for rows holding NaN or infinities.

use super::emit::Gen;
use super::reduce_ir::{strided_within, workgroup_tree};
use super::vectorize::vectorizable;
use super::wgsl::{WORKGROUP_SIZE, unroll_guarded};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::{BinaryOp, UnaryOp};
use crate::kernel::ir::{Arith, Expr, Inst, Ty, Var};
use crate::kernel::{Entry, WorkgroupArray};
use crate::kernel::{GPU_ROW_MIN, SoftmaxStrategy, Sz, choose_softmax, softmax_candidates};

use super::norm::{f32_op, f32_unary};
use super::roots::{RootBody, store_outputs, store_outputs_by};

pub(super) fn softmax(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    axis: usize,
    log: bool,
    outputs: &[usize],
) -> (RootBody, usize, bool, SoftmaxStrategy) {
    let x = key.nodes[root].inputs[0];
    let shape = key.nodes[x].shape.clone();
    // The sizes as the choices see them, dimensions of `x`; their values
    // are the kernel's literals.
    let len_sz = Sz::dim(x, axis, shape[axis]);
    let inner_sz = Sz::dims_product(x, &shape, axis + 1..shape.len());
    let rows_sz = Sz::dims_product(x, &shape, (0..shape.len()).filter(|&d| d != axis));
    let vectorizable = vectorizable(&key.nodes, x, g.stored, false, &mut g.guards);
    let precedent = g.context().precedent(root);
    let budget = g.context().target.loop_budget(1);
    g.candidates = softmax_candidates((&len_sz, &inner_sz), vectorizable, budget);
    let on_gpu = g.context().target.rows_per_workgroup;
    let strategy = if on_gpu
        && g.guards
            .at_least(&len_sz, GPU_ROW_MIN, "a softmax row a workgroup")
    {
        SoftmaxStrategy::RowPerWorkgroup
    } else {
        let sizes = (&len_sz, &rows_sz, &inner_sz);
        choose_softmax(sizes, vectorizable, precedent, (budget, &mut g.guards))
    };
    let groups = Entry::groups_for(rows_sz.literal());
    let ids = (root, x);
    let sizes = (&len_sz, &inner_sz, &rows_sz);
    let (entry, body, groups, vec_out) = match strategy {
        SoftmaxStrategy::RowPerInvocationVec4 => {
            let (entry, body, vec_out) =
                softmax_per_thread_vec4(g, key, ids, (&len_sz, &rows_sz), log, outputs);
            (entry, body, groups, vec_out)
        }
        SoftmaxStrategy::RowPerInvocation => {
            let (entry, body) = softmax_per_thread(g, key, ids, sizes, log, outputs);
            (entry, body, groups, false)
        }
        SoftmaxStrategy::RowPerWorkgroup => {
            let (entry, body) = softmax_per_workgroup(g, key, ids, sizes, log, outputs);
            (entry, body, rows_sz.literal(), false)
        }
    };
    ((entry, body), groups, vec_out, strategy)
}

/// A workgroup per row (`gi` indexes workgroups): its invocations stride
/// the row for its maximum, then for the sum of exponentials (each
/// combined by a tree in workgroup memory), then write the outputs.
fn softmax_per_workgroup(
    g: &mut Gen,
    key: &GraphKey,
    (root, x): (usize, usize),
    (len, inner, rows): (&Sz, &Sz, &Sz),
    log: bool,
    outputs: &[usize],
) -> (Entry, Vec<Inst>) {
    let wg = WORKGROUP_SIZE as usize;
    // Three passes over the row, each within its share of the budget.
    let pass = |g: &mut Gen, f: &dyn Fn(&mut Gen, &Expr, &Expr)| {
        strided_within(g, (&Expr::Local, &Sz::constant(wg), len), 3, &|g, k| {
            let Expr::Var(k) = g.emit("k", Ty::U32, k) else {
                unreachable!("emit binds a variable")
            };
            let i = g.emit("i", Ty::U32, row_element_at(len, inner, k));
            let v = g.value(x, &i, false, false);
            f(g, &i, &v);
        })
    };
    let partial = g.fresh("red_v");
    let m = g.variable("m", Expr::F32(f32::NEG_INFINITY.to_bits()));
    pass(g, &|g, _, v| {
        g.assign(&m, f32_op(BinaryOp::Maximum, m.clone(), v.clone()))
    });
    let m = workgroup_tree(g, partial, &m, BinaryOp::Maximum, wg);
    // The tree's result is read by all before the sum reuses the array.
    g.push(Inst::Barrier);
    let s = g.variable("s", Expr::F32(0.0f32.to_bits()));
    pass(g, &|g, _, v| {
        let d = g.emit("d", Ty::F32, f32_op(BinaryOp::Sub, v.clone(), m.clone()));
        let e = g.emit("e", Ty::F32, f32_unary(UnaryOp::Exp, d));
        g.accumulate(&s, e);
    });
    let s = workgroup_tree(g, partial, &s, BinaryOp::Add, wg);
    let bad = g.emit("bad", Ty::BOOL, row_is_bad(&m, &s));
    let ls = g.emit("ls", Ty::F32, f32_unary(UnaryOp::Log, s.clone()));
    pass(g, &|g, i, v| {
        let d = g.emit("d", Ty::F32, f32_op(BinaryOp::Sub, v.clone(), m.clone()));
        let y = if log {
            f32_op(BinaryOp::Sub, d, ls.clone())
        } else {
            let e = g.emit("e", Ty::F32, f32_unary(UnaryOp::Exp, d));
            f32_op(BinaryOp::Div, e, s.clone())
        };
        let y = g.emit("y", Ty::F32, y);
        let nan = Expr::F32(f32::NAN.to_bits());
        let r = g.emit("r", Ty::F32, Expr::select(bad.clone(), nan, y));
        store_outputs(g, key, (root, outputs), i, &r);
    });
    let entry = Entry {
        workgroup_size: wg,
        per_invocation: false,
        count: Expr::size_u32(rows),
        arrays: vec![WorkgroupArray {
            var: partial,
            element: Ty::F32,
            len: wg,
        }],
        subgroup_id: false,
    };
    (entry, g.take_body())
}

/// `softmax_per_thread` for rows along the last axis whose length is a
/// multiple of four, read as `vec4`s (and written as `vec4`s when the
/// softmax is the kernel's only output): on lavapipe every storage access
/// is a loop over the SIMD lanes, so a quarter of them is most of the
/// cost (4096x1024: 17-18 ms -> 8.6-9.4 ms, interleaved runs). Three
/// passes (max, sum of exponentials, write) take two exponentials an
/// element where the online pass took three. Returns the entry, the body
/// and whether the outputs are stored as `vec4`s.
fn softmax_per_thread_vec4(
    g: &mut Gen,
    key: &GraphKey,
    (root, x): (usize, usize),
    (len, rows): (&Sz, &Sz),
    log: bool,
    outputs: &[usize],
) -> (Entry, Vec<Inst>, bool) {
    let len4 = len.div(4);
    let v4 = Ty::of(DType::F32, true);
    let budget = g.context().target.loop_budget(3);
    let unroll = unroll_guarded(&len4, budget, &mut g.guards);
    let pass =
        |g: &mut Gen, f: &dyn Fn(&mut Gen, &Expr, &Expr)| vec4_row_pass(g, (x, &len4, unroll), f);
    let m4 = g.variable_of("mx", v4, splat(Expr::F32(f32::NEG_INFINITY.to_bits())));
    pass(g, &|g, _, v| {
        g.assign(&m4, vec_op(BinaryOp::Maximum, m4.clone(), v.clone()))
    });
    let m = max_of_lanes(g, &m4);
    let s4 = g.variable_of("sx", v4, splat(Expr::F32(0.0f32.to_bits())));
    pass(g, &|g, _, v| {
        let d = g.emit("d", v4, vec_op(BinaryOp::Sub, v.clone(), splat(m.clone())));
        let e = g.emit("e", v4, vec_unary(UnaryOp::Exp, d));
        g.accumulate(&s4, e);
    });
    let s = g.emit("s", Ty::F32, sum_of_lanes(&s4));
    let ls = g.emit("ls", Ty::F32, f32_unary(UnaryOp::Log, s.clone()));
    let one = Expr::F32(1.0f32.to_bits());
    let rs = g.emit("rs", Ty::F32, f32_op(BinaryOp::Div, one, s.clone()));
    let bad = g.emit("bad", Ty::BOOL, row_is_bad(&m, &s));
    let whole_vec4 = outputs == [root] && key.nodes[root].dtype == DType::F32;
    pass(g, &|g, i, v| {
        let d = g.emit("d", v4, vec_op(BinaryOp::Sub, v.clone(), splat(m.clone())));
        let y = if log {
            vec_op(BinaryOp::Sub, d, splat(ls.clone()))
        } else {
            let e = g.emit("e", v4, vec_unary(UnaryOp::Exp, d));
            vec_op(BinaryOp::Mul, e, splat(rs.clone()))
        };
        let y = g.emit("y", v4, y);
        let nan = splat(Expr::F32(f32::NAN.to_bits()));
        let y = g.emit("y", v4, Expr::select(bad.clone(), nan, y));
        store_vec4(g, key, (root, outputs), (i, &y), whole_vec4);
    });
    let entry = Entry::per_invocation_of(rows);
    (entry, g.take_body(), whole_vec4)
}

/// One pass of `softmax_per_thread_vec4` over the row of `x` (`len4`
/// vec4s): runs `f` with the vec4 index `i` and group `v` read there.
fn vec4_row_pass(
    g: &mut Gen,
    (x, len4, unroll): (usize, &Sz, usize),
    f: &dyn Fn(&mut Gen, &Expr, &Expr),
) {
    let counter = g.fresh("k");
    let body = g.block(|g| {
        let start = Expr::arith(Arith::Mul, Expr::Invocation, Expr::size_u32(len4));
        let at = Expr::arith(Arith::Add, start, Expr::Var(counter));
        let i = g.emit("i", Ty::U32, at);
        let v = g.value(x, &i, false, true);
        f(g, &i, &v);
    });
    g.push(Inst::Loop {
        counter,
        count: Expr::size_u32(len4),
        unroll,
        body,
    });
}

/// The row's maximum from the lanes of the vec4 maxima `m4`, in pairs:
/// NaN-propagating maxima repeat their operands, so each pair is a value.
fn max_of_lanes(g: &mut Gen, m4: &Expr) -> Expr {
    let low = g.emit(
        "m",
        Ty::F32,
        f32_op(BinaryOp::Maximum, lane(m4, 0), lane(m4, 1)),
    );
    let high = g.emit(
        "m",
        Ty::F32,
        f32_op(BinaryOp::Maximum, lane(m4, 2), lane(m4, 3)),
    );
    g.emit("m", Ty::F32, f32_op(BinaryOp::Maximum, low, high))
}

/// The sum of the lanes of `s4`, pairwise.
fn sum_of_lanes(s4: &Expr) -> Expr {
    let add = |a: Expr, b: Expr| f32_op(BinaryOp::Add, a, b);
    add(add(lane(s4, 0), lane(s4, 1)), add(lane(s4, 2), lane(s4, 3)))
}

/// Stores the outputs at vec4 index `i`, the softmax there being `y`:
/// as one vec4 when `whole_vec4`, else lane by lane at the four element
/// indices.
fn store_vec4(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    (i, y): (&Expr, &Expr),
    whole_vec4: bool,
) {
    if whole_vec4 {
        store_outputs_by(g, key, (root, outputs), (i, true), y);
        return;
    }
    for q in 0..4 {
        let at = Expr::arith(Arith::Mul, i.clone(), Expr::U32(4));
        let idx = g.emit("idx", Ty::U32, Expr::arith(Arith::Add, at, Expr::U32(q)));
        let result = g.emit("r", Ty::F32, lane(y, q));
        store_outputs(g, key, (root, outputs), &idx, &result);
    }
}

/// `e` in all four lanes of a `vec4<f32>`.
fn splat(e: Expr) -> Expr {
    Expr::Construct {
        ty: Ty::of(DType::F32, true),
        x: Box::new(e),
    }
}

/// Lane `q` of the vec4 `e`.
fn lane(e: &Expr, q: u64) -> Expr {
    Expr::index(e.clone(), Expr::U32(q))
}

/// `a op b` on `vec4<f32>` values.
fn vec_op(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::f32_binary(op, a, b, true)
}

/// `op x` on a `vec4<f32>` value.
fn vec_unary(op: UnaryOp, x: Expr) -> Expr {
    Expr::f32_unary(op, x, true)
}

/// Element `k` of row `gi` of rows of `len` elements `inner` apart:
/// `((gi / inner) * len + k) * inner + gi % inner`.
fn row_element_at(len: &Sz, inner: &Sz, k: Var) -> Expr {
    let row = Expr::arith(Arith::Div, Expr::Invocation, Expr::size_u32(inner));
    let start = Expr::arith(Arith::Mul, row, Expr::size_u32(len));
    let along = Expr::arith(Arith::Add, start, Expr::Var(k));
    let offset = Expr::arith(Arith::Rem, Expr::Invocation, Expr::size_u32(inner));
    Expr::arith(
        Arith::Add,
        Expr::arith(Arith::Mul, along, Expr::size_u32(inner)),
        offset,
    )
}

/// Whether a row whose maximum is `m` and whose sum of exponentials is
/// `s` has NaN for its outputs, as in PyTorch: `m` not finite (a NaN or
/// +inf in the row) or `s` not positive (a row of -inf).
fn row_is_bad(m: &Expr, s: &Expr) -> Expr {
    let nonfinite = Expr::IsNonFinite {
        x: Box::new(m.clone()),
        vec: false,
    };
    let positive = Expr::arith(Arith::Lt, Expr::F32(0.0f32.to_bits()), s.clone());
    Expr::arith(Arith::Or, nonfinite, Expr::Not(Box::new(positive)))
}

/// Softmax with one invocation per row, for many rows, built as IR: no
/// workgroup barriers (dear on CPU drivers such as lavapipe), and an
/// online max/sum pass (the running sum is rescaled when the max grows),
/// so the row is read twice instead of three times.
fn softmax_per_thread(
    g: &mut Gen,
    key: &GraphKey,
    (root, x): (usize, usize),
    (len, inner, rows): (&Sz, &Sz, &Sz),
    log: bool,
    outputs: &[usize],
) -> (Entry, Vec<Inst>) {
    // Two passes over the row (the strategy is chosen only where they fit).
    let budget = g.context().target.loop_budget(2);
    let unroll = unroll_guarded(len, budget, &mut g.guards);
    let row_loop = |g: &mut Gen, f: &dyn Fn(&mut Gen, &Expr, &Expr)| {
        let counter = g.fresh("k");
        let body = g.block(|g| {
            let i = g.emit("i", Ty::U32, row_element_at(len, inner, counter));
            let v = g.value(x, &i, false, false);
            f(g, &i, &v);
        });
        g.push(Inst::Loop {
            counter,
            count: Expr::size_u32(len),
            unroll,
            body,
        });
    };
    // The running max starts at the lowest finite value, so that
    // exp(m - mn) is never NaN.
    let m = g.variable("m", Expr::F32(f32::MIN.to_bits()));
    let s = g.variable("s", Expr::F32(0.0f32.to_bits()));
    row_loop(g, &|g, _, v| {
        let mn = g.emit(
            "mn",
            Ty::F32,
            f32_op(BinaryOp::Maximum, m.clone(), v.clone()),
        );
        let dm = g.emit("dm", Ty::F32, f32_op(BinaryOp::Sub, m.clone(), mn.clone()));
        let corr = g.emit("corr", Ty::F32, f32_unary(UnaryOp::Exp, dm));
        let dv = g.emit("dv", Ty::F32, f32_op(BinaryOp::Sub, v.clone(), mn.clone()));
        let p = g.emit("p", Ty::F32, f32_unary(UnaryOp::Exp, dv));
        let scaled = g.emit("sc", Ty::F32, f32_op(BinaryOp::Mul, s.clone(), corr));
        g.assign(&s, f32_op(BinaryOp::Add, scaled, p));
        g.assign(&m, mn);
    });
    let ls = g.emit("ls", Ty::F32, f32_unary(UnaryOp::Log, s.clone()));
    let one = Expr::F32(1.0f32.to_bits());
    let rs = g.emit("rs", Ty::F32, f32_op(BinaryOp::Div, one, s.clone()));
    let bad = g.emit("bad", Ty::BOOL, row_is_bad(&m, &s));
    row_loop(g, &|g, i, v| {
        let d = g.emit("d", Ty::F32, f32_op(BinaryOp::Sub, v.clone(), m.clone()));
        let y = if log {
            g.emit("y", Ty::F32, f32_op(BinaryOp::Sub, d, ls.clone()))
        } else {
            let e = g.emit("e", Ty::F32, f32_unary(UnaryOp::Exp, d));
            g.emit("y", Ty::F32, f32_op(BinaryOp::Mul, e, rs.clone()))
        };
        let nan = Expr::F32(f32::NAN.to_bits());
        let r = g.emit("r", Ty::F32, Expr::select(bad.clone(), nan, y));
        store_outputs(g, key, (root, outputs), i, &r);
    });
    let entry = Entry::per_invocation_of(rows);
    (entry, g.take_body())
}
