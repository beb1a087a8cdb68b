//! `Op::TopkSelect`, built as IR: a workgroup per line finds, by a radix
//! select over order-preserving `u32` keys, the key of the line's `k`-th
//! element in a stable sort, then writes the indices of the elements it
//! picks in increasing index order. Cost: ten passes over the line, a
//! few barriers each, where a sort of the line (`sort.rs`) takes
//! `log2(n)^2 / 2` passes with a barrier after each (a top-50 of 8 lines
//! of 50,257 on a Xeon's lavapipe: 178 ms by chunked sorts, see
//! PERFORMANCE.md for this kernel's).
//!
//! Keys (`keys::order_key`) order as the stable sort does; for the least
//! they are flipped. The picked elements are then: every key above the threshold
//! key `T`, and the first `want` keys equal to it in index order.
//!
//! The select fixes `T` four bits a pass from the top: each invocation
//! counts, over a strided share of the line, the keys that match the
//! bits fixed so far, per value of the next four; the workgroup sums the
//! sixteen counts (`hist`, then `totals`); every invocation then walks
//! the totals from the greatest digit down to the one where the `want`
//! still missing are reached.
//!
//! The indices are written in order by contiguous strips: each
//! invocation counts its strip's keys above `T` and equal to it, one
//! invocation turns those counts into exclusive prefix sums, and each
//! strip writes its picks from there.

use super::emit::Gen;
use super::keys::{count_digit, digit_counters, digit_of, one_if, order_key};
use super::reduce_ir::{sarith, uarith};
use super::vectorize::vectorizable;
use super::wgsl::unroll_guarded;
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::RadixPass;
use crate::kernel::ir::{Arith, Builtin, Expr, Inst, Ty, Var};
use crate::kernel::{Entry, Sz, WorkgroupArray};

/// Invocations of a line's workgroup: 128, so that the per-invocation
/// digit counts (`hist`, 8 KiB) and the strips' counts fit in the 16 KiB
/// of workgroup memory every adapter has (64 and 256 ran alike on a
/// Xeon's lavapipe).
const SELECT_WORKGROUP: usize = 128;

/// Bits of the key fixed per pass (a radix pass's digit), values of such
/// a digit, and the passes that fix all 32.
const DIGIT_BITS: usize = RadixPass::DIGIT_BITS;
const DIGITS: usize = RadixPass::DIGITS;
const PASSES: usize = 32 / DIGIT_BITS;

/// The kernel of `TopkSelect { k, largest }` at `root`: its entry, body
/// and workgroup count (one per line).
pub(super) fn topk_select(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    (k, largest): (usize, bool),
) -> (Entry, Vec<Inst>, usize) {
    let x = key.nodes[root].inputs[0];
    let shape = &key.nodes[x].shape;
    let elements = Sz::elements(x, shape);
    let len = Sz::last_dim(x, shape).max(&Sz::constant(1));
    let lines = elements.div_by(&len);
    // The output's rows are the `k` picked: its last dimension.
    let k = Sz::last_dim_or(root, &key.nodes[root].shape, k);
    let line = g.emit("o", Ty::U32, Expr::Invocation);
    let sel = Select {
        x,
        root,
        line_start: g.emit("ls", Ty::U32, sarith(Arith::Mul, line.clone(), &len)),
        out_start: g.emit("os", Ty::U32, sarith(Arith::Mul, line, &k)),
        len,
        k,
        largest,
        hist: g.fresh("hist"),
        totals: g.fresh("tot"),
        above: g.fresh("gt"),
        equal: g.fresh("eq"),
        // Strip loops (ten, the radix passes' inside the pass loop) and
        // the workgroup-wide loops (the sums of each pass, the prefix
        // sums) share lavapipe's loop limit.
        budget: g.context().target.loop_budget(2 * PASSES + 3),
        by_fours: key.nodes[x].dtype == DType::F32
            && vectorizable(&key.nodes, x, g.stored, false, &mut g.guards)
            && (g.guards).multiple_of(&elements, 4, "a top-k's lines read four elements a load"),
    };
    let (threshold, want) = sel.radix_select(g);
    sel.write_picks(g, &threshold, &want);
    let array = |var, len| WorkgroupArray {
        var,
        element: Ty::U32,
        len,
    };
    let entry = Entry {
        workgroup_size: SELECT_WORKGROUP,
        per_invocation: false,
        count: Expr::size_u32(&lines),
        arrays: vec![
            array(sel.hist, DIGITS * SELECT_WORKGROUP),
            array(sel.totals, DIGITS),
            array(sel.above, SELECT_WORKGROUP),
            array(sel.equal, SELECT_WORKGROUP),
        ],
        subgroup_id: false,
    };
    (entry, g.take_body(), lines.literal())
}

/// A group's four keys, each with whether its element lies in the line.
type GroupKeys = Vec<(Expr, Expr)>;

/// One line's select as the parts of the kernel see it.
struct Select {
    /// The input node, selected along its last dim.
    x: usize,
    /// The `TopkSelect` node, whose output holds the indices.
    root: usize,
    len: Sz,
    k: Sz,
    largest: bool,
    /// This line's first element in the input, and in the output.
    line_start: Expr,
    out_start: Expr,
    /// Workgroup arrays: per digit and invocation the matching keys;
    /// per digit their sum; per invocation its strip's keys above the
    /// threshold and equal to it (then their exclusive prefix sums).
    hist: Var,
    totals: Var,
    above: Var,
    equal: Var,
    /// Iterations each long loop may take (`Target::loop_budget`).
    budget: Option<usize>,
    /// Whether the radix passes read the input four elements a load: a
    /// stored `f32` read at its own positions (`vectorizable`) whose
    /// element count is a whole number of groups.
    by_fours: bool,
}

impl Select {
    /// The order-preserving key of line element `j`.
    fn key_of(&self, g: &mut Gen, j: &Expr) -> Expr {
        let at = g.emit(
            "p",
            Ty::U32,
            Expr::arith(Arith::Add, self.line_start.clone(), j.clone()),
        );
        let v = g.value(self.x, &at, false, false);
        let v = g.emit("v", Ty::F32, v);
        order_key(g, &v, DType::F32, !self.largest)
    }

    /// A loop of `body(j)` over `trips` iterations, unrolled where that
    /// passes the loop budget.
    fn looped(&self, g: &mut Gen, trips: &Sz, body: &dyn Fn(&mut Gen, Expr)) {
        let counter = g.fresh("j");
        let body = g.block(|g| body(g, Expr::Var(counter)));
        let unroll = unroll_guarded(trips, self.budget, &mut g.guards);
        g.push(Inst::Loop {
            counter,
            count: Expr::size_u32(trips),
            unroll,
            body,
        });
    }

    /// The threshold key `T` and how many keys equal to it are picked,
    /// fixed four bits a pass.
    fn radix_select(&self, g: &mut Gen) -> (Expr, Expr) {
        let prefix = g.variable_of("pre", Ty::U32, Expr::U32(0));
        let want = g.variable_of("want", Ty::U32, Expr::size_u32(&self.k));
        let pass = g.fresh("pass");
        let body = g.block(|g| self.radix_pass(g, &Expr::Var(pass), (&prefix, &want)));
        g.push(Inst::Loop {
            counter: pass,
            count: Expr::count(PASSES),
            unroll: 1,
            body,
        });
        (prefix, want)
    }

    /// One pass: the digit `DIGIT_BITS` below those fixed so far.
    fn radix_pass(&self, g: &mut Gen, pass: &Expr, (prefix, want): (&Expr, &Expr)) {
        let shift = Expr::arith(
            Arith::Sub,
            Expr::count(32 - DIGIT_BITS),
            uarith(Arith::Mul, pass.clone(), DIGIT_BITS),
        );
        let shift = g.emit("sh", Ty::U32, shift);
        // The bits above the digit, as the prefix holds them (two shifts:
        // one by 32 would be by 0).
        let high = |e: Expr| {
            let down = Expr::arith(Arith::Shr, e, shift.clone());
            uarith(Arith::Shr, down, DIGIT_BITS)
        };
        let fixed = g.emit("fx", Ty::U32, high(prefix.clone()));
        let counts = digit_counters(g, &|_, _| Expr::U32(0));
        let count_key = |g: &mut Gen, key: Expr, inside: Option<Expr>| {
            let hit = Expr::arith(Arith::Eq, high(key.clone()), fixed.clone());
            let hit = match inside {
                Some(inside) => Expr::arith(Arith::And, inside, hit),
                None => hit,
            };
            let hit = g.emit("h", Ty::BOOL, hit);
            let digit = digit_of(g, key, shift.clone());
            count_digit(g, &counts, &digit, Some(&hit));
        };
        if self.by_fours {
            self.over_groups(g, &|g, keys| {
                for (key, inside) in keys {
                    count_key(g, key, Some(inside));
                }
            });
        } else {
            let trips = self.len.div_ceil(&Sz::constant(SELECT_WORKGROUP));
            self.looped(g, &trips, &|g, j| {
                let at = uarith(Arith::Mul, j, SELECT_WORKGROUP);
                let e = g.emit("e", Ty::U32, Expr::arith(Arith::Add, at, Expr::Local));
                let inside = sarith(Arith::Lt, e.clone(), &self.len);
                let body = g.block(|g| {
                    let key = self.key_of(g, &e);
                    count_key(g, key, None);
                });
                g.push(Inst::If { cond: inside, body });
            });
        }
        for (d, count) in counts.iter().enumerate() {
            let slot = uarith(Arith::Add, Expr::Local, d * SELECT_WORKGROUP);
            g.push(set(self.hist, slot, count.clone()));
        }
        g.push(Inst::Barrier);
        self.sum_counts(g);
        g.push(Inst::Barrier);
        self.fix_digit(g, (&shift, prefix, want));
    }

    /// `totals[d]`, the sum over the workgroup of `hist`'s counts of
    /// digit `d`: by invocation `d`.
    fn sum_counts(&self, g: &mut Gen) {
        let body = g.block(|g| {
            let sum = g.variable_of("s", Ty::U32, Expr::U32(0));
            let base = g.emit(
                "hb",
                Ty::U32,
                uarith(Arith::Mul, Expr::Local, SELECT_WORKGROUP),
            );
            self.looped(g, &Sz::constant(SELECT_WORKGROUP), &|g, t| {
                let at = Expr::arith(Arith::Add, base.clone(), t);
                g.accumulate(&sum, Expr::index(Expr::Var(self.hist), at));
            });
            g.push(set(self.totals, Expr::Local, sum));
        });
        g.push(Inst::If {
            cond: uarith(Arith::Lt, Expr::Local, DIGITS),
            body,
        });
    }

    /// From the greatest digit down, the first at which the keys counted
    /// reach `want`: it joins the prefix, and the keys of greater digits
    /// leave `want`.
    fn fix_digit(&self, g: &mut Gen, (shift, prefix, want): (&Expr, &Expr, &Expr)) {
        let seen = g.variable_of("cum", Ty::U32, Expr::U32(0));
        let digit = g.variable_of("dg", Ty::U32, Expr::U32(0));
        let before = g.variable_of("bf", Ty::U32, Expr::U32(0));
        let found = g.variable_of("fd", Ty::BOOL, Expr::Bool(false));
        for d in (0..DIGITS).rev() {
            let count = g.emit(
                "t",
                Ty::U32,
                Expr::index(Expr::Var(self.totals), Expr::count(d)),
            );
            let reached = Expr::arith(Arith::Add, seen.clone(), count.clone());
            let take = Expr::arith(
                Arith::And,
                Expr::Not(Box::new(found.clone())),
                Expr::arith(Arith::Ge, reached.clone(), want.clone()),
            );
            let take = g.emit("tk", Ty::BOOL, take);
            g.assign(
                &digit,
                Expr::select(take.clone(), Expr::count(d), digit.clone()),
            );
            g.assign(
                &before,
                Expr::select(take.clone(), seen.clone(), before.clone()),
            );
            g.assign(&found, Expr::arith(Arith::Or, found.clone(), take));
            g.assign(&seen, reached);
        }
        g.assign(want, Expr::arith(Arith::Sub, want.clone(), before));
        // `digit << shift`: the top bit shifted down to bit `shift`.
        let placed = Expr::arith(
            Arith::Mul,
            digit,
            Expr::arith(
                Arith::Shr,
                Expr::U32(1 << 31),
                Expr::arith(Arith::Sub, Expr::count(31), shift.clone()),
            ),
        );
        g.assign(prefix, Expr::arith(Arith::Add, prefix.clone(), placed));
    }

    /// `each(g, keys)` over the groups of four elements (of the input's
    /// row-major elements) that hold this line's, strided over the
    /// workgroup: each group read as one `vec4` (a quarter of the loads,
    /// each a loop over the SIMD lanes on lavapipe), its four keys with
    /// whether each element lies in the line.
    fn over_groups(&self, g: &mut Gen, each: &dyn Fn(&mut Gen, GroupKeys)) {
        let first = g.emit(
            "g0",
            Ty::U32,
            uarith(Arith::Div, self.line_start.clone(), 4),
        );
        let end = g.emit(
            "le",
            Ty::U32,
            sarith(Arith::Add, self.line_start.clone(), &self.len),
        );
        // A line of `len` spans at most `len / 4 + 2` groups.
        let groups = self.len.div(4).add(&Sz::constant(2));
        let trips = groups.div_ceil(&Sz::constant(SELECT_WORKGROUP));
        self.looped(g, &trips, &|g, j| {
            let at = uarith(Arith::Mul, j, SELECT_WORKGROUP);
            let at = Expr::arith(Arith::Add, at, Expr::Local);
            let group = g.emit("gr", Ty::U32, Expr::arith(Arith::Add, first.clone(), at));
            let base = g.emit("ge", Ty::U32, uarith(Arith::Mul, group.clone(), 4));
            let body = g.block(|g| {
                let v = g.value(self.x, &group, false, true);
                let v = g.emit("v", Ty::of(DType::F32, true), v);
                let keys = (0..4)
                    .map(|q| {
                        let lane = Expr::index(v.clone(), Expr::U32(q as u64));
                        let key = order_key(g, &lane, DType::F32, !self.largest);
                        let e = g.emit("e", Ty::U32, uarith(Arith::Add, base.clone(), q));
                        let inside = Expr::arith(
                            Arith::And,
                            Expr::arith(Arith::Ge, e.clone(), self.line_start.clone()),
                            Expr::arith(Arith::Lt, e, end.clone()),
                        );
                        (key, inside)
                    })
                    .collect();
                each(g, keys);
            });
            g.push(Inst::If {
                cond: Expr::arith(Arith::Lt, base, end.clone()),
                body,
            });
        });
    }

    /// Writes the picked indices in index order, strip by strip.
    fn write_picks(&self, g: &mut Gen, threshold: &Expr, want: &Expr) {
        let strip = self.len.div_ceil(&Sz::constant(SELECT_WORKGROUP));
        let first = g.emit("sf", Ty::U32, sarith(Arith::Mul, Expr::Local, &strip));
        let above = g.variable_of("na", Ty::U32, Expr::U32(0));
        let equal = g.variable_of("ne", Ty::U32, Expr::U32(0));
        self.over_strip(g, (&first, &strip), &|g, _, key| {
            let gt = Expr::arith(Arith::Lt, threshold.clone(), key.clone());
            g.accumulate(&above, one_if(gt));
            let eq = Expr::arith(Arith::Eq, key.clone(), threshold.clone());
            g.accumulate(&equal, one_if(eq));
        });
        g.push(set(self.above, Expr::Local, above));
        g.push(set(self.equal, Expr::Local, equal));
        g.push(Inst::Barrier);
        self.prefix_sums(g);
        g.push(Inst::Barrier);
        let equal_before = Expr::index(Expr::Var(self.equal), Expr::Local);
        let seen = g.variable_of("sn", Ty::U32, equal_before.clone());
        let taken = Expr::call(Builtin::Min, vec![equal_before, want.clone()]);
        let at = Expr::arith(
            Arith::Add,
            Expr::index(Expr::Var(self.above), Expr::Local),
            taken,
        );
        let pos = g.variable_of("pos", Ty::U32, at);
        self.over_strip(g, (&first, &strip), &|g, e, key| {
            let eq = g.emit(
                "h",
                Ty::BOOL,
                Expr::arith(Arith::Eq, key.clone(), threshold.clone()),
            );
            let pick = Expr::arith(
                Arith::Or,
                Expr::arith(Arith::Lt, threshold.clone(), key.clone()),
                Expr::arith(
                    Arith::And,
                    eq.clone(),
                    Expr::arith(Arith::Lt, seen.clone(), want.clone()),
                ),
            );
            // Never past the line's k slots, whatever the keys read.
            let room = sarith(Arith::Lt, pos.clone(), &self.k);
            let pick = g.emit("pk", Ty::BOOL, Expr::arith(Arith::And, pick, room));
            let dest = Expr::arith(Arith::Add, self.out_start.clone(), pos.clone());
            let index = Expr::Construct {
                ty: Ty::scalar(DType::I32),
                x: Box::new(e.clone()),
            };
            let store = g.store(0, self.root, &dest, index, false);
            g.push(Inst::If {
                cond: pick.clone(),
                body: vec![store],
            });
            g.accumulate(&pos, one_if(pick));
            g.accumulate(&seen, one_if(eq));
        });
    }

    /// `each(g, e, key)` over the line elements `first .. first + strip`
    /// that exist, in order.
    fn over_strip(
        &self,
        g: &mut Gen,
        (first, strip): (&Expr, &Sz),
        each: &dyn Fn(&mut Gen, &Expr, &Expr),
    ) {
        self.looped(g, strip, &|g, j| {
            let e = g.emit("e", Ty::U32, Expr::arith(Arith::Add, first.clone(), j));
            let body = g.block(|g| {
                let key = self.key_of(g, &e);
                each(g, &e, &key);
            });
            g.push(Inst::If {
                cond: sarith(Arith::Lt, e, &self.len),
                body,
            });
        });
    }

    /// `above` and `equal` turned into exclusive prefix sums over the
    /// workgroup, by invocation 0.
    fn prefix_sums(&self, g: &mut Gen) {
        let body = g.block(|g| {
            let (sum_above, sum_equal) = (
                g.variable_of("ra", Ty::U32, Expr::U32(0)),
                g.variable_of("re", Ty::U32, Expr::U32(0)),
            );
            self.looped(g, &Sz::constant(SELECT_WORKGROUP), &|g, t| {
                for (array, sum) in [(self.above, &sum_above), (self.equal, &sum_equal)] {
                    let own = g.emit("w", Ty::U32, Expr::index(Expr::Var(array), t.clone()));
                    g.push(set(array, t.clone(), sum.clone()));
                    g.accumulate(sum, own);
                }
            });
        });
        g.push(Inst::If {
            cond: uarith(Arith::Eq, Expr::Local, 0),
            body,
        });
    }
}

/// `array[index] = value` on a workgroup array.
fn set(array: Var, index: Expr, value: Expr) -> Inst {
    Inst::SetElement {
        var: array,
        index,
        value,
    }
}
