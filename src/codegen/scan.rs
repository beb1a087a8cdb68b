//! Running sums and products along one axis (`cumsum`, `cumprod`), built
//! as IR: an invocation per line along the axis, walking it once in order
//! (a linear scan), storing each running value and its epilogue as it
//! goes. The loop over the line stays within the kernel's loop budget
//! (unrolled copies past lavapipe's 65,535 iterations).

use super::emit::Gen;
use super::reduce_ir::{Combine, identity, split_index, strided};
use super::roots::store_outputs;
use super::wgsl::WORKGROUP_SIZE;
use crate::graph::GraphKey;
use crate::graph::op::ReduceOp;
use crate::kernel::Entry;
use crate::kernel::ir::{Expr, Inst, Ty};
use crate::shape::numel;

/// The kernel of `Scan { op, axis }` at `root`: its entry, body and the
/// number of invocations (one per line along `axis`).
pub(super) fn scan(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    (op, axis): (ReduceOp, usize),
    outputs: &[usize],
) -> (Entry, Vec<Inst>, usize) {
    let x = key.nodes[root].inputs[0];
    let shape = key.nodes[x].shape.clone();
    let dtype = key.nodes[x].dtype.compute();
    let len = shape[axis];
    let lines = numel(&shape) / len.max(1);
    let line = g.emit("o", Ty::U32, Expr::Invocation);
    let acc = g.variable_of("acc", Ty::scalar(dtype), identity(op, dtype));
    let best = Expr::U32(0);
    let cx = Combine {
        op,
        dtype,
        acc: &acc,
        best: &best,
    };
    let axes = [axis];
    strided(g, (&Expr::U32(0), 1, len), &|g, r| {
        let i = g.emit("i", Ty::U32, split_index(&shape, &axes, &line, &r));
        let v = g.value(x, &i, false, false);
        cx.combine(g, &v, &r);
        let running = g.emit("run", Ty::scalar(dtype), acc.clone());
        store_outputs(g, key, (root, outputs), &i, &running);
    });
    // Invocations past the last line (the grid is whole workgroups)
    // return at once (`per_invocation`).
    let entry = Entry {
        workgroup_size: WORKGROUP_SIZE as usize,
        per_invocation: true,
        count: Expr::count(lines),
        arrays: Vec::new(),
        subgroup_id: false,
    };
    (
        entry,
        g.body().to_vec(),
        lines.div_ceil(WORKGROUP_SIZE as usize),
    )
}
