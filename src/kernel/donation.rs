//! Donation checked on the IR: a kernel that writes a donated input's
//! buffer may read that input only at each invocation's own element.

use super::ir::{Expr, Inst, PartAccess};

/// Whether `body` reads a donated input from an output binding anywhere
/// but at `own` (the invocation's own element), which would race with
/// other invocations' writes: donation must then be undone. Walks the
/// body with the IR's own read-only visitors (`Inst::exprs`,
/// `for_each_child`): it runs once per donation tried, when a graph
/// compiles.
pub(crate) fn reads_output_elsewhere(body: &[Inst], own: &Expr) -> bool {
    let mut found = false;
    walk(body, own, &mut found);
    found
}

/// Whether `body` reads an output binding (a donated input) at an index
/// that no store to an output uses. A root kernel's invocation stores
/// many elements (a block of a matmul's output, a row of a softmax), each
/// with its epilogue: a donated input read only at the index of an
/// element the same invocation stores, and before it stores it
/// (`codegen::roots::store_outputs` computes every value before any
/// store), cannot race. Indices are compared as IR, so a read at an index
/// spelled otherwise than its store undoes the donation (never the other
/// way round).
pub(crate) fn reads_output_off_its_stores(body: &[Inst]) -> bool {
    let mut stores = Vec::new();
    let mut reads = Vec::new();
    indices(body, &mut stores, &mut reads);
    reads.iter().any(|r| r.is_none() || !stores.contains(r))
}

/// The indices of output stores and of output reads (`None`: a read that
/// is not by index) in `body`.
fn indices<'a>(
    body: &'a [Inst],
    stores: &mut Vec<Option<&'a Expr>>,
    reads: &mut Vec<Option<&'a Expr>>,
) {
    for inst in body {
        match inst {
            Inst::Parts {
                buffer,
                index,
                access,
                ..
            } if buffer.output => match access {
                PartAccess::Read(_) => reads.push(Some(index)),
                PartAccess::Write(_) => stores.push(Some(index)),
            },
            Inst::Store { buffer, index, .. } if buffer.output => {
                stores.push(Some(index));
            }
            Inst::CoopLoad { from, .. } if from.reads_an_output() => reads.push(None),
            _ => {}
        }
        for e in inst.exprs() {
            loads(e, reads);
        }
        if let Some(nested) = inst.nested_body() {
            indices(nested, stores, reads);
        }
    }
}

fn loads<'a>(e: &'a Expr, reads: &mut Vec<Option<&'a Expr>>) {
    if let Expr::Load { buffer, index } = e
        && buffer.output
    {
        reads.push(Some(index));
    }
    e.for_each_child(|child| loads(child, reads));
}

fn walk(body: &[Inst], own: &Expr, found: &mut bool) {
    for inst in body {
        match inst {
            Inst::Parts {
                buffer,
                index,
                access: PartAccess::Read(_),
                ..
            } if buffer.output && index != own => *found = true,
            Inst::CoopLoad { from, .. } if from.reads_an_output() => *found = true,
            _ => {}
        }
        for e in inst.exprs() {
            expr(e, own, found);
        }
        if let Some(nested) = inst.nested_body() {
            walk(nested, own, found);
        }
    }
}

fn expr(e: &Expr, own: &Expr, found: &mut bool) {
    if let Expr::Load { buffer, index } = e
        && buffer.output
        && **index != *own
    {
        *found = true;
    }
    e.for_each_child(|child| expr(child, own, found));
}
