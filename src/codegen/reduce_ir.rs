//! The reduction with one invocation per output (`ReduceStrategy::
//! PerInvocation`), built as IR: the combine step of each reduce op from
//! its semantics (NaN wins, ties go to the first index, as in PyTorch),
//! its identity as a literal, and the loop over the output's elements
//! (`Inst::Loop`, within the kernel's loop budget).

use super::emit::Gen;
use super::roots::store_outputs;
use super::wgsl::unroll_guarded;
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::{BinaryOp, ReduceOp};
use crate::kernel::ir::{Arith, Expr, Inst, Ty, Var};
use crate::kernel::layouts;
use crate::kernel::{Entry, Sz};

/// The facts of one reduction kernel.
pub(super) struct Reduction<'a> {
    pub root: usize,
    pub op: ReduceOp,
    pub axes: &'a [usize],
    /// Parts of a split reduction's first stage (1: not split).
    pub parts: usize,
    pub outputs: &'a [usize],
}

impl Reduction<'_> {
    /// The elements each output reduces, of its input's `shape`.
    pub fn reduced(&self, shape: &[Sz]) -> Sz {
        product_of(shape, self.axes)
    }

    /// The outputs, of its input's `shape`: the kept dims' product.
    pub fn outer(&self, shape: &[Sz]) -> Sz {
        ((0..shape.len()).filter(|d| !self.axes.contains(d)))
            .fold(Sz::constant(1), |acc, d| acc.mul(&shape[d]))
    }

    /// Its parts as a size: a split reduction's first stage keeps them
    /// as its last dimension (`schedule::split`).
    pub fn parts_of(&self, key: &GraphKey) -> Sz {
        match self.parts {
            1 => Sz::constant(1),
            _ => Sz::last_dim(self.root, &key.nodes[self.root].shape),
        }
    }
}

/// Invocation `gi` reduces part `gi % parts` of output `gi / parts`: the
/// elements (split reductions: groups of four) `r = gi % parts + j *
/// parts`, four a load where `fours` (`sums_in_fours`), then stores the
/// result and its epilogue. Returns the entry and body.
pub(super) fn reduce_per_invocation(
    g: &mut Gen,
    key: &GraphKey,
    red: &Reduction<'_>,
    fours: bool,
) -> (Entry, Vec<Inst>) {
    let x = key.nodes[red.root].inputs[0];
    let in_shape = Sz::shape(x, &key.nodes[x].shape);
    let dtype = key.nodes[x].dtype.compute();
    let reduced = red.reduced(&in_shape);
    let outer = red.outer(&in_shape);
    let parts = red.parts_of(key);
    let (step, len) = if red.parts > 1 {
        (parts.clone(), reduced.div_ceil(&Sz::constant(4)))
    } else {
        (Sz::constant(1), reduced)
    };
    let o = g.emit("o", Ty::U32, sarith(Arith::Div, Expr::Invocation, &parts));
    let first = g.emit("r0", Ty::U32, sarith(Arith::Rem, Expr::Invocation, &parts));
    let acc = g.variable_of("acc", Ty::scalar(dtype), identity(red.op, dtype));
    let best = g.variable_of("best", Ty::U32, Expr::U32(u32::MAX as u64));
    let cx = Combine {
        op: red.op,
        dtype,
        acc: &acc,
        best: &best,
    };
    let input = (x, in_shape.as_slice(), red.axes);
    reduce_elements(g, input, (&o, &first, &step, &len), (red.parts, fours), &cx);
    let root_ty = Ty::scalar(key.nodes[red.root].dtype.compute());
    let result = if red.op.is_arg() {
        Expr::Construct {
            ty: Ty::scalar(DType::I32),
            x: Box::new(best),
        }
    } else {
        acc
    };
    let result = g.emit("result", root_ty, result);
    store_outputs(g, key, (red.root, red.outputs), &Expr::Invocation, &result);
    let entry = Entry {
        workgroup_size: PER_INVOCATION_WORKGROUP,
        ..Entry::per_invocation_of(&outer.mul(&parts))
    };
    (entry, g.take_body())
}

/// Whether plain reduction `red` (not split: `parts == 1`) is a sum that
/// reads its input four neighbouring elements a load: an `f32` input
/// computed or stored four elements at a time (`vectorizable`, as the
/// caller found it for the reduction's shape), reduced along its last
/// dim (the innermost of the reduced ones), whose length is a multiple
/// of four at every size the site runs
/// (`CodegenContext::rows_stay_in_fours`), so that each group of four
/// reduced elements lies together in memory and starts a group of four.
/// A convolution's bias gradient sums each channel over the batch and
/// the positions (`[64, 64, 24, 24]` over dims 0, 2, 3): on lavapipe,
/// where each storage load is a loop over the lanes, it took 4.8-5.1 ms
/// one element a load and 2.4-2.5 ms four.
pub(super) fn sums_in_fours(
    g: &mut Gen,
    key: &GraphKey,
    red: &Reduction<'_>,
    vectorizable: bool,
) -> bool {
    let x = key.nodes[red.root].inputs[0];
    let shape = &key.nodes[x].shape;
    let Some(last) = shape.len().checked_sub(1) else {
        return false;
    };
    vectorizable
        && red.op == ReduceOp::Sum
        && red.parts == 1
        && red.axes.last() == Some(&last)
        && key.nodes[x].dtype == DType::F32
        && (g.context()).rows_stay_in_fours(x, &Sz::dim(x, last, shape[last]), &mut g.guards)
}

/// Sums `groups` groups of four elements of `x` (compute dtype `dtype`),
/// `r = first + j * step`, each read as one `vec4` at group position
/// `group_at(r)`, into a `vec4` accumulator; returns the sum of its
/// lanes. The loop of a split sum's first stage and of a plain sum that
/// reads four at a time (`sums_in_fours`).
pub(super) fn sum_groups(
    g: &mut Gen,
    (x, dtype): (usize, DType),
    (first, step, groups): (&Expr, &Sz, &Sz),
    group_at: &dyn Fn(Expr) -> Expr,
) -> Expr {
    let vec_ty = Ty::of(dtype, true);
    let zero = Expr::Construct {
        ty: vec_ty,
        x: Box::new(identity(ReduceOp::Sum, dtype)),
    };
    let acc = g.variable_of("acc", vec_ty, zero);
    strided(g, (first, step, groups), &|g, r| {
        let i = g.emit("i", Ty::U32, group_at(r));
        let v = g.value(x, &i, false, true);
        g.accumulate(&acc, v);
    });
    let add = |a: Expr, b: Expr| Expr::Binary {
        op: BinaryOp::Add,
        operand: dtype,
        vec: false,
        a: Box::new(a),
        b: Box::new(b),
    };
    let lane = |q: u64| Expr::index(acc.clone(), Expr::U32(q));
    add(add(lane(0), lane(1)), add(lane(2), lane(3)))
}

/// Combines output `o`'s `len` elements `r = first + j * step` of `x`
/// (groups of four where split in `parts > 1`) into `cx`, or, where
/// `fours` (`sums_in_fours`), sums its groups of four from `first` by
/// `step` (`sum_in_fours`): the loop of both plain reduction kernels.
pub(super) fn reduce_elements(
    g: &mut Gen,
    (x, shape, axes): (usize, &[Sz], &[usize]),
    (o, first, step, len): (&Expr, &Expr, &Sz, &Sz),
    (parts, fours): (usize, bool),
    cx: &Combine<'_>,
) {
    if fours {
        sum_in_fours(g, (x, shape, axes), (o, first, step), cx.acc);
    } else {
        strided(g, (first, step, len), &|g, r| {
            reduce_unit(g, (x, shape, axes), (o, r), parts, cx)
        });
    }
}

/// Sums output `o`'s elements into `acc` four at a time (see
/// `sums_in_fours`): groups `r = first + j * step` of four reduced
/// elements, group `r` at input position `split_index(.., 4 r) / 4`.
fn sum_in_fours(
    g: &mut Gen,
    (x, shape, axes): (usize, &[Sz], &[usize]),
    (o, first, step): (&Expr, &Expr, &Sz),
    acc: &Expr,
) {
    let reduced = product_of(shape, axes);
    let group_at = |r: Expr| {
        let r = Expr::arith(Arith::Mul, r, Expr::U32(4));
        Expr::arith(Arith::Div, split_index(shape, axes, o, &r), Expr::U32(4))
    };
    let lanes = sum_groups(
        g,
        (x, DType::F32),
        (first, step, &reduced.div(4)),
        &group_at,
    );
    g.accumulate(acc, lanes);
}

/// Invocations of a workgroup where each computes an output of a
/// reduction. A reduction to few outputs (a layer norm's weight
/// gradient: 128 columns of 768 rows) made one workgroup of 256, which
/// one of a CPU adapter's cores ran alone; in workgroups of 64 the
/// cores share it.
pub(super) const PER_INVOCATION_WORKGROUP: usize = 64;

/// One step of output `o`'s reduction: its element `r`, or (a split
/// reduction's first stage, `parts > 1`) the four elements of group `r`,
/// those past the reduced extent skipped.
fn reduce_unit(
    g: &mut Gen,
    (x, shape, axes): (usize, &[Sz], &[usize]),
    (o, r): (&Expr, Expr),
    parts: usize,
    cx: &Combine<'_>,
) {
    if parts == 1 {
        element(g, (x, shape, axes), (o, r), cx);
        return;
    }
    let reduced = product_of(shape, axes);
    let whole = "a split reduction's groups of four, none past the end";
    let ragged = !g.guards.multiple_of(&reduced, 4, whole);
    for q in 0..4 {
        let four_r = Expr::arith(Arith::Mul, r.clone(), Expr::U32(4));
        let at = Expr::arith(Arith::Add, four_r, Expr::U32(q));
        let at = g.emit("r", Ty::U32, at);
        let body = g.block(|g| element(g, (x, shape, axes), (o, at.clone()), cx));
        if ragged {
            let inside = sarith(Arith::Lt, at.clone(), &reduced);
            g.push(Inst::If { cond: inside, body });
        } else {
            body.into_iter().for_each(|i| g.push(i));
        }
    }
}

/// `unit` at `r = first + j * step` for every `r < len`: a loop over the
/// whole steps (its count the same in every invocation, which lavapipe
/// runs faster than a bound that differs between lanes), then the one
/// step past them that some invocations take.
pub(super) fn strided(g: &mut Gen, at: (&Expr, &Sz, &Sz), unit: &dyn Fn(&mut Gen, Expr)) {
    strided_within(g, at, 1, unit)
}

/// `strided` in a kernel that runs `passes` such loops, each within its
/// share of the loop budget.
pub(super) fn strided_within(
    g: &mut Gen,
    (first, step, len): (&Expr, &Sz, &Sz),
    passes: usize,
    unit: &dyn Fn(&mut Gen, Expr),
) {
    let full = len.div_by(step);
    let counter = g.fresh("j");
    let body = g.block(|g| {
        let along = sarith(Arith::Mul, Expr::Var(counter), step);
        let r = g.emit("rr", Ty::U32, Expr::arith(Arith::Add, first.clone(), along));
        unit(g, r);
    });
    let budget = g.context().target.loop_budget(passes);
    let unroll = unroll_guarded(&full, budget, &mut g.guards);
    g.push(Inst::Loop {
        counter,
        count: Expr::size_u32(&full),
        unroll,
        body,
    });
    // The tail is there even where `len` is a whole number of steps (its
    // test then never holds): the kernel's structure does not depend on
    // `len % step`, so a length that changes between steps binds the
    // same generic kernel (a GPT step's loss sum compiled again when the
    // sequence length made it a multiple of its workgroup).
    let r = Expr::arith(Arith::Add, first.clone(), Expr::size_u32(&full.mul(step)));
    let r = g.emit("rr", Ty::U32, r);
    let tail = g.block(|g| unit(g, r.clone()));
    g.push(Inst::If {
        cond: sarith(Arith::Lt, r, len),
        body: tail,
    });
}

/// Pushes `body`, inside `if cond` where `needed` (an element past a
/// ragged end), as it is elsewhere.
pub(super) fn guarded(g: &mut Gen, needed: bool, cond: Expr, body: Vec<Inst>) {
    if needed {
        g.push(Inst::If { cond, body });
    } else {
        body.into_iter().for_each(|inst| g.push(inst));
    }
}

/// A tree over a workgroup of `wg` invocations (a power of two): for
/// `half` = `wg / 2, wg / 4, .., 1`, the invocations below `half` run
/// `merge` with the index of their partner (`lid + half`), then all wait
/// at a barrier. A loop, as the WGSL templates wrote it: the same tree
/// written out (eight halvings for 256) made a 16M-element sum 1.2x
/// slower on lavapipe, where each barrier splits the shader.
pub(super) fn tree_halvings(g: &mut Gen, wg: usize, merge: &dyn Fn(&mut Gen, &Expr)) {
    let steps = wg.trailing_zeros() as usize;
    let t = g.fresh("t");
    let body = g.block(|g| {
        let half = Expr::arith(Arith::Shr, Expr::count(wg / 2), Expr::Var(t));
        let half = g.emit("half", Ty::U32, half);
        let partner = Expr::arith(Arith::Add, Expr::Local, half.clone());
        let partner = g.emit("p", Ty::U32, partner);
        let work = g.block(|g| merge(g, &partner));
        g.push(Inst::If {
            cond: Expr::arith(Arith::Lt, Expr::Local, half),
            body: work,
        });
        g.push(Inst::Barrier);
    });
    g.push(Inst::Loop {
        counter: t,
        count: Expr::count(steps),
        unroll: 1,
        body,
    });
}

/// Combines every invocation's `value` with `op` (f32, NaN-propagating
/// for `Maximum`) by a tree in the workgroup array `partial`
/// (`tree_halvings`) over a workgroup of `wg` invocations (a power of
/// two, the array's length). Returns the result, which every invocation
/// reads.
pub(super) fn workgroup_tree(
    g: &mut Gen,
    partial: Var,
    value: &Expr,
    op: BinaryOp,
    wg: usize,
) -> Expr {
    let at = |i: Expr| Expr::index(Expr::Var(partial), i);
    let set = |index: Expr, value: Expr| Inst::SetElement {
        var: partial,
        index,
        value,
    };
    g.push(set(Expr::Local, value.clone()));
    g.push(Inst::Barrier);
    tree_halvings(g, wg, &|g, partner| {
        let mine = g.emit("a", Ty::F32, at(Expr::Local));
        let theirs = g.emit("b", Ty::F32, at(partner.clone()));
        g.push(set(Expr::Local, Expr::f32_binary(op, mine, theirs, false)));
    });
    g.emit("t", Ty::F32, at(Expr::U32(0)))
}

/// The product of `shape`'s dimensions `dims` (1 for none).
fn product_of(shape: &[Sz], dims: &[usize]) -> Sz {
    (dims.iter()).fold(Sz::constant(1), |acc, &d| acc.mul(&shape[d]))
}

/// `a op n` for a `u32` literal `n`.
pub(super) fn uarith(op: Arith, a: Expr, n: usize) -> Expr {
    Expr::arith(op, a, Expr::U32(n as u64))
}

/// `a op n` for a `u32` literal `n` that is a size (`Expr::Sized` where
/// it reads a symbol).
pub(super) fn sarith(op: Arith, a: Expr, n: &Sz) -> Expr {
    Expr::arith(op, a, Expr::size_u32(n))
}

/// Reads element `r` of output `o` (the input `x` of `shape`, reduced
/// over `axes`) and combines it.
fn element(
    g: &mut Gen,
    (x, shape, axes): (usize, &[Sz], &[usize]),
    (o, r): (&Expr, Expr),
    cx: &Combine<'_>,
) {
    let i = g.emit("i", Ty::U32, split_index(shape, axes, o, &r));
    let v = g.value(x, &i, false, false);
    cx.combine(g, &v, &r);
}

/// The input index of element `r` of output `o`: the kept dims' coordinates
/// from `o`, the reduced dims' (`axes`) from `r`, both row-major.
/// Dimensions of one are left out (`guard_size_one` tests those of every
/// node a kernel reads).
pub(super) fn split_index(shape: &[Sz], axes: &[usize], o: &Expr, r: &Expr) -> Expr {
    let strides = layouts::contiguous_strides(shape);
    let mut terms = Vec::new();
    let mut add = |dims: Vec<usize>, var: &Expr| {
        let mut inner = Sz::constant(1);
        let total = product_of(shape, &dims);
        for &d in dims.iter().rev() {
            let size = &shape[d];
            if size.literal() > 1 {
                let first = inner.literal() == 1;
                let coord = if first && size.literal() == total.literal() {
                    var.clone()
                } else if inner.mul(size).literal() >= total.literal() {
                    sarith(Arith::Div, var.clone(), &inner)
                } else if first {
                    sarith(Arith::Rem, var.clone(), size)
                } else {
                    sarith(Arith::Rem, sarith(Arith::Div, var.clone(), &inner), size)
                };
                terms.push(sarith(Arith::Mul, coord, &strides[d]));
            }
            inner = inner.mul(size);
        }
    };
    add((0..shape.len()).filter(|d| !axes.contains(d)).collect(), o);
    add(axes.to_vec(), r);
    Expr::sum(terms)
}

/// The identity of `op` on values of `dtype` (a compute dtype).
pub(super) fn identity(op: ReduceOp, dtype: DType) -> Expr {
    match (op, dtype) {
        (op, DType::F32) => Expr::F32((op.identity() as f32).to_bits()),
        (ReduceOp::Sum, DType::I32) => Expr::I32(0),
        (ReduceOp::Prod, DType::I32) => Expr::I32(1),
        (ReduceOp::Sum, _) => Expr::U32(0),
        (ReduceOp::Prod, _) => Expr::U32(1),
        // The lowest i32, as its bits (its literal does not parse).
        (ReduceOp::Max | ReduceOp::ArgMax, DType::I32) => Expr::Construct {
            ty: Ty::scalar(DType::I32),
            x: Box::new(Expr::U32(0x8000_0000)),
        },
        (ReduceOp::Max | ReduceOp::ArgMax, _) => Expr::U32(0),
        (ReduceOp::Min | ReduceOp::ArgMin, DType::I32) => Expr::I32(i32::MAX as i64),
        (ReduceOp::Min | ReduceOp::ArgMin, _) => Expr::U32(u32::MAX as u64),
    }
}

/// The running value (`acc`) and, for arg ops, its index (`best`) of a
/// reduction `op` over values of `dtype`.
pub(super) struct Combine<'a> {
    pub op: ReduceOp,
    pub dtype: DType,
    pub acc: &'a Expr,
    pub best: &'a Expr,
}

impl Combine<'_> {
    /// Combines element `v` (index `r`): NaN wins on floats (`amax` and
    /// `amin` are NaN where any element is; the arg ops return the first
    /// NaN's index), ties go to the smaller index.
    pub fn combine(&self, g: &mut Gen, v: &Expr, r: &Expr) {
        let (acc, dtype) = (self.acc, self.dtype);
        let binary = |op: BinaryOp| Expr::Binary {
            op,
            operand: dtype,
            vec: false,
            a: Box::new(acc.clone()),
            b: Box::new(v.clone()),
        };
        match self.op {
            ReduceOp::Sum => g.accumulate(acc, v.clone()),
            ReduceOp::Prod => g.assign(acc, binary(BinaryOp::Mul)),
            ReduceOp::Max => g.assign(acc, binary(BinaryOp::Maximum)),
            ReduceOp::Min => g.assign(acc, binary(BinaryOp::Minimum)),
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let better = if self.op == ReduceOp::ArgMax {
                    Expr::arith(Arith::Lt, acc.clone(), v.clone())
                } else {
                    Expr::arith(Arith::Lt, v.clone(), acc.clone())
                };
                let earlier = Expr::arith(Arith::Lt, r.clone(), self.best.clone());
                let tie = Expr::arith(
                    Arith::And,
                    Expr::arith(Arith::Eq, v.clone(), acc.clone()),
                    earlier.clone(),
                );
                let plain = Expr::arith(Arith::Or, better, tie);
                let cond = if dtype == DType::F32 {
                    let nan = |e: &Expr| Expr::IsNan {
                        x: Box::new(e.clone()),
                        vec: false,
                    };
                    let acc_real = Expr::Not(Box::new(nan(acc)));
                    let first_nan = Expr::arith(
                        Arith::And,
                        nan(v),
                        Expr::arith(Arith::Or, acc_real.clone(), earlier),
                    );
                    Expr::arith(
                        Arith::Or,
                        first_nan,
                        Expr::arith(Arith::And, acc_real, plain),
                    )
                } else {
                    plain
                };
                let cond = g.emit("h", Ty::BOOL, cond);
                let Expr::Var(acc_var) = acc else {
                    unreachable!("accumulators are variables")
                };
                let Expr::Var(best_var) = self.best else {
                    unreachable!("accumulators are variables")
                };
                g.push(Inst::If {
                    cond,
                    body: vec![
                        Inst::Assign {
                            var: *acc_var,
                            value: v.clone(),
                        },
                        Inst::Assign {
                            var: *best_var,
                            value: r.clone(),
                        },
                    ],
                });
            }
        }
    }
}
