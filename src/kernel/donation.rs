//! Donation checked on the IR: a kernel that writes a donated input's
//! buffer may read that input only at each invocation's own element.

use super::ir::{Expr, Inst, PartAccess};

/// Whether `body` reads a donated input from an output binding anywhere
/// but at `own` (the invocation's own element), which would race with
/// other invocations' writes: donation must then be undone. Walks a copy
/// with the IR's own visitors (`Inst::exprs_mut`, `for_each_child_mut`):
/// it runs once per donation tried, when a graph compiles.
pub(crate) fn reads_output_elsewhere(body: &[Inst], own: &Expr) -> bool {
    let mut copy = body.to_vec();
    let mut found = false;
    walk(&mut copy, own, &mut found);
    found
}

fn walk(body: &mut [Inst], own: &Expr, found: &mut bool) {
    for inst in body {
        match inst {
            Inst::Parts {
                buffer,
                index,
                access: PartAccess::Read(_),
                ..
            } if buffer.output && index != own => *found = true,
            Inst::CoopLoad { from, .. } if from.buffer.output => *found = true,
            _ => {}
        }
        for e in inst.exprs_mut() {
            expr(e, own, found);
        }
        for nested in inst.bodies_mut() {
            walk(nested, own, found);
        }
    }
}

fn expr(e: &mut Expr, own: &Expr, found: &mut bool) {
    if let Expr::Load { buffer, index } = e
        && buffer.output
        && **index != *own
    {
        *found = true;
    }
    e.for_each_child_mut(&mut |child| expr(child, own, found));
}
