//! Running sums and products along one axis (`cumsum`, `cumprod`), built
//! as IR: an invocation per line along the axis, walking it once in order
//! (a linear scan), storing each running value and its epilogue as it
//! goes; or, in graphs lowered for the GPU (`schedule::split_long_scans`),
//! an invocation per chunk of a line (each chunk scanned alone), and an
//! invocation per element combining its chunk's scan with the running
//! value of the chunks before. The loop over the line or chunk stays
//! within the kernel's loop budget (unrolled copies past lavapipe's
//! 65,535 iterations).

use super::emit::Gen;
use super::reduce_ir::{Combine, guarded, identity, sarith, split_index, strided, uarith};
use super::roots::store_outputs;
use crate::graph::GraphKey;
use crate::graph::op::ReduceOp;
use crate::kernel::ir::{Arith, Expr, Inst, Ty};
use crate::kernel::layouts::elements;
use crate::kernel::{Entry, Sz};

/// The kernel of `Scan { op, axis, chunk }` at `root`: its entry, body
/// and workgroup count (an invocation per line along `axis`, or per
/// chunk of `chunk` elements of a line; with a second input, per element,
/// `add_carries`).
pub(super) fn scan(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    (op, axis, chunk): (ReduceOp, usize, usize),
    outputs: &[usize],
) -> (Entry, Vec<Inst>, usize) {
    if key.nodes[root].inputs.len() == 2 {
        return add_carries(g, key, root, (op, axis, chunk), outputs);
    }
    let x = key.nodes[root].inputs[0];
    let shape = Sz::shape(x, &key.nodes[x].shape);
    let dtype = key.nodes[x].dtype.compute();
    let len = shape[axis].clone();
    let one = Sz::constant(1);
    let lines = elements(&shape).div_by(&len.max(&one));
    // A whole line a chunk (`chunk` 0), or chunks of a fixed length.
    let whole_lines = chunk == 0;
    let (chunk, ragged) = match chunk {
        0 => (len.max(&one), false),
        chunk => {
            let whole = "a scan's last chunk of a line as long as the others";
            (
                Sz::constant(chunk),
                !g.guards.multiple_of(&len, chunk, whole),
            )
        }
    };
    let chunks = len.div_ceil(&chunk).max(&one);
    let one_chunk = |g: &mut Gen| g.guards.equals(&chunks, 1, "a scan's line in one chunk");
    let (line, start) = if whole_lines || one_chunk(g) {
        (g.emit("o", Ty::U32, Expr::Invocation), Expr::U32(0))
    } else {
        let line = g.emit("o", Ty::U32, sarith(Arith::Div, Expr::Invocation, &chunks));
        let c = sarith(Arith::Rem, Expr::Invocation, &chunks);
        (line, g.emit("s", Ty::U32, sarith(Arith::Mul, c, &chunk)))
    };
    let acc = g.variable_of("acc", Ty::scalar(dtype), identity(op, dtype));
    let best = Expr::U32(0);
    let cx = Combine {
        op,
        dtype,
        acc: &acc,
        best: &best,
    };
    strided(g, (&start, &one, &chunk), &|g, r| {
        let body = g.block(|g| {
            scan_element(g, (key, root, outputs), (x, &shape, axis), &cx, (&line, &r));
        });
        // The last chunk of a line ends early.
        guarded(g, ragged, sarith(Arith::Lt, r, &len), body);
    });
    // Invocations past the last line (the grid is whole workgroups)
    // return at once (`per_invocation`).
    let invocations = lines.mul(&chunks);
    let launch = Entry::groups_for(invocations.literal());
    (
        Entry::per_invocation_of(&invocations),
        g.take_body(),
        launch,
    )
}

/// The kernel of a chunked scan's last stage (`Scan { chunk }` over the
/// chunks' own scans and the running values of the chunks, see
/// `Op::Scan`): an invocation per element, `carry[c - 1]` combined with
/// the element's scan within its chunk `c`, once. The last element of
/// chunk `c` then equals `carry[c]` to the bit (both are the same
/// combine of the same two values), so running sums of non-negative
/// values never decrease across a chunk's border, as `multinomial`
/// needs.
fn add_carries(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    (op, axis, chunk): (ReduceOp, usize, usize),
    outputs: &[usize],
) -> (Entry, Vec<Inst>, usize) {
    let local = key.nodes[root].inputs[0];
    let shape = Sz::shape(local, &key.nodes[local].shape);
    let dtype = key.nodes[local].dtype.compute();
    let len = &shape[axis];
    let line = g.emit("o", Ty::U32, sarith(Arith::Div, Expr::Invocation, len));
    let k = g.emit("k", Ty::U32, sarith(Arith::Rem, Expr::Invocation, len));
    let c = g.emit("c", Ty::U32, uarith(Arith::Div, k.clone(), chunk));
    let acc = g.variable_of("acc", Ty::scalar(dtype), identity(op, dtype));
    start_from_carry(g, (key, root, axis), (&line, &c), &acc);
    let best = Expr::U32(0);
    let cx = Combine {
        op,
        dtype,
        acc: &acc,
        best: &best,
    };
    scan_element(
        g,
        (key, root, outputs),
        (local, &shape, axis),
        &cx,
        (&line, &k),
    );
    let invocations = elements(&shape);
    let launch = Entry::groups_for(invocations.literal());
    (
        Entry::per_invocation_of(&invocations),
        g.take_body(),
        launch,
    )
}

/// One step of a scan: element `r` of `line` of `x` (`shape`, scanned
/// along `axis`) combined into the running value, which is stored to
/// the scan's outputs at that element.
fn scan_element(
    g: &mut Gen,
    (key, root, outputs): (&GraphKey, usize, &[usize]),
    (x, shape, axis): (usize, &[Sz], usize),
    cx: &Combine,
    (line, r): (&Expr, &Expr),
) {
    let i = g.emit("i", Ty::U32, split_index(shape, &[axis], line, r));
    let v = g.value(x, &i, false, false);
    cx.combine(g, &v, r);
    let running = g.emit("run", Ty::scalar(cx.dtype), cx.acc.clone());
    store_outputs(g, key, (root, outputs), &i, &running);
}

/// Chunk `c` of `line` (past the first) starts `acc` from the running
/// value of the chunks before it: element `c - 1` along the axis of the
/// scan's second input.
fn start_from_carry(
    g: &mut Gen,
    (key, root, axis): (&GraphKey, usize, usize),
    (line, c): (&Expr, &Expr),
    acc: &Expr,
) {
    let carry = key.nodes[root].inputs[1];
    let carry_shape = Sz::shape(carry, &key.nodes[carry].shape);
    let body = g.block(|g| {
        let before = uarith(Arith::Sub, c.clone(), 1);
        let i = g.emit(
            "ci",
            Ty::U32,
            split_index(&carry_shape, &[axis], line, &before),
        );
        let v = g.value(carry, &i, false, false);
        g.assign(acc, v);
    });
    g.push(Inst::If {
        cond: uarith(Arith::Ne, c.clone(), 0),
        body,
    });
}
