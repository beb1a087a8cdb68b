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
use super::reduce_ir::{guarded, sarith, split_index, strided_within, uarith};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::kernel::ir::{Arith, Expr, Inst, Ty, Var};
use crate::kernel::layouts::elements;
use crate::kernel::{Entry, Guards, Sz};

/// Invocations of a line's workgroup: lines of more than
/// `2 * SMALL_SORT_PAIRS` elements share each step's pairs among 256.
const SORT_WORKGROUP: usize = 256;

/// Comparators a step up to which a line's workgroup has one invocation
/// per comparator (a short line's workgroup of 256 would idle). Above
/// it a single line's workgroup is `SORT_WORKGROUP` whatever the length,
/// so that a length that changes between steps (an embedding gradient's
/// token count) keeps the kernel's structure and binds its generic
/// kernel: with one invocation per comparator up to 256, 17 x 12 tokens
/// compiled again after 64 x 12. Many lines (a top-k over rows) keep one
/// invocation per comparator: their workgroups of 256 would mostly idle
/// through every barrier.
const SMALL_SORT_PAIRS: usize = 32;

/// The stage counts whose loop budget a network takes, the fewest at
/// least its own: a line of up to 2^16 elements shares the budget of 16
/// stages (its loops fit unrolled by none up to 2^16), one of 2^20 that
/// of 20 (unrolled as it was with its exact count).
const STAGE_BUCKETS: [usize; 3] = [16, 20, 24];

/// The kernel of `Sort { axis, descending, run }` at `root` (which it
/// writes, as `i32` indices along `axis`, and no epilogue): its entry,
/// body and workgroup count (one per line, or per run of `run` elements
/// of a line).
pub(super) fn sort(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    (axis, descending, run): (usize, bool, usize),
) -> (Entry, Vec<Inst>, usize) {
    let line = SortLine::new(g, key, root, (axis, descending, run));
    line.identity_permutation(g);
    g.push(Inst::StorageBarrier);
    line.bitonic_network(g);
    let workgroups = line.lines.mul(&line.runs);
    let entry = Entry {
        workgroup_size: line.wg,
        per_invocation: false,
        count: Expr::size_u32(&workgroups),
        arrays: Vec::new(),
        subgroup_id: false,
    };
    (entry, g.take_body(), workgroups.literal())
}

/// The long loops a network of `stages` stages shares the loop budget
/// among: lavapipe's loop limit counts every iteration of the
/// invocation, and the identity loop and each step's pair loop share it
/// (the stage and step loops' few hundred come from the fixed
/// allowance). They are counted for the most stages of the network's
/// bucket (`STAGE_BUCKETS`; a u32 length has at most 32), each bound
/// tested recorded in `guards`, so that the budget is the same for every
/// length of the bucket.
fn network_loops(guards: &mut Guards, stages: &Sz) -> usize {
    let budget = "a sort's loop budget";
    let most = (STAGE_BUCKETS.into_iter())
        .find(|&most| guards.at_most(stages, most, budget))
        .unwrap_or(32);
    most * (most + 1) / 2 + 1
}

/// One line's sort as the parts of the kernel see it: the input, the
/// line's geometry, the network's sizes and the output buffer holding
/// the indices (kept together so each part of the network is a method).
struct SortLine {
    /// The input node whose values are compared.
    x: usize,
    /// The `Sort` node, whose output holds the indices.
    root: usize,
    shape: Vec<Sz>,
    axes: [usize; 1],
    /// The line this workgroup sorts (part of).
    line: Expr,
    /// The line position of the first element this workgroup sorts.
    start: Expr,
    /// The number of elements this workgroup sorts (a run's, the last
    /// run of a line possibly shorter).
    count: Expr,
    /// Runs a line is sorted in (1: whole lines).
    runs: Sz,
    dtype: DType,
    descending: bool,
    /// Elements sorted together: a line's, or a run's.
    len: Sz,
    /// Lines in all (workgroups).
    lines: Sz,
    /// `len` rounded up to a power of two.
    padded: Sz,
    /// `log2(padded)`.
    stages: Sz,
    /// Comparators in each step.
    pairs: Sz,
    /// Invocations of the workgroup.
    wg: usize,
    /// The loop budget every strided loop shares.
    loops: usize,
}

impl SortLine {
    /// The sizes of the network along `axis` of `root`'s input, and the
    /// line variable (emitted first, as the kernel's first statement).
    fn new(
        g: &mut Gen,
        key: &GraphKey,
        root: usize,
        (axis, descending, run): (usize, bool, usize),
    ) -> Self {
        let x = key.nodes[root].inputs[0];
        let shape = Sz::shape(x, &key.nodes[x].shape);
        let dtype = key.nodes[x].dtype.compute();
        let line_sz = shape[axis].clone();
        let one = Sz::constant(1);
        let lines = elements(&shape).div_by(&line_sz.max(&one));
        // Elements sorted together: the line's, or a run's where the line
        // is longer. The network's size is their next power of two.
        let len_sz = match run == 0 || !g.guards.at_least(&line_sz, run + 1, "a sort by runs") {
            true => line_sz.clone(),
            false => Sz::constant(run),
        };
        let runs = line_sz.div_ceil(&len_sz.max(&one)).max(&one);
        // The network's stages are the bits of `len - 1` (none for one
        // element or none): sizes, so that a length that changes between
        // steps keeps the kernel.
        let stages = len_sz.sub(&one).bits();
        let padded = stages.pow2();
        let pairs = padded.div(2);
        let lines_sz = ((0..shape.len()).filter(|&d| d != axis))
            .fold(Sz::constant(1), |acc, d| acc.mul(&shape[d]));
        let many = "a sort's workgroup (one line, or many)";
        let per_comparator = "a sort's workgroup (one invocation a comparator)";
        let small = g.guards.at_most(&pairs, SMALL_SORT_PAIRS, per_comparator);
        let wg = match small || g.guards.at_least(&lines_sz, 2, many) {
            true if g.guards.at_least(&pairs, SORT_WORKGROUP, per_comparator) => SORT_WORKGROUP,
            true => g.guards.value(&pairs, per_comparator).max(1),
            false => SORT_WORKGROUP,
        };
        let loops = network_loops(&mut g.guards, &stages);
        // One run a line where the guard above found the line no longer
        // than a run (`runs` is then 1).
        let (line, start, count) = if runs.literal() == 1 {
            let line = g.emit("o", Ty::U32, Expr::Invocation);
            (line, Expr::U32(0), Expr::size_u32(&len_sz))
        } else {
            let line = g.emit("o", Ty::U32, sarith(Arith::Div, Expr::Invocation, &runs));
            let r = sarith(Arith::Rem, Expr::Invocation, &runs);
            let start = g.emit("s", Ty::U32, sarith(Arith::Mul, r, &len_sz));
            let left = Expr::arith(Arith::Sub, Expr::size_u32(&line_sz), start.clone());
            let count = Expr::Call {
                f: crate::kernel::ir::Builtin::Min,
                args: vec![left, Expr::size_u32(&len_sz)],
            };
            (line, start, g.emit("n", Ty::U32, count))
        };
        SortLine {
            x,
            root,
            shape,
            axes: [axis],
            line,
            start,
            count,
            runs,
            dtype,
            descending,
            len: len_sz,
            lines,
            padded,
            stages,
            pairs,
            wg,
            loops,
        }
    }

    /// The flat position of element `k` of what this workgroup sorts.
    fn position(&self, g: &mut Gen, k: Expr) -> Expr {
        let k = self.in_line(k);
        g.emit(
            "p",
            Ty::U32,
            split_index(&self.shape, &self.axes, &self.line, &k),
        )
    }

    /// The line position of element `k` of what this workgroup sorts.
    fn in_line(&self, k: Expr) -> Expr {
        if self.runs.literal() > 1 {
            Expr::arith(Arith::Add, self.start.clone(), k)
        } else {
            k
        }
    }

    /// The original index stored at flat position `p` (through the
    /// output's binding parts: indices past 128 MiB lie in a second).
    fn index_at(&self, g: &mut Gen, p: &Expr) -> Expr {
        let i = g.load_output(0, self.root, p);
        g.emit("ix", Ty::scalar(DType::I32), i)
    }

    /// The input's value at original index `ix` of this line: the key the
    /// network compares.
    fn key_at(&self, g: &mut Gen, ix: &Expr) -> Expr {
        key_at(g, self.x, (&self.shape, self.axes[0], &self.line), ix)
    }

    /// Writes the identity permutation, the indices the network starts
    /// from.
    fn identity_permutation(&self, g: &mut Gen) {
        let wg = Sz::constant(self.wg);
        strided_within(g, (&Expr::Local, &wg, &self.len), self.loops, &|g, k| {
            let body = g.block(|g| {
                let p = self.position(g, k.clone());
                let index = self.in_line(k.clone());
                let value = Expr::Construct {
                    ty: Ty::scalar(DType::I32),
                    x: Box::new(index),
                };
                let store = g.store(0, self.root, &p, value, false);
                g.push(store);
            });
            guarded(
                g,
                self.runs.literal() > 1,
                Expr::arith(Arith::Lt, k.clone(), self.count.clone()),
                body,
            );
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
            count: Expr::size_u32(&self.stages),
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
            sarith(Arith::Add, Expr::Var(step), &self.stages),
            Expr::Var(stage),
        );
        let half = Expr::arith(Arith::Shr, Expr::size_u32(&self.padded), shift);
        let half = g.emit("half", Ty::U32, half);
        let mirrored = g.emit(
            "h",
            Ty::BOOL,
            Expr::arith(Arith::Eq, Expr::Var(step), Expr::U32(0)),
        );
        strided_within(
            g,
            (&Expr::Local, &Sz::constant(self.wg), &self.pairs),
            self.loops,
            &|g, t| {
                let (a, b) = comparator(g, t, &half, &mirrored);
                let body = g.block(|g| self.compare_and_swap(g, &a, &b));
                g.push(Inst::If {
                    cond: Expr::arith(Arith::Lt, b, self.count.clone()),
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
        let body = vec![
            g.store(0, self.root, &pa, ib, false),
            g.store(0, self.root, &pb, ia, false),
        ];
        g.push(Inst::If { cond: swap, body });
    }
}

/// The value of input `x` (of `shape`, sorted along `axis`) at original
/// index `ix` of `line`: the key a sort or a merge compares.
fn key_at(g: &mut Gen, x: usize, (shape, axis, line): (&[Sz], usize, &Expr), ix: &Expr) -> Expr {
    let k = Expr::Construct {
        ty: Ty::U32,
        x: Box::new(ix.clone()),
    };
    let p = g.emit("q", Ty::U32, split_index(shape, &[axis], line, &k));
    g.value(x, &p, false, false)
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

/// The kernel of `MergeRuns { axis, descending, run }` at `root`: an
/// invocation per element `p` of a line, whose index (in the second
/// input, sorted in runs of `run`) goes to its place in the merge of its
/// run and the other run of its pair: its position in its own run plus
/// the number of the other run's elements that come before it, found by
/// binary search (keys are distinct: ties are ordered by the original
/// index). Returns the entry, body and workgroup count.
pub(super) fn merge_runs(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    (axis, descending, run): (usize, bool, usize),
) -> (Entry, Vec<Inst>, usize) {
    let (x, sorted) = (key.nodes[root].inputs[0], key.nodes[root].inputs[1]);
    let shape = Sz::shape(x, &key.nodes[x].shape);
    let len_sz = shape[axis].clone();
    let line = g.emit("o", Ty::U32, sarith(Arith::Div, Expr::Invocation, &len_sz));
    let p = g.emit("e", Ty::U32, sarith(Arith::Rem, Expr::Invocation, &len_sz));
    let m = MergeLine {
        x,
        sorted,
        shape: shape.clone(),
        axes: [axis],
        line,
        dtype: key.nodes[x].dtype.compute(),
        descending,
    };
    let pair = Pair::of(g, &p, run, &len_sz);
    let own_at = m.at(g, &p);
    let mine = g.value(sorted, &own_at, false, false);
    let mine = g.emit("ix", Ty::scalar(DType::I32), mine);
    let my_key = m.key_of(g, &mine);
    let before = m.count_before(g, (&pair, run), (&mine, &my_key));
    let within = Expr::arith(Arith::Sub, p, pair.own_start);
    let dest = Expr::arith(
        Arith::Add,
        Expr::arith(Arith::Add, pair.base, within),
        before,
    );
    let dest = g.emit("d", Ty::U32, dest);
    let dest_at = m.at(g, &dest);
    let store = g.store(0, root, &dest_at, mine, false);
    g.push(store);
    let total = elements(&shape);
    let entry = Entry::per_invocation_of(&total);
    let groups = Entry::groups_for(total.literal());
    (entry, g.take_body(), groups)
}

/// One line of a merge as its kernel sees it: the input compared, the
/// indices sorted in runs, the line's geometry and the order.
struct MergeLine {
    x: usize,
    sorted: usize,
    shape: Vec<Sz>,
    axes: [usize; 1],
    line: Expr,
    dtype: DType,
    descending: bool,
}

/// The two runs an element's run is merged with: where the merged run
/// starts (`base`), where the element's own run starts, and the other
/// run's start and length (shorter, or empty, past the line's end).
struct Pair {
    base: Expr,
    own_start: Expr,
    other: Expr,
    other_len: Expr,
}

impl Pair {
    /// The pair of runs of `run` elements that line position `p` (of a
    /// line of `len`) is merged in.
    fn of(g: &mut Gen, p: &Expr, run: usize, len: &Sz) -> Pair {
        let base = uarith(Arith::Mul, uarith(Arith::Div, p.clone(), 2 * run), 2 * run);
        let base = g.emit("pb", Ty::U32, base);
        let left = uarith(Arith::Rem, uarith(Arith::Div, p.clone(), run), 2);
        let left = g.emit("l", Ty::BOOL, uarith(Arith::Eq, left, 0));
        let select = |a: Expr, b: Expr| Expr::Select {
            cond: Box::new(left.clone()),
            then: Box::new(a),
            otherwise: Box::new(b),
        };
        let middle = uarith(Arith::Add, base.clone(), run);
        let own_start = g.emit("os", Ty::U32, select(base.clone(), middle.clone()));
        let other = g.emit("ob", Ty::U32, select(middle, base.clone()));
        let remaining = Expr::arith(Arith::Sub, Expr::size_u32(len), other.clone());
        let other_len = Expr::Select {
            cond: Box::new(sarith(Arith::Lt, other.clone(), len)),
            then: Box::new(Expr::Call {
                f: crate::kernel::ir::Builtin::Min,
                args: vec![remaining, Expr::U32(run as u64)],
            }),
            otherwise: Box::new(Expr::U32(0)),
        };
        let other_len = g.emit("on", Ty::U32, other_len);
        Pair {
            base,
            own_start,
            other,
            other_len,
        }
    }
}

impl MergeLine {
    /// The flat position of line position `k`.
    fn at(&self, g: &mut Gen, k: &Expr) -> Expr {
        g.emit(
            "p",
            Ty::U32,
            split_index(&self.shape, &self.axes, &self.line, k),
        )
    }

    /// The input's value at original index `ix` of this line.
    fn key_of(&self, g: &mut Gen, ix: &Expr) -> Expr {
        key_at(g, self.x, (&self.shape, self.axes[0], &self.line), ix)
    }

    /// How many of the other run's elements come before `(mine,
    /// my_key)`: a binary search of at most `log2(run) + 1` halvings.
    fn count_before(
        &self,
        g: &mut Gen,
        (pair, run): (&Pair, usize),
        (mine, my_key): (&Expr, &Expr),
    ) -> Expr {
        let lo = g.variable_of("lo", Ty::U32, Expr::U32(0));
        let hi = g.variable_of("hi", Ty::U32, pair.other_len.clone());
        let step = g.block(|g| {
            let mid = Expr::arith(Arith::Add, lo.clone(), hi.clone());
            let mid = g.emit("mid", Ty::U32, uarith(Arith::Shr, mid, 1));
            let pos = Expr::arith(Arith::Add, pair.other.clone(), mid.clone());
            let pos = self.at(g, &pos);
            let theirs = g.value(self.sorted, &pos, false, false);
            let theirs = g.emit("jx", Ty::scalar(DType::I32), theirs);
            let their_key = self.key_of(g, &theirs);
            let first = comes_first(
                (&their_key, &theirs),
                (my_key, mine),
                self.dtype,
                self.descending,
            );
            let first = g.emit("h", Ty::BOOL, first);
            let choose = |a: Expr, b: Expr| Expr::Select {
                cond: Box::new(first.clone()),
                then: Box::new(a),
                otherwise: Box::new(b),
            };
            let up = g.emit(
                "nl",
                Ty::U32,
                choose(uarith(Arith::Add, mid.clone(), 1), lo.clone()),
            );
            let down = g.emit("nh", Ty::U32, choose(hi.clone(), mid));
            g.assign(&lo, up);
            g.assign(&hi, down);
        });
        let search = vec![Inst::If {
            cond: Expr::arith(Arith::Lt, lo.clone(), hi.clone()),
            body: step,
        }];
        let counter = g.fresh("j");
        g.push(Inst::Loop {
            counter,
            count: Expr::count(run.next_power_of_two().trailing_zeros() as usize + 1),
            unroll: 1,
            body: search,
        });
        lo
    }
}
