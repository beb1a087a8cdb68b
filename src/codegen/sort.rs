//! Stable sorting along one axis (`argsort`, and `sort`/`topk` built on
//! it), built as IR: a workgroup per line runs a bitonic sorting network
//! on the line's indices, kept in the kernel's own output buffer, and
//! compares the input's values at those indices (ties and NaNs ordered
//! by the original index, which makes the network's order the stable
//! one; NaN is the greatest value, as in PyTorch).
//!
//! The network is the variant whose every comparator puts the lesser
//! element first (each merge begins by comparing mirrored positions), so
//! a line of `n` elements sorts as if padded to the next power of two
//! with elements greater than all others that never move: comparators
//! that reach past `n` are skipped. Each of its `log2(P)(log2(P)+1)/2`
//! steps is a loop over the line's pairs shared by the workgroup, then a
//! storage barrier; the loops together stay within the kernel's loop
//! budget (unrolled copies where a line is long).

use super::emit::Gen;
use super::reduce_ir::{split_index, strided_within, uarith};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::kernel::Entry;
use crate::kernel::ir::{Arith, Buffer, Expr, Inst, Ty, Var};
use crate::shape::numel;

/// Invocations of a line's workgroup at most: long lines share each
/// step's pairs among 256.
const SORT_WORKGROUP: usize = 256;

/// The kernel of `Sort { axis, descending }` at `root` (which it writes,
/// as `i32` indices along `axis`, and no epilogue): its entry, body and
/// workgroup count (one per line).
pub(super) fn sort(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    (axis, descending): (usize, bool),
) -> (Entry, Vec<Inst>, usize) {
    let line = SortLine::new(g, key, root, (axis, descending));
    line.identity_permutation(g);
    g.push(Inst::StorageBarrier);
    line.bitonic_network(g);
    let entry = Entry {
        workgroup_size: line.wg,
        per_invocation: false,
        count: Expr::count(line.lines),
        arrays: Vec::new(),
        subgroup_id: false,
    };
    (entry, g.body().to_vec(), line.lines)
}

/// One line's sort as the parts of the kernel see it: the input, the
/// line's geometry, the network's sizes and the output buffer holding
/// the indices (kept together so each part of the network is a method).
struct SortLine {
    /// The input node whose values are compared.
    x: usize,
    /// The `Sort` node, whose output holds the indices.
    root: usize,
    shape: Vec<usize>,
    axes: [usize; 1],
    /// The line this workgroup sorts.
    line: Expr,
    out: Buffer,
    dtype: DType,
    descending: bool,
    /// Elements of a line.
    len: usize,
    /// Lines in all (workgroups).
    lines: usize,
    /// `len` rounded up to a power of two.
    padded: usize,
    /// `log2(padded)`.
    stages: usize,
    /// Comparators in each step.
    pairs: usize,
    /// Invocations of the workgroup.
    wg: usize,
    /// The loop budget every strided loop shares.
    loops: usize,
}

impl SortLine {
    /// The sizes of the network along `axis` of `root`'s input, and the
    /// line variable (emitted first, as the kernel's first statement).
    fn new(g: &mut Gen, key: &GraphKey, root: usize, (axis, descending): (usize, bool)) -> Self {
        let x = key.nodes[root].inputs[0];
        let shape = key.nodes[x].shape.clone();
        let dtype = key.nodes[x].dtype.compute();
        let len = shape[axis];
        let lines = numel(&shape) / len.max(1);
        let padded = len.next_power_of_two();
        let stages = padded.trailing_zeros() as usize;
        let pairs = padded / 2;
        let wg = pairs.clamp(1, SORT_WORKGROUP);
        // Lavapipe's loop limit counts every iteration of the invocation:
        // the identity loop and each step's pair loop share it (the stage
        // and step loops' few hundred come from the fixed allowance).
        let loops = stages * (stages + 1) / 2 + 1;
        let line = g.emit("o", Ty::U32, Expr::Invocation);
        let out = Buffer {
            output: true,
            k: 0,
            part: None,
            half: None,
        };
        SortLine {
            x,
            root,
            shape,
            axes: [axis],
            line,
            out,
            dtype,
            descending,
            len,
            lines,
            padded,
            stages,
            pairs,
            wg,
            loops,
        }
    }

    /// The flat position of element `k` of this line.
    fn position(&self, g: &mut Gen, k: Expr) -> Expr {
        g.emit(
            "p",
            Ty::U32,
            split_index(&self.shape, &self.axes, &self.line, &k),
        )
    }

    /// The original index stored at flat position `p`.
    fn index_at(&self, g: &mut Gen, p: &Expr) -> Expr {
        let i = Expr::Load {
            buffer: self.out,
            index: Box::new(p.clone()),
        };
        g.emit("ix", Ty::scalar(DType::I32), i)
    }

    /// The input's value at original index `ix` of this line: the key the
    /// network compares.
    fn key_at(&self, g: &mut Gen, ix: &Expr) -> Expr {
        let k = Expr::Construct {
            ty: Ty::U32,
            x: Box::new(ix.clone()),
        };
        let p = g.emit(
            "q",
            Ty::U32,
            split_index(&self.shape, &self.axes, &self.line, &k),
        );
        g.value(self.x, &p, false, false)
    }

    /// Writes the identity permutation, the indices the network starts
    /// from.
    fn identity_permutation(&self, g: &mut Gen) {
        strided_within(g, (&Expr::Local, self.wg, self.len), self.loops, &|g, k| {
            let p = self.position(g, k.clone());
            let value = Expr::Construct {
                ty: Ty::scalar(DType::I32),
                x: Box::new(k),
            };
            g.push(store(self.out, p, value, self.root));
        });
    }

    /// The network's stage loop, each stage a loop over its steps.
    fn bitonic_network(&self, g: &mut Gen) {
        let (stage, step) = (g.fresh("stage"), g.fresh("step"));
        let step_body = g.block(|g| self.network_step(g, stage, step));
        let stage_body = vec![Inst::Loop {
            counter: step,
            count: uarith(Arith::Add, Expr::Var(stage), 1),
            unroll: 1,
            body: step_body,
        }];
        g.push(Inst::Loop {
            counter: stage,
            count: Expr::count(self.stages),
            unroll: 1,
            body: stage_body,
        });
    }

    /// One step of the network: the workgroup's comparators over the
    /// line's pairs (those reaching past the line skipped), then a
    /// storage barrier.
    fn network_step(&self, g: &mut Gen, stage: Var, step: Var) {
        // Comparators `half` apart, `half = 2^(stage - step)`; the first
        // step of a stage compares mirrored positions.
        let shift = Expr::arith(
            Arith::Sub,
            uarith(Arith::Add, Expr::Var(step), self.stages),
            Expr::Var(stage),
        );
        let half = Expr::arith(Arith::Shr, Expr::U32(self.padded as u64), shift);
        let half = g.emit("half", Ty::U32, half);
        let mirrored = g.emit(
            "h",
            Ty::BOOL,
            Expr::arith(Arith::Eq, Expr::Var(step), Expr::U32(0)),
        );
        strided_within(
            g,
            (&Expr::Local, self.wg, self.pairs),
            self.loops,
            &|g, t| {
                let (a, b) = comparator(g, t, &half, &mirrored);
                let body = g.block(|g| self.compare_and_swap(g, &a, &b));
                g.push(Inst::If {
                    cond: uarith(Arith::Lt, b, self.len),
                    body,
                });
            },
        );
        g.push(Inst::StorageBarrier);
    }

    /// Swaps the indices at line positions `a` and `b` when `b`'s element
    /// comes first.
    fn compare_and_swap(&self, g: &mut Gen, a: &Expr, b: &Expr) {
        let (pa, pb) = (self.position(g, a.clone()), self.position(g, b.clone()));
        let (ia, ib) = (self.index_at(g, &pa), self.index_at(g, &pb));
        let (va, vb) = (self.key_at(g, &ia), self.key_at(g, &ib));
        let swap = comes_first((&vb, &ib), (&va, &ia), self.dtype, self.descending);
        let swap = g.emit("h", Ty::BOOL, swap);
        g.push(Inst::If {
            cond: swap,
            body: vec![
                store(self.out, pa, ib, self.root),
                store(self.out, pb, ia, self.root),
            ],
        });
    }
}

/// The line positions `(a, b)` comparator `t` of a step compares, with
/// `a < b`: `half` apart, or mirrored within their block of `2 * half`
/// on a stage's first step.
fn comparator(g: &mut Gen, t: Expr, half: &Expr, mirrored: &Expr) -> (Expr, Expr) {
    let block = Expr::arith(Arith::Div, t.clone(), half.clone());
    let base = Expr::arith(
        Arith::Mul,
        block,
        Expr::arith(Arith::Add, half.clone(), half.clone()),
    );
    let base = g.emit("base", Ty::U32, base);
    let within = g.emit("w", Ty::U32, Expr::arith(Arith::Rem, t, half.clone()));
    let a = g.emit(
        "a",
        Ty::U32,
        Expr::arith(Arith::Add, base.clone(), within.clone()),
    );
    let far = Expr::arith(
        Arith::Sub,
        Expr::arith(
            Arith::Add,
            base,
            uarith(
                Arith::Sub,
                Expr::arith(Arith::Add, half.clone(), half.clone()),
                1,
            ),
        ),
        within,
    );
    let near = Expr::arith(Arith::Add, a.clone(), half.clone());
    let b = Expr::Select {
        cond: Box::new(mirrored.clone()),
        then: Box::new(far),
        otherwise: Box::new(near),
    };
    let b = g.emit("b", Ty::U32, b);
    (a, b)
}

/// `buffer[index] = value` for the root's `i32` indices.
fn store(buffer: Buffer, index: Expr, value: Expr, node: usize) -> Inst {
    Inst::Store {
        buffer,
        index,
        value,
        node,
    }
}

/// Whether element `(v, i)` (value, original index) goes before `(w, j)`:
/// a lesser value (greater when `descending`), NaN the greatest of
/// floats, equal values (all NaNs equal) by the smaller original index.
fn comes_first(
    (v, i): (&Expr, &Expr),
    (w, j): (&Expr, &Expr),
    dtype: DType,
    descending: bool,
) -> Expr {
    let and = |a, b| Expr::arith(Arith::And, a, b);
    let or = |a, b| Expr::arith(Arith::Or, a, b);
    let lt = |a: &Expr, b: &Expr| Expr::arith(Arith::Lt, a.clone(), b.clone());
    let (lo, hi) = if descending { (w, v) } else { (v, w) };
    let (mut less, mut equal) = (lt(lo, hi), Expr::arith(Arith::Eq, v.clone(), w.clone()));
    if dtype == DType::F32 {
        let nan = |e: &Expr| Expr::IsNan {
            x: Box::new(e.clone()),
            vec: false,
        };
        // `lo` before `hi` also when only `hi` is NaN.
        let only_hi_nan = and(Expr::Not(Box::new(nan(lo))), nan(hi));
        less = or(less, only_hi_nan);
        equal = or(equal, and(nan(v), nan(w)));
    }
    or(less, and(equal, lt(i, j)))
}
