//! Reduction kernels: a workgroup tree per output, or the vec4 first
//! stage of a split sum (see `ReduceStrategy`); one invocation per output
//! is built as IR (`reduce_ir`).

use std::fmt::Write;

use super::emit::Gen;
use super::exprs::{is_nan, nan_extremum, value_type};
use super::wgsl::{WORKGROUP_SIZE, bounded_loop, kernel_main, vectorizable};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::ReduceOp;
use crate::kernel::ir::{Expr, Ty};
use crate::kernel::{ReduceShape, ReduceStrategy, choose_reduce};
use crate::shape::numel;

use super::reduce_ir::{Reduction, reduce_per_invocation, split_index};
use super::roots::{RootBody, stores};

fn identity(op: ReduceOp, dtype: DType) -> String {
    match (op, dtype.compute()) {
        (ReduceOp::Sum, d) => format!("{}(0)", d.wgsl_value_type()),
        (ReduceOp::Prod, d) => format!("{}(1)", d.wgsl_value_type()),
        // Floats start from the table's identity (infinities by their bits).
        (op, DType::F32) => format!("bitcast<f32>({:#010x}u)", (op.identity() as f32).to_bits()),
        (ReduceOp::Max | ReduceOp::ArgMax, DType::I32) => "bitcast<i32>(0x80000000u)".into(),
        (ReduceOp::Max | ReduceOp::ArgMax, _) => "0u".into(),
        (ReduceOp::Min | ReduceOp::ArgMin, DType::I32) => "bitcast<i32>(0x7fffffffu)".into(),
        (ReduceOp::Min | ReduceOp::ArgMin, _) => "0xffffffffu".into(),
    }
}

/// `acc = combine(acc, v)`; for arg ops also the index (`best`, `r`), ties
/// going to the smaller index (PyTorch returns the first extremum). On
/// f32, NaN wins as in PyTorch: `amax`/`amin` are NaN where any element
/// is, and the arg ops return the index of the first NaN.
fn combine(op: ReduceOp, dtype: DType, acc: &str, best: &str, v: &str, r: &str) -> String {
    let float = dtype.is_float();
    let arg = |cmp: &str| {
        let plain = format!("{v} {cmp} {acc} || ({v} == {acc} && {r} < {best})");
        let cond = if float {
            let (v_nan, acc_nan) = (is_nan(v, false), is_nan(acc, false));
            format!("({v_nan} && (!{acc_nan} || {r} < {best})) || (!{acc_nan} && ({plain}))")
        } else {
            plain
        };
        format!("if ({cond}) {{ {acc} = {v}; {best} = {r}; }}")
    };
    match op {
        ReduceOp::Sum => format!("{acc} = {acc} + {v};"),
        ReduceOp::Prod => format!("{acc} = {acc} * {v};"),
        ReduceOp::Max if float => format!("{acc} = {};", nan_extremum("max", acc, v, false)),
        ReduceOp::Min if float => format!("{acc} = {};", nan_extremum("min", acc, v, false)),
        ReduceOp::Max => format!("{acc} = max({acc}, {v});"),
        ReduceOp::Min => format!("{acc} = min({acc}, {v});"),
        ReduceOp::ArgMax => arg(">"),
        ReduceOp::ArgMin => arg("<"),
    }
}

/// A loop running `body` for `var = start, start + step, ..` while `var < len`,
/// for a `start` in `[0, step)` that differs between lanes. Written as
/// `len / step` iterations every lane runs (a loop count the compiler
/// sees is uniform) plus one guarded tail, instead of a loop whose bound
/// differs between lanes: on lavapipe that made a 16M-element sum 2x
/// slower (a probe of both forms: 16 vs 8 ms). The same elements in the
/// same order either way.
/// The loop takes the kernel's whole loop budget (`bounded_loop`).
fn strided_loop(
    var: &str,
    start: &str,
    (step, len): (usize, usize),
    budget: Option<usize>,
    body: &str,
) -> String {
    let full = len / step;
    let mut code = format!("{{\n    let {var}0 = {start};\n");
    code.push_str(&bounded_loop(
        ("j", "0u", &format!("{full}u"), "1u"),
        full,
        budget,
        &format!("    let {var} = {var}0 + j * {step}u;\n{body}"),
    ));
    if !len.is_multiple_of(step) {
        let _ = write!(
            code,
            "    let {var} = {var}0 + {}u;\n    if ({var} < {len}u) {{\n{body}    }}\n",
            full * step
        );
    }
    code.push_str("    }\n");
    code
}

/// The first stage of a split sum (see `Op::Reduce`: part `p` takes the
/// groups of four elements `p, p + parts, ..`) reading each group as one
/// `vec4`, one invocation per part: on lavapipe, where every storage load
/// is a loop over the SIMD lanes, a probe of 16M f32 read in 8 ms this way
/// against 18 ms one element at a time (`ReduceStrategy::SumByFours`, see
/// `choose_reduce` for where it applies).
fn sum_by_fours(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    axes: &[usize],
    parts: usize,
    outputs: &[usize],
) -> String {
    let x = key.nodes[root].inputs[0];
    let in_shape = &key.nodes[x].shape;
    let reduced: usize = axes.iter().map(|&d| in_shape[d]).product();
    let dtype = key.nodes[x].dtype;
    let total = numel(&key.nodes[root].shape);
    let load = g.scoped(|g| {
        let i = g.emit(
            "i",
            Ty::U32,
            Expr::template(format!("o * {}u + r4", reduced / 4)),
        );
        let v = g.value(x, &i, false, true);
        let _ = writeln!(g, "        acc = acc + {v};");
    });
    let st = stores(g, key, (root, outputs), "gi", "result");
    let vt = value_type(dtype, true);
    let result_ty = value_type(key.nodes[root].dtype, false);
    format!(
        "\n{head}\
         let o = gi / {parts}u;\n\
         var acc = {vt}();\n\
         {lp}\
         let result: {result_ty} = (acc.x + acc.y) + (acc.z + acc.w);\n{st}}}\n",
        head = kernel_main(WORKGROUP_SIZE as usize, true, total, ""),
        lp = strided_loop(
            "r4",
            &format!("gi % {parts}u"),
            (parts, reduced / 4),
            g.context().target.loop_budget(1),
            &load
        ),
    )
}

pub(super) fn reduce(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    op: ReduceOp,
    axes: &[usize],
    parts: usize,
    outputs: &[usize],
) -> (RootBody, usize, ReduceStrategy) {
    let x = key.nodes[root].inputs[0];
    let in_shape = key.nodes[x].shape.clone();
    let in_dtype = key.nodes[x].dtype;
    let vt = in_dtype.wgsl_value_type();
    let reduced: usize = axes.iter().map(|&d| in_shape[d]).product();
    let outer: usize = (0..in_shape.len())
        .filter(|d| !axes.contains(d))
        .map(|d| in_shape[d])
        .product();
    let total = outer * parts;
    let arg = op.is_arg();
    let id = identity(op, in_dtype);
    let rank = in_shape.len();
    let strategy = choose_reduce(
        ReduceShape {
            op,
            dtype: in_dtype,
            reduced,
            parts,
            trailing: axes
                .iter()
                .enumerate()
                .all(|(i, &d)| d == rank - axes.len() + i),
            vectorizable: vectorizable(&key.nodes, x, g.stored, false),
        },
        g.context().precedent(root),
        g.context().target.loop_budget(1),
    );
    let groups = total.div_ceil(WORKGROUP_SIZE as usize);
    if strategy == ReduceStrategy::SumByFours {
        let main = sum_by_fours(g, key, root, axes, parts, outputs);
        return (RootBody::Text(main), groups, strategy);
    }
    if strategy == ReduceStrategy::PerInvocation {
        let red = Reduction {
            root,
            op,
            axes,
            parts,
            outputs,
        };
        let (entry, body) = reduce_per_invocation(g, key, &red);
        return (RootBody::Ir(entry, body), groups, strategy);
    }
    let (o, r) = (Expr::template("o"), Expr::template("r"));
    let index = split_index(&in_shape, axes, &o, &r);
    let element = g.scoped(|g| {
        let i = g.emit("i", Ty::U32, index.clone());
        let v = g.value(x, &i, false, false);
        let _ = writeln!(
            g,
            "        {}",
            combine(op, in_dtype, "acc", "best", &v.to_string(), "r")
        );
    });
    // Split reductions step over groups of four elements (`r4`); plain
    // ones over elements (`r`).
    let (var, steps, load) = if parts > 1 {
        let mut load = String::new();
        for q in 0..4 {
            let guard = if reduced.is_multiple_of(4) {
                String::new()
            } else {
                format!("if (r < {reduced}u) ")
            };
            let _ = writeln!(
                load,
                "    {{ let r = r4 * 4u + {q}u; {guard}{{\n{element}    }} }}"
            );
        }
        ("r4", reduced.div_ceil(4), load)
    } else {
        ("r", reduced, element)
    };
    let result_expr = if arg {
        "i32(best)".to_string()
    } else {
        "acc".to_string()
    };
    let result_ty = value_type(key.nodes[root].dtype, false);
    // Long reductions: a workgroup per output, threads striding the
    // chunk, then a tree.
    let st = stores(g, key, (root, outputs), "gi", "result");
    let merge = combine(
        op,
        in_dtype,
        "red_v[lid]",
        "red_i[lid]",
        "red_v[lid + s]",
        "red_i[lid + s]",
    );
    let main = format!(
        "\nvar<workgroup> red_v: array<{vt}, {WORKGROUP_SIZE}>;\n\
         var<workgroup> red_i: array<u32, {WORKGROUP_SIZE}>;\n\
         {head}\
         let o = gi / {parts}u;\n\
         var acc: {vt} = {id};\n\
         var best: u32 = 0xffffffffu;\n\
         {lp}\
         red_v[lid] = acc;\n\
         red_i[lid] = best;\n\
         workgroupBarrier();\n\
         for (var s = {half}u; s > 0u; s = s >> 1u) {{\n\
             if (lid < s) {{ {merge} }}\n\
             workgroupBarrier();\n\
         }}\n\
         if (lid == 0u) {{\n\
             acc = red_v[0];\n\
             best = red_i[0];\n\
             let result: {result_ty} = {result_expr};\n{st}    }}\n}}\n",
        half = WORKGROUP_SIZE / 2,
        head = kernel_main(WORKGROUP_SIZE as usize, false, total, ""),
        lp = strided_loop(
            var,
            &format!("gi % {parts}u + lid * {parts}u"),
            (WORKGROUP_SIZE as usize * parts, steps),
            g.context().target.loop_budget(1),
            &load
        ),
    );
    (RootBody::Text(main), total, strategy)
}
