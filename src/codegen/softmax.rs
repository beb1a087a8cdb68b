//! Softmax and log-softmax kernels: a row per invocation (vec4 or not)
//! or a row per workgroup (see `SoftmaxStrategy`), with PyTorch's NaN
//! rules for rows holding NaN or infinities.

use std::fmt::Write;

use super::emit::Gen;
use super::exprs::{nan_extremum, softmax_guard};
use super::wgsl::{WORKGROUP_SIZE, bounded_loop, kernel_main, unroll_for, vectorizable};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::{BinaryOp, UnaryOp};
use crate::kernel::Entry;
use crate::kernel::ir::{Arith, Expr, Inst, Ty, Var};
use crate::kernel::{SoftmaxStrategy, choose_softmax};
use crate::shape::numel;

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
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let rows = numel(&shape) / len.max(1);
    let vectorizable = vectorizable(&key.nodes, x, g.stored, false);
    let precedent = g.context().precedent(root);
    let budget = g.context().target.loop_budget(1);
    let strategy = choose_softmax((len, rows, inner), vectorizable, precedent, budget);
    match strategy {
        SoftmaxStrategy::RowPerInvocationVec4 => {
            let (main, groups, vec_out) =
                softmax_per_thread_vec4(g, key, root, x, (len, rows), log, outputs);
            return (RootBody::Text(main), groups, vec_out, strategy);
        }
        SoftmaxStrategy::RowPerInvocation => {
            let (entry, body) =
                softmax_per_thread(g, key, (root, x), (len, inner, rows), log, outputs);
            let groups = rows.div_ceil(WORKGROUP_SIZE as usize);
            return (RootBody::Ir(entry, body), groups, false, strategy);
        }
        SoftmaxStrategy::RowPerWorkgroup => {}
    }
    let main = softmax_per_workgroup(g, key, root, x, (len, inner, rows), log, outputs);
    (RootBody::Text(main), rows, false, strategy)
}

/// Element `k` of row `gi` of rows of `len` elements `inner` apart.
fn row_element(len: usize, inner: usize) -> String {
    format!("((gi / {inner}u) * {len}u + k) * {inner}u + gi % {inner}u")
}

/// A workgroup per row: threads stride the row for its maximum, then the
/// sum of exponentials (each combined by a tree in workgroup memory), then
/// write the outputs.
fn softmax_per_workgroup(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    x: usize,
    (len, inner, rows): (usize, usize, usize),
    log: bool,
    outputs: &[usize],
) -> String {
    let at = row_element(len, inner);
    let pass = |g: &mut Gen, tail: &dyn Fn(&mut Gen, &Expr, &Expr)| {
        g.scoped(|g| {
            let i = g.emit("i", Ty::U32, Expr::template(at.clone()));
            let v = g.value(x, &i, false, false);
            tail(g, &i, &v);
        })
    };
    let max_loop = pass(g, &|g, _, v| {
        let _ = writeln!(
            g,
            "        m = {};",
            nan_extremum("max", "m", &v.to_string(), false)
        );
    });
    let sum_loop = pass(g, &|g, _, v| {
        let _ = writeln!(g, "        s = s + exp({v} - m);");
    });
    let write_loop = pass(g, &|g, i, v| {
        let expr = if log {
            format!("({v} - m) - log(s)")
        } else {
            format!("exp({v} - m) / s")
        };
        let result = g.emit(
            "y",
            Ty::F32,
            Expr::template(softmax_guard(&expr, "m", "s", false)),
        );
        store_outputs(g, key, (root, outputs), i, &result);
    });
    let half = WORKGROUP_SIZE / 2;
    // Three passes over the row, each within its share of the budget.
    let budget = g.context().target.loop_budget(3);
    let len_u = format!("{len}u");
    let stride = format!("{WORKGROUP_SIZE}u");
    let row_loop = |body: &str| {
        bounded_loop(
            ("k", "lid", &len_u, &stride),
            len.div_ceil(WORKGROUP_SIZE as usize),
            budget,
            body,
        )
    };
    let tree = |op: &str| {
        format!(
            "    red_v[lid] = {op};\n    workgroupBarrier();\n    \
             for (var t = {half}u; t > 0u; t = t >> 1u) {{\n        \
             if (lid < t) {{ red_v[lid] = {}; }}\n        workgroupBarrier();\n    }}\n",
            if op == "m" {
                nan_extremum("max", "red_v[lid]", "red_v[lid + t]", false)
            } else {
                "red_v[lid] + red_v[lid + t]".to_string()
            }
        )
    };
    format!(
        "\nvar<workgroup> red_v: array<f32, {WORKGROUP_SIZE}>;\n\
         {}\
         var m = bitcast<f32>(0xff800000u);\n\
         {}\
         {}    m = red_v[0];\n    workgroupBarrier();\n\
         var s = 0.0;\n\
         {}\
         {}    s = red_v[0];\n\
         {}}}\n",
        kernel_main(WORKGROUP_SIZE as usize, false, rows, ""),
        row_loop(&max_loop),
        tree("m"),
        row_loop(&sum_loop),
        tree("s"),
        row_loop(&write_loop),
    )
}

/// `softmax_per_thread` for rows along the last axis whose length is a
/// multiple of four, read as `vec4`s (and written as `vec4`s when the
/// softmax is the kernel's only output): on lavapipe every storage access
/// is a loop over the SIMD lanes, so a quarter of them is most of the
/// cost (4096x1024: 17-18 ms -> 8.6-9.4 ms, interleaved runs). Three
/// passes (max, sum of exponentials, write) take two exponentials an
/// element where the online pass took three. Returns whether the outputs
/// are stored as `vec4`s.
fn softmax_per_thread_vec4(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    x: usize,
    (len, rows): (usize, usize),
    log: bool,
    outputs: &[usize],
) -> (String, usize, bool) {
    let len4 = len / 4;
    // Each pass reads group `k` of the row as `v` at vec4 index `i`.
    let pass = |g: &mut Gen, f: &dyn Fn(&mut Gen, &Expr, &Expr)| {
        g.scoped(|g| {
            let i = g.emit("i", Ty::U32, Expr::template(format!("gi * {len4}u + k")));
            let v = g.value(x, &i, false, true);
            f(g, &i, &v);
        })
    };
    let max_pass = pass(g, &|g, _, v| {
        let _ = writeln!(
            g,
            "        m4 = {};",
            nan_extremum("max", "m4", &v.to_string(), true)
        );
    });
    let sum_pass = pass(g, &|g, _, v| {
        let _ = writeln!(g, "        s4 = s4 + exp({v} - vec4<f32>(m));");
    });
    let whole_vec4 = outputs == [root] && key.nodes[root].dtype == DType::F32;
    let write_pass = pass(g, &|g, i, v| {
        let expr = if log {
            format!("({v} - vec4<f32>(m)) - vec4<f32>(ls)")
        } else {
            format!("exp({v} - vec4<f32>(m)) * rs")
        };
        let y = g.emit(
            "y",
            Ty::of(DType::F32, true),
            Expr::template(softmax_guard(&expr, "m", "s", true)),
        );
        if whole_vec4 {
            store_outputs_by(g, key, (root, outputs), (i, true), &y);
            return;
        }
        for q in 0..4 {
            let idx = g.emit("idx", Ty::U32, Expr::template(format!("{i} * 4u + {q}u")));
            let result = g.emit("r", Ty::F32, Expr::template(format!("{y}[{q}]")));
            store_outputs(g, key, (root, outputs), &idx, &result);
        }
    });
    let main = format!(
        "\n{head}\
         var m4 = vec4<f32>(bitcast<f32>(0xff800000u));\n\
         for (var k = 0u; k < {len4}u; k = k + 1u) {{\n{max_pass}    }}\n\
         let m = {m};\n\
         var s4 = vec4<f32>(0.0);\n\
         for (var k = 0u; k < {len4}u; k = k + 1u) {{\n{sum_pass}    }}\n\
         let s = (s4.x + s4.y) + (s4.z + s4.w);\n\
         let ls = log(s);\n\
         let rs = 1.0 / s;\n\
         for (var k = 0u; k < {len4}u; k = k + 1u) {{\n{write_pass}    }}\n}}\n",
        head = kernel_main(WORKGROUP_SIZE as usize, true, rows, ""),
        m = nan_extremum(
            "max",
            &nan_extremum("max", "m4.x", "m4.y", false),
            &nan_extremum("max", "m4.z", "m4.w", false),
            false
        ),
    );
    (main, rows.div_ceil(WORKGROUP_SIZE as usize), whole_vec4)
}

/// Element `k` of row `gi` of rows of `len` elements `inner` apart:
/// `((gi / inner) * len + k) * inner + gi % inner`.
fn row_element_at(len: usize, inner: usize, k: Var) -> Expr {
    let row = Expr::arith(Arith::Div, Expr::Invocation, Expr::U32(inner as u64));
    let start = Expr::arith(Arith::Mul, row, Expr::U32(len as u64));
    let along = Expr::arith(Arith::Add, start, Expr::Var(k));
    let offset = Expr::arith(Arith::Rem, Expr::Invocation, Expr::U32(inner as u64));
    Expr::arith(
        Arith::Add,
        Expr::arith(Arith::Mul, along, Expr::U32(inner as u64)),
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
    (len, inner, rows): (usize, usize, usize),
    log: bool,
    outputs: &[usize],
) -> (Entry, Vec<Inst>) {
    // Two passes over the row (the strategy is chosen only where they fit).
    let unroll = unroll_for(len, g.context().target.loop_budget(2));
    let row_loop = |g: &mut Gen, f: &dyn Fn(&mut Gen, &Expr, &Expr)| {
        let counter = g.fresh("k");
        let body = g.block(|g| {
            let i = g.emit("i", Ty::U32, row_element_at(len, inner, counter));
            let v = g.value(x, &i, false, false);
            f(g, &i, &v);
        });
        g.push(Inst::Loop {
            counter,
            count: len,
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
    let entry = Entry::Main {
        workgroup_size: WORKGROUP_SIZE as usize,
        per_invocation: true,
        count: rows,
        arrays: Vec::new(),
        subgroup_id: false,
    };
    (entry, g.body().to_vec())
}
