//! Row normalisation (the core of layer norm) and its gradient: one
//! invocation per row of the last axis, which reads the row three times
//! (mean, centred second moment, write) forward and four times backward.
//! Rows of a layer norm are short (the model width), so a row stays in
//! cache and no workgroup barrier is needed (they are dear on CPU drivers).

use std::fmt::Write;

use super::emit::Gen;
use super::roots::store_outputs;
use super::wgsl::{WORKGROUP_SIZE, bounded_loop, kernel_main};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::kernel::ir::{Expr, Ty};
use crate::shape::numel;

/// What one pass does with (generator, element index, x there, gy there).
type PassBody<'a> = dyn Fn(&mut Gen, &Expr, &Expr, Option<&Expr>) + 'a;

/// The kernel of `Normalize` (or `NormalizeBackward` when `backward`) at
/// `root`, whose `eps` is parameter word `eps_slot`. Returns the body and
/// the workgroup count.
pub(super) fn normalize(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    eps_slot: usize,
    backward: bool,
    outputs: &[usize],
) -> (String, usize) {
    let inputs = key.nodes[root].inputs.clone();
    let x = inputs[0];
    let shape = &key.nodes[x].shape;
    let len = shape.last().copied().unwrap_or(1);
    let rows = numel(shape) / len.max(1);
    let at = format!("gi * {len}u + k");
    let eps = g.param(eps_slot, DType::F32);
    // Each pass reads x (and gy) at element k of row gi, then runs `f`.
    let pass = |g: &mut Gen, f: &PassBody<'_>| {
        g.scoped(|g| {
            let i = g.emit("i", Ty::U32, Expr::template(at.clone()));
            let v = g.value(x, &i, false, false);
            let gv = backward.then(|| g.value(inputs[1], &i, false, false));
            f(g, &i, &v, gv.as_ref());
        })
    };
    let sum = pass(g, &|g, _, v, _| {
        let _ = writeln!(g, "        s = s + {v};");
    });
    let second = pass(g, &|g, _, v, _| {
        let _ = writeln!(g, "        let d = {v} - mean;\n        q = q + d * d;");
    });
    // Three passes over the row forward, four backward, each within its
    // share of the kernel's loop budget.
    let budget = g.context().target.loop_budget(if backward { 4 } else { 3 });
    let len_u = format!("{len}u");
    let row = |body: &str| bounded_loop(("k", "0u", &len_u, "1u"), len, budget, body);
    let (row_sum, row_second) = (row(&sum), row(&second));
    let stats = format!(
        "    var s = 0.0;\n{row_sum}\
         let mean = s / {len}.0;\n\
         var q = 0.0;\n{row_second}\
         let rstd = inverseSqrt(q / {len}.0 + {eps});\n"
    );
    let tail = if backward {
        let grads = pass(g, &|g, _, v, gv| {
            let gv = gv.expect("backward reads gy");
            let _ = writeln!(
                g,
                "        sg = sg + {gv};\n        sgx = sgx + {gv} * (({v} - mean) * rstd);"
            );
        });
        let write = pass(g, &|g, i, v, gv| {
            let gv = gv.expect("backward reads gy");
            let expr = format!("rstd * ({gv} - mg - (({v} - mean) * rstd) * mgx)");
            let dx = g.emit("dx", Ty::F32, Expr::template(expr.clone()));
            store_outputs(g, key, (root, outputs), i, &dx);
        });
        let (row_grads, row_write) = (row(&grads), row(&write));
        format!(
            "    var sg = 0.0;\n    var sgx = 0.0;\n\
         {row_grads}\
             let mg = sg / {len}.0;\n    let mgx = sgx / {len}.0;\n\
         {row_write}"
        )
    } else {
        let write = pass(g, &|g, i, v, _| {
            let y = g.emit("y", Ty::F32, Expr::template(format!("({v} - mean) * rstd")));
            store_outputs(g, key, (root, outputs), i, &y);
        });
        row(&write)
    };
    let main = format!(
        "\n{head}{stats}{tail}}}\n",
        head = kernel_main(WORKGROUP_SIZE as usize, true, rows, ""),
    );
    (main, rows.div_ceil(WORKGROUP_SIZE as usize))
}
