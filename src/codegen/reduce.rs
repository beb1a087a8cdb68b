//! Reduction kernels, built as IR: the strategy (`choose_reduce`) picks
//! one invocation per output (`reduce_ir::reduce_per_invocation`), a
//! workgroup tree per output, or the vec4 first stage of a split sum.

use super::emit::Gen;
use super::vectorize::vectorizable;
use super::wgsl::WORKGROUP_SIZE;
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::kernel::ir::{Arith, Expr, Inst, Ty, Var};
use crate::kernel::{
    Entry, ReduceShape, ReduceStrategy, Sz, WorkgroupArray, choose_reduce, reduce_candidates,
};

use super::reduce_ir::{
    Combine, Reduction, identity, reduce_elements, reduce_per_invocation, sarith, sum_groups,
    sums_in_fours, tree_halvings,
};
use super::roots::store_outputs;

/// The kernel of reduction `red`: its entry, body and workgroup count,
/// and the strategy it was built with.
pub(super) fn reduce(
    g: &mut Gen,
    key: &GraphKey,
    red: &Reduction<'_>,
) -> (Entry, Vec<Inst>, usize, ReduceStrategy) {
    let x = key.nodes[red.root].inputs[0];
    let in_shape = &key.nodes[x].shape;
    let total_sz = red.outer(&Sz::shape(x, in_shape)).mul(&red.parts_of(key));
    let total = total_sz.literal();
    let rank = in_shape.len();
    let shape = ReduceShape {
        op: red.op,
        dtype: key.nodes[x].dtype,
        reduced: Sz::dims_product(x, in_shape, red.axes.iter().copied()),
        parts: red.parts,
        trailing: red
            .axes
            .iter()
            .enumerate()
            .all(|(i, &d)| d == rank - red.axes.len() + i),
        vectorizable: vectorizable(&key.nodes, x, g.stored, false, &mut g.guards),
    };
    let fours = sums_in_fours(g, key, red, shape.vectorizable);
    let budget = g.context().target.loop_budget(1);
    g.candidates = reduce_candidates(&shape, budget);
    let cx = g.context();
    let strategy = choose_reduce(
        &shape,
        (cx.target.reduce, cx.precedent(red.root)),
        (budget, cx.target.reduce_rule),
        &mut g.guards,
    );
    let (entry, body, groups) = match strategy {
        ReduceStrategy::SumByFours => {
            let (entry, body) = sum_by_fours(g, key, red);
            let groups = entry.groups_of(total);
            (entry, body, groups)
        }
        ReduceStrategy::PerInvocation => {
            let (entry, body) = reduce_per_invocation(g, key, red, fours);
            let groups = entry.groups_of(total);
            (entry, body, groups)
        }
        ReduceStrategy::WorkgroupTree => {
            let (entry, body) = workgroup_tree(g, key, red, (&total_sz, fours));
            (entry, body, total)
        }
    };
    (entry, body, groups, strategy)
}

/// The first stage of a split sum (see `Op::Reduce`: part `p` takes the
/// groups of four elements `p, p + parts, ..`) reading each group as one
/// `vec4`, one invocation per part: on lavapipe, where every storage load
/// is a loop over the SIMD lanes, a probe of 16M f32 read in 8 ms this way
/// against 18 ms one element at a time (`ReduceStrategy::SumByFours`, see
/// `choose_reduce` for where it applies).
fn sum_by_fours(g: &mut Gen, key: &GraphKey, red: &Reduction<'_>) -> (Entry, Vec<Inst>) {
    let x = key.nodes[red.root].inputs[0];
    let in_shape = Sz::shape(x, &key.nodes[x].shape);
    let reduced = red.reduced(&in_shape);
    let dtype = key.nodes[x].dtype.compute();
    let parts = red.parts_of(key);
    let total = Sz::elements(red.root, &key.nodes[red.root].shape);
    let o = g.emit("o", Ty::U32, sarith(Arith::Div, Expr::Invocation, &parts));
    let first = g.emit("r0", Ty::U32, sarith(Arith::Rem, Expr::Invocation, &parts));
    // The reduced dims are trailing: output `o`'s groups follow one
    // another.
    let groups_per_output = reduced.div(4);
    let group_at = |r4: Expr| {
        let at = sarith(Arith::Mul, o.clone(), &groups_per_output);
        Expr::arith(Arith::Add, at, r4)
    };
    let sum = sum_groups(
        g,
        (x, dtype),
        (&first, &parts, &groups_per_output),
        &group_at,
    );
    let result = g.emit(
        "result",
        Ty::scalar(key.nodes[red.root].dtype.compute()),
        sum,
    );
    store_outputs(g, key, (red.root, red.outputs), &Expr::Invocation, &result);
    let entry = Entry::per_invocation_of(&total);
    (entry, g.take_body())
}

/// Long reductions: a workgroup per output (`gi` indexes workgroups),
/// its invocations striding the output's elements, then a tree in
/// workgroup memory (`tree_halvings`).
fn workgroup_tree(
    g: &mut Gen,
    key: &GraphKey,
    red: &Reduction<'_>,
    (total, fours): (&Sz, bool),
) -> (Entry, Vec<Inst>) {
    let x = key.nodes[red.root].inputs[0];
    let in_shape = Sz::shape(x, &key.nodes[x].shape);
    let dtype = key.nodes[x].dtype.compute();
    let reduced = red.reduced(&in_shape);
    let (parts, wg) = (red.parts_of(key), WORKGROUP_SIZE as usize);
    let o = g.emit("o", Ty::U32, sarith(Arith::Div, Expr::Invocation, &parts));
    let part = sarith(Arith::Rem, Expr::Invocation, &parts);
    let lane = sarith(Arith::Mul, Expr::Local, &parts);
    let first = g.emit("r0", Ty::U32, Expr::arith(Arith::Add, part, lane));
    let acc = g.variable_of("acc", Ty::scalar(dtype), identity(red.op, dtype));
    let best = g.variable_of("best", Ty::U32, Expr::U32(u32::MAX as u64));
    let cx = Combine {
        op: red.op,
        dtype,
        acc: &acc,
        best: &best,
    };
    // Split reductions step over groups of four elements, plain ones over
    // elements.
    let steps = if red.parts > 1 {
        reduced.div_ceil(&Sz::constant(4))
    } else {
        reduced
    };
    let input = (x, in_shape.as_slice(), red.axes);
    let stride = parts.times(wg);
    reduce_elements(
        g,
        input,
        (&o, &first, &stride, &steps),
        (red.parts, fours),
        &cx,
    );
    let arrays = combine_in_workgroup(g, key, red, &cx);
    let entry = Entry {
        workgroup_size: wg,
        per_invocation: false,
        count: Expr::size_u32(total),
        arrays,
        subgroup_id: false,
    };
    (entry, g.take_body())
}

/// Combines every invocation's running value (`cx.acc`, and `cx.best`
/// for the arg ops) by a tree in workgroup memory (`tree_halvings`); the
/// first invocation then stores the result and its epilogue at output
/// `gi`. Returns the workgroup arrays it uses.
fn combine_in_workgroup(
    g: &mut Gen,
    key: &GraphKey,
    red: &Reduction<'_>,
    cx: &Combine<'_>,
) -> Vec<WorkgroupArray> {
    let (acc, best, dtype, arg) = (cx.acc, cx.best, cx.dtype, red.op.is_arg());
    let wg = WORKGROUP_SIZE as usize;
    let values = g.fresh("red_v");
    let indices = g.fresh("red_i");
    // The index array only for the arg ops.
    let mut arrays = vec![WorkgroupArray {
        var: values,
        element: Ty::scalar(dtype),
        len: wg,
    }];
    g.push(set(values, Expr::Local, acc.clone()));
    if arg {
        arrays.push(WorkgroupArray {
            var: indices,
            element: Ty::U32,
            len: wg,
        });
        g.push(set(indices, Expr::Local, best.clone()));
    }
    g.push(Inst::Barrier);
    tree_halvings(g, wg, &|g, partner| {
        let at = |var, i: Expr| Expr::index(Expr::Var(var), i);
        g.assign(acc, at(values, Expr::Local));
        if arg {
            g.assign(best, at(indices, Expr::Local));
        }
        let theirs = g.emit("w", Ty::scalar(dtype), at(values, partner.clone()));
        let their_index = if arg {
            g.emit("wi", Ty::U32, at(indices, partner.clone()))
        } else {
            Expr::U32(0)
        };
        cx.combine(g, &theirs, &their_index);
        g.push(set(values, Expr::Local, acc.clone()));
        if arg {
            g.push(set(indices, Expr::Local, best.clone()));
        }
    });
    let finish = g.block(|g| {
        let result = if arg {
            let first_best = Expr::index(Expr::Var(indices), Expr::U32(0));
            Expr::Construct {
                ty: Ty::scalar(DType::I32),
                x: Box::new(first_best),
            }
        } else {
            Expr::index(Expr::Var(values), Expr::U32(0))
        };
        let root_ty = Ty::scalar(key.nodes[red.root].dtype.compute());
        let result = g.emit("result", root_ty, result);
        store_outputs(g, key, (red.root, red.outputs), &Expr::Invocation, &result);
    });
    g.push(Inst::If {
        cond: Expr::arith(Arith::Eq, Expr::Local, Expr::U32(0)),
        body: finish,
    });
    arrays
}

/// `var[index] = value`.
fn set(var: Var, index: Expr, value: Expr) -> Inst {
    Inst::SetElement { var, index, value }
}
