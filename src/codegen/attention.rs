//! Fused attention: one invocation per query row computes its scores
//! against every (unmasked) key, an online softmax (the running sum is
//! rescaled when the running max grows) and the weighted sum of the value
//! rows, so the `[L, S]` score matrix never goes through memory.

use std::fmt::Write;

use super::emit::Gen;
use super::exprs::nan_extremum;
use super::roots::store_outputs;
use super::wgsl::{WORKGROUP_SIZE, kernel_main};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::kernel::ir::{Expr, Ty};

/// The kernel of `Attention { causal }` at `root`, whose scale is
/// parameter word `scale_slot`. Returns the body and the workgroup count.
pub(super) fn attention(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    scale_slot: usize,
    causal: bool,
    outputs: &[usize],
) -> (String, usize) {
    let inputs = key.nodes[root].inputs.clone();
    let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
    let qs = &key.nodes[q].shape;
    let r = qs.len();
    let (l, e) = (qs[r - 2], qs[r - 1]);
    let s_len = key.nodes[k].shape[r - 2];
    let ev = key.nodes[v].shape[r - 1];
    let rows: usize = qs[..r - 2].iter().product::<usize>() * l;
    let scale = g.param(scale_slot, DType::F32);
    // Row gi is query i = gi % L of batch b = gi / L.
    let dot = g.scoped(|g| {
        let qi = g.emit("qi", Ty::U32, Expr::template(format!("gi * {e}u + t")));
        let ki = g.emit(
            "ki",
            Ty::U32,
            Expr::template(format!("(b * {s_len}u + j) * {e}u + t")),
        );
        let qv = g.value(q, &qi, false, false);
        let kv = g.value(k, &ki, false, false);
        let _ = writeln!(g, "            d = d + {qv} * {kv};");
    });
    let accumulate = g.scoped(|g| {
        let vi = g.emit(
            "vi",
            Ty::U32,
            Expr::template(format!("(b * {s_len}u + j) * {ev}u + c")),
        );
        let vv = g.value(v, &vi, false, false);
        let _ = writeln!(g, "            acc[c] = acc[c] * corr + p * {vv};");
    });
    let write = g.scoped(|g| {
        let idx = g.emit("idx", Ty::U32, Expr::template(format!("gi * {ev}u + c")));
        let y = g.emit("y", Ty::F32, Expr::template("acc[c] / s"));
        store_outputs(g, key, (root, outputs), &idx, &y);
    });
    let keys = if causal {
        format!("min(i + 1u, {s_len}u)")
    } else {
        format!("{s_len}u")
    };
    let main = format!(
        "\n{head}\
         let b = gi / {l}u;\n    let i = gi % {l}u;\n\
         var acc: array<f32, {ev}>;\n\
         // The lowest finite value, so that exp(m - mn) is never NaN.\n\
         var m = -3.4028235e38;\n    var s = 0.0;\n\
         for (var j = 0u; j < {keys}; j = j + 1u) {{\n\
         var d = 0.0;\n\
         for (var t = 0u; t < {e}u; t = t + 1u) {{\n{dot}        }}\n\
         let x = d * {scale};\n\
         let mn = {mx};\n\
         let corr = exp(m - mn);\n\
         let p = exp(x - mn);\n\
         s = s * corr + p;\n\
         for (var c = 0u; c < {ev}u; c = c + 1u) {{\n{accumulate}        }}\n\
         m = mn;\n    }}\n\
         for (var c = 0u; c < {ev}u; c = c + 1u) {{\n{write}    }}\n}}\n",
        head = kernel_main(WORKGROUP_SIZE as usize, true, rows, ""),
        mx = nan_extremum("max", "m", "x", false),
    );
    (main, rows.div_ceil(WORKGROUP_SIZE as usize))
}
