//! Index simplification: rewrites a lowered kernel's `u32` index
//! arithmetic into fewer divisions and remainders, from what is known of
//! each value's range.
//!
//! Why: lowering builds an element's address through every view on its
//! way (a pooling window's position from the output's index and the
//! window's, then that position's address through the strides of the
//! view it lies in), each step a chain of `/` and `%` by the shape's
//! sizes. Composed, most of them cancel: `((o * 4 + r) / 4) % 12` is
//! `o % 12` where `r < 4`. Left in, they are a vector division each on a
//! CPU adapter (lavapipe), where the MNIST CNN's pooling kernels spent
//! more time on them than on their loads.
//!
//! A `u32` expression is read as a sum of atoms times constants plus a
//! constant (`Lin`), seeing through the definitions of earlier pure
//! `u32` values, and rebuilt with these rules, each exact for
//! non-negative integers and applied only where the sum is known not to
//! exceed `u32::MAX` (so no step of the original wrapped):
//! - `(k a + r) / k = a + r / k`, and `r / k = 0` where `r < k`;
//! - `(k a + r) % k = r % k`, and `r % k = r` where `r < k`;
//! - `(x / a) / b = x / (a b)`, `(x % (m k)) % k = x % k`;
//! - `(y % k) c + (x / (a k)) (c k) = y c` where `y = x / a`.
//!
//! A value's rewrite is kept only where it costs less than what lowering
//! wrote (`cost`), so that nothing gets dearer. Ranges come from the
//! kernel's launch (`gi < count`, `lid < workgroup size`), loop counters,
//! remainders, divisions and `min`.

use std::collections::{HashMap, HashSet};

use super::ir::{Arith, Builtin, Expr, Inst, Ty, Var};
use super::program::Entry;

/// The values a `u32` may take, `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    lo: u64,
    hi: u64,
}

const MAX: u64 = u32::MAX as u64;
const ANY: Range = Range { lo: 0, hi: MAX };
/// Coefficients and constants are kept modulo 2^32, as the `u32`
/// arithmetic they stand for wraps: a sum then equals its value wherever
/// its range (from the reduced coefficients) stays below 2^32.
const MOD: u64 = 1 << 32;

impl Range {
    fn exactly(v: u64) -> Range {
        Range { lo: v, hi: v }
    }

    /// Below `n` (`n > 0`).
    fn below(n: u64) -> Range {
        Range {
            lo: 0,
            hi: n.saturating_sub(1),
        }
    }

    /// Below a launch's or a loop's `count` where it is a literal.
    fn below_count(count: &Expr) -> Range {
        match count {
            Expr::U32(n) if *n > 0 => Range::below(*n),
            _ => ANY,
        }
    }
}

/// A `u32` value as `sum(coefficient * atom) + constant`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Lin {
    terms: Vec<(Expr, u64)>,
    constant: u64,
}

impl Lin {
    fn constant(c: u64) -> Lin {
        Lin {
            terms: Vec::new(),
            constant: c % MOD,
        }
    }

    fn atom(e: Expr) -> Lin {
        match e {
            Expr::U32(c) => Lin::constant(c),
            e => Lin {
                terms: vec![(e, 1)],
                constant: 0,
            },
        }
    }

    fn add_term(&mut self, atom: Expr, coefficient: u64) {
        let coefficient = coefficient % MOD;
        if coefficient == 0 {
            return;
        }
        match self.terms.iter().position(|(a, _)| *a == atom) {
            Some(i) => {
                self.terms[i].1 = (self.terms[i].1 + coefficient) % MOD;
                if self.terms[i].1 == 0 {
                    self.terms.remove(i);
                }
            }
            None => self.terms.push((atom, coefficient)),
        }
    }

    fn plus(mut self, other: Lin) -> Lin {
        for (atom, c) in other.terms {
            self.add_term(atom, c);
        }
        self.constant = (self.constant + other.constant) % MOD;
        self
    }

    fn times(mut self, k: u64) -> Lin {
        let k = k % MOD;
        self.terms.iter_mut().for_each(|(_, c)| *c = *c * k % MOD);
        self.terms.retain(|(_, c)| *c != 0);
        self.constant = self.constant * k % MOD;
        self
    }

    fn is_zero(&self) -> bool {
        self.terms.is_empty() && self.constant == 0
    }

    /// The one atom this is, if it is one atom times 1.
    fn single(&self) -> Option<&Expr> {
        match (self.terms.as_slice(), self.constant) {
            ([(atom, 1)], 0) => Some(atom),
            _ => None,
        }
    }

    /// The expression: its terms in order, then the constant.
    fn expr(&self) -> Expr {
        let mut parts: Vec<Expr> = (self.terms.iter())
            .map(|(atom, c)| match c {
                1 => atom.clone(),
                c => Expr::arith(Arith::Mul, atom.clone(), Expr::U32(*c)),
            })
            .collect();
        if self.constant != 0 || parts.is_empty() {
            parts.push(Expr::U32(self.constant));
        }
        Expr::sum(parts)
    }
}

/// What is known while walking a body: each pure `u32` value's sum (to
/// see through it), each value's range, and which variables change.
struct Facts {
    sums: HashMap<Var, Lin>,
    ranges: HashMap<Var, Range>,
    mutable: HashSet<Var>,
    invocation: Range,
    local: Range,
    /// Whether a rewrite is kept only where it costs less (tests check
    /// every rewrite's value by keeping all of them).
    cheaper_only: bool,
}

/// `body`, launched as `entry`, with its index arithmetic simplified.
pub(crate) fn simplify_indices(body: Vec<Inst>, entry: &Entry) -> Vec<Inst> {
    rewrite_indices(body, entry, true)
}

/// `simplify_indices`, keeping every rewrite where `cheaper_only` is
/// false (for tests of the rules' values).
fn rewrite_indices(mut body: Vec<Inst>, entry: &Entry, cheaper_only: bool) -> Vec<Inst> {
    let invocation = Range::below_count(&entry.count);
    let mut facts = Facts {
        sums: HashMap::new(),
        ranges: HashMap::new(),
        mutable: HashSet::new(),
        invocation,
        local: Range::below(entry.workgroup_size as u64),
        cheaper_only,
    };
    facts.body(&mut body);
    body
}

impl Facts {
    fn body(&mut self, body: &mut [Inst]) {
        for inst in body {
            self.inst(inst);
        }
    }

    fn inst(&mut self, inst: &mut Inst) {
        match inst {
            Inst::Declare { var, .. } | Inst::DeclareArray { var, .. } => {
                self.mutable.insert(*var);
            }
            Inst::Loop { counter, count, .. } => {
                self.ranges.insert(*counter, Range::below_count(count));
            }
            _ => {}
        }
        if let Inst::Let { var, ty, value, .. } = inst {
            self.loads_in(value);
            if *ty == Ty::U32 {
                let (better, sum) = self.simplified(value);
                if let Some(better) = better {
                    *value = better;
                }
                self.ranges.insert(*var, self.range_of(&sum).unwrap_or(ANY));
                if self.pure(value) && self.range_of(&sum).is_some() {
                    self.sums.insert(*var, sum);
                }
            }
        } else {
            for e in inst.exprs_mut() {
                self.loads_in(e);
            }
            if let Inst::Store { index, .. } | Inst::Parts { index, .. } = inst {
                if let (Some(better), _) = self.simplified(index) {
                    *index = better;
                }
            }
        }
        if let Some(body) = inst.nested_body_mut() {
            self.body(body);
        }
    }

    /// Simplifies the index of every load in `e`.
    fn loads_in(&mut self, e: &mut Expr) {
        if let Expr::Load { index, .. } = e {
            if let (Some(better), _) = self.simplified(index) {
                **index = better;
            }
        }
        e.for_each_child_mut(|c| self.loads_in(c));
    }

    /// `e`'s sum, and its rebuilt expression where that costs less.
    fn simplified(&self, e: &Expr) -> (Option<Expr>, Lin) {
        let sum = self.recombined(self.lin(e));
        let rebuilt = sum.expr();
        let cheaper = !self.cheaper_only || cost(&rebuilt) < cost(e);
        (cheaper.then_some(rebuilt), sum)
    }

    /// Whether `e` reads only values that do not change (no loads, no
    /// mutable variables or arrays): its sum may stand in for it later.
    fn pure(&self, e: &Expr) -> bool {
        let mut pure = match e {
            Expr::Var(v) => !self.mutable.contains(v),
            Expr::Load { .. } | Expr::Index { .. } | Expr::Rng { .. } => false,
            Expr::Call { f, .. } => matches!(f, Builtin::Min | Builtin::Max),
            _ => true,
        };
        e.for_each_child(|c| pure &= self.pure(c));
        pure
    }

    /// `e` (a `u32`) as a sum.
    fn lin(&self, e: &Expr) -> Lin {
        match e {
            Expr::U32(c) => Lin::constant(*c),
            Expr::Var(v) => match self.sums.get(v) {
                Some(sum) => sum.clone(),
                None => Lin::atom(e.clone()),
            },
            Expr::Arith { op, a, b } => match (op, &**a, &**b) {
                (Arith::Add, a, b) => self.lin(a).plus(self.lin(b)),
                (Arith::Mul, x, Expr::U32(k)) | (Arith::Mul, Expr::U32(k), x) => {
                    self.lin(x).times(*k)
                }
                (Arith::Div | Arith::Rem, x, Expr::U32(k)) if *k > 0 => {
                    let x = self.lin(x);
                    match (self.range_of(&x), op) {
                        (None, _) => Lin::atom(Expr::arith(*op, x.expr(), Expr::U32(*k))),
                        (_, Arith::Div) => self.div(x, *k),
                        _ => self.rem(x, *k),
                    }
                }
                (Arith::Sub | Arith::Mul | Arith::Div | Arith::Rem | Arith::Shr, a, b) => {
                    let (a, b) = (self.lin(a).expr(), self.lin(b).expr());
                    Lin::atom(Expr::arith(*op, a, b))
                }
                _ => Lin::atom(e.clone()),
            },
            Expr::Call {
                f: f @ (Builtin::Min | Builtin::Max),
                args,
            } => {
                let args = args.iter().map(|a| self.lin(a).expr()).collect();
                Lin::atom(Expr::call(*f, args))
            }
            _ => Lin::atom(e.clone()),
        }
    }

    /// `x / k`, for a sum `x` that cannot pass `u32::MAX`.
    fn div(&self, x: Lin, k: u64) -> Lin {
        let mut whole = Lin::constant(x.constant / k);
        let mut rest = Lin::constant(x.constant % k);
        for (atom, c) in x.terms {
            match c % k {
                0 => whole.add_term(atom, c / k),
                _ => rest.add_term(atom, c),
            }
        }
        let below_k = self.range_of(&rest).is_some_and(|r| r.hi < k);
        if rest.is_zero() || below_k {
            return whole;
        }
        if let Some((g, above, _)) = self.factored(&rest, k) {
            return whole.plus(self.div(above, k / g));
        }
        let nested = (rest.single().and_then(|e| by_literal(e, Arith::Div)))
            .filter(|&(_, a)| a * k <= MAX)
            .map(|(y, a)| (y.clone(), a * k));
        let (y, k) = nested.unwrap_or((rest.expr(), k));
        whole.plus(Lin::atom(Expr::arith(Arith::Div, y, Expr::U32(k))))
    }

    /// `x % k`, for a sum `x` that cannot pass `u32::MAX`.
    fn rem(&self, x: Lin, k: u64) -> Lin {
        let mut rest = Lin::constant(x.constant % k);
        for (atom, c) in x.terms {
            rest.add_term(atom, c % k);
        }
        if self.range_of(&rest).is_some_and(|r| r.hi < k) {
            return rest;
        }
        if let Some((g, above, below)) = self.factored(&rest, k) {
            return self.rem(above, k / g).times(g).plus(below);
        }
        let nested = (rest.single().and_then(|e| by_literal(e, Arith::Rem)))
            .filter(|&(_, m)| m % k == 0)
            .map(|(y, _)| y.clone());
        let y = nested.unwrap_or_else(|| rest.expr());
        Lin::atom(Expr::arith(Arith::Rem, y, Expr::U32(k)))
    }

    /// `x` as `g a + r` with `g` a factor of `k` (greater than 1, the
    /// largest that works) and `0 <= r < g`, as `(g, a, r)`: then
    /// `x / k = a / (k / g)` and `x % k = (a % (k / g)) g + r` (a
    /// coordinate's position inside the row above it, and the rows).
    fn factored(&self, x: &Lin, k: u64) -> Option<(u64, Lin, Lin)> {
        let mut factors: Vec<u64> = (x.terms.iter())
            .map(|(_, c)| gcd(*c, k))
            .filter(|&g| g > 1 && g < k)
            .collect();
        factors.sort_unstable_by(|a, b| b.cmp(a));
        factors.dedup();
        factors.into_iter().find_map(|g| {
            let mut above = Lin::constant(x.constant / g);
            let mut below = Lin::constant(x.constant % g);
            for (atom, c) in &x.terms {
                match c % g {
                    0 => above.add_term(atom.clone(), c / g),
                    _ => below.add_term(atom.clone(), *c),
                }
            }
            let fits = self.range_of(&below).is_some_and(|r| r.hi < g);
            fits.then_some((g, above, below))
        })
    }

    /// `sum` with each pair `(y % k) c + (x / (a k)) (c k)`, where `y` is
    /// `x / a` (or `x`), joined into `y c`: a coordinate and the ones
    /// above it, put back together.
    fn recombined(&self, mut sum: Lin) -> Lin {
        let mut i = 0;
        while i < sum.terms.len() {
            let joined = self.partner_of(&sum, i);
            match joined {
                Some((j, y, c)) => {
                    let (hi, lo) = (i.max(j), i.min(j));
                    sum.terms.remove(hi);
                    sum.terms.remove(lo);
                    sum = sum.plus(self.lin(&y).times(c));
                    i = 0;
                }
                None => i += 1,
            }
        }
        sum
    }

    /// For term `i` of `sum`, a remainder `(y % k) c`: the term
    /// `(x / (a k)) (c k)` that completes it, with `y` and `c`.
    fn partner_of(&self, sum: &Lin, i: usize) -> Option<(usize, Expr, u64)> {
        let (atom, c) = &sum.terms[i];
        let (y, k) = by_literal(atom, Arith::Rem)?;
        let (x, a) = by_literal(y, Arith::Div).unwrap_or((y, 1));
        let above = Expr::arith(Arith::Div, x.clone(), Expr::U32(a * k));
        let j = (sum.terms.iter()).position(|(t, tc)| *t == above && *tc == c * k % MOD)?;
        Some((j, y.clone(), *c))
    }

    /// The range of a sum, `None` where it may pass `u32::MAX`.
    fn range_of(&self, sum: &Lin) -> Option<Range> {
        let (mut lo, mut hi) = (sum.constant as u128, sum.constant as u128);
        for (atom, c) in &sum.terms {
            let r = self.atom_range(atom);
            lo += r.lo as u128 * *c as u128;
            hi += r.hi as u128 * *c as u128;
        }
        (hi <= MAX as u128).then_some(Range {
            lo: lo as u64,
            hi: hi as u64,
        })
    }

    fn atom_range(&self, e: &Expr) -> Range {
        match e {
            Expr::U32(c) => Range::exactly(*c),
            Expr::Invocation => self.invocation,
            Expr::Local => self.local,
            Expr::Var(v) => self.ranges.get(v).copied().unwrap_or(ANY),
            Expr::Arith { op, a, b } => {
                let (a, b) = (self.atom_range(a), self.atom_range(b));
                match (op, b.lo == b.hi && b.lo > 0) {
                    (Arith::Div, true) => Range {
                        lo: a.lo / b.lo,
                        hi: a.hi / b.lo,
                    },
                    (Arith::Rem, true) if a.hi < b.lo => a,
                    (Arith::Rem, true) => Range::below(b.lo),
                    (Arith::Add, _) if a.hi + b.hi <= MAX => Range {
                        lo: a.lo + b.lo,
                        hi: a.hi + b.hi,
                    },
                    (Arith::Mul, _) if a.hi.saturating_mul(b.hi) <= MAX => Range {
                        lo: a.lo * b.lo,
                        hi: a.hi * b.hi,
                    },
                    _ => ANY,
                }
            }
            Expr::Call {
                f: f @ (Builtin::Min | Builtin::Max),
                args,
            } if args.len() == 2 => {
                let (a, b) = (self.atom_range(&args[0]), self.atom_range(&args[1]));
                match f {
                    Builtin::Min => Range {
                        lo: a.lo.min(b.lo),
                        hi: a.hi.min(b.hi),
                    },
                    _ => Range {
                        lo: a.lo.max(b.lo),
                        hi: a.hi.max(b.hi),
                    },
                }
            }
            _ => ANY,
        }
    }
}

/// `x` and `k` where `e` is `x op k` with `k` a literal other than 0.
fn by_literal(e: &Expr, op: Arith) -> Option<(&Expr, u64)> {
    match e {
        Expr::Arith { op: o, a, b } if *o == op => match **b {
            Expr::U32(k @ 1..) => Some((a, k)),
            _ => None,
        },
        _ => None,
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    match b {
        0 => a,
        b => gcd(b, a % b),
    }
}

/// What `e` costs to compute, roughly in vector instructions: a division
/// or remainder by a constant that is not a power of two is a multiply
/// of high halves with shifts and fix-ups.
fn cost(e: &Expr) -> usize {
    let own = match e {
        Expr::Arith {
            op: Arith::Div | Arith::Rem,
            b,
            ..
        } => match **b {
            Expr::U32(k) if k.is_power_of_two() => 1,
            _ => 6,
        },
        Expr::Arith { .. } | Expr::Call { .. } => 1,
        _ => 0,
    };
    let mut total = own;
    e.for_each_child(|c| total += cost(c));
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn var(id: usize) -> Var {
        Var { prefix: "j", id }
    }

    fn op(op: Arith, a: Expr, b: Expr) -> Expr {
        Expr::arith(op, a, b)
    }

    fn lit(n: usize) -> Expr {
        Expr::U32(n as u64)
    }

    /// The value of a `u32` expression as WGSL computes it (wrapping),
    /// from the values of `vars` (ids), at invocation `gi`: written apart
    /// from the simplifier, as its oracle.
    fn eval(e: &Expr, gi: u32, vars: &HashMap<usize, u32>) -> u32 {
        match e {
            Expr::U32(n) => u32::try_from(*n).expect("a literal WGSL can spell"),
            Expr::Invocation => gi,
            Expr::Var(v) => vars[&v.id],
            Expr::Arith { op, a, b } => {
                let (a, b) = (eval(a, gi, vars), eval(b, gi, vars));
                match op {
                    Arith::Add => a.wrapping_add(b),
                    Arith::Sub => a.wrapping_sub(b),
                    Arith::Mul => a.wrapping_mul(b),
                    Arith::Div => a / b,
                    Arith::Rem => a % b,
                    Arith::Shr => a >> b,
                    _ => unreachable!("not index arithmetic: {op:?}"),
                }
            }
            Expr::Call { f, args } => {
                let (a, b) = (eval(&args[0], gi, vars), eval(&args[1], gi, vars));
                match f {
                    Builtin::Min => a.min(b),
                    _ => a.max(b),
                }
            }
            e => unreachable!("not in these tests: {e:?}"),
        }
    }

    /// Every `Let`'s value at each invocation below `count`.
    fn values(body: &[Inst], count: u32) -> Vec<Vec<u32>> {
        (0..count)
            .map(|gi| {
                let mut vars = HashMap::new();
                for inst in body {
                    if let Inst::Let { var, value, .. } = inst {
                        vars.insert(var.id, eval(value, gi, &vars));
                    }
                }
                (0..body.len()).map(|i| vars[&i]).collect()
            })
            .collect()
    }

    fn lets(values: Vec<Expr>) -> Vec<Inst> {
        (values.into_iter().enumerate())
            .map(|(i, value)| Inst::Let {
                var: var(i),
                ty: Ty::U32,
                value,
                node: None,
            })
            .collect()
    }

    fn entry(count: usize) -> Entry {
        Entry::per_invocation(count)
    }

    fn row_major(shape: &[usize]) -> Vec<usize> {
        let mut strides = vec![1; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        strides
    }

    /// `index` read as coordinates of `shape` (row-major), each times its
    /// stride in `strides`: an address through a view, as lowering
    /// builds it.
    fn through_view(index: &Expr, shape: &[usize], strides: &[usize]) -> Expr {
        let dense = row_major(shape);
        let terms = (0..shape.len())
            .map(|d| {
                let coord = op(Arith::Div, index.clone(), lit(dense[d]));
                let coord = match d {
                    0 => coord,
                    _ => op(Arith::Rem, coord, lit(shape[d])),
                };
                op(Arith::Mul, coord, lit(strides[d]))
            })
            .collect();
        Expr::sum(terms)
    }

    #[test]
    fn a_pooling_window_address_loses_its_divisions() {
        // Output element `gi` of a 2x2 max pool over [4, 6, 8] (channels,
        // rows, columns), window element `r` (`gi % 4`): the position in
        // the windows view [4, 3, 4, 2, 2], then its address.
        let (o, r) = (
            op(Arith::Div, Expr::Invocation, lit(4)),
            op(Arith::Rem, Expr::Invocation, lit(4)),
        );
        let position = Expr::sum(vec![
            through_view(&o, &[4, 3, 4], &[48, 16, 4]),
            through_view(&r, &[2, 2], &[2, 1]),
        ]);
        let address = through_view(&Expr::Var(var(0)), &[4, 3, 4, 2, 2], &[48, 16, 2, 8, 1]);
        let body = lets(vec![position, address]);
        let simplified = simplify_indices(body.clone(), &entry(192));
        assert_eq!(values(&simplified, 192), values(&body, 192));
        let (Inst::Let { value: b, .. }, Inst::Let { value: a, .. }) = (&body[1], &simplified[1])
        else {
            unreachable!()
        };
        assert!(cost(a) * 2 < cost(b), "{a} from {b}");
    }

    #[test]
    fn arithmetic_that_may_wrap_keeps_its_divisions() {
        // A hash: `gi * 2654435761` wraps, so `/ 7` and `% 7` of it must
        // keep their values (here, stay as written).
        let hash = op(Arith::Mul, Expr::Invocation, lit(2_654_435_761));
        let body = lets(vec![
            op(Arith::Div, hash.clone(), lit(7)),
            op(Arith::Rem, op(Arith::Add, hash.clone(), lit(3)), lit(7)),
            op(Arith::Div, op(Arith::Mul, hash, lit(14)), lit(7)),
            // A multiple of the divisor that wraps.
            op(
                Arith::Div,
                op(Arith::Mul, Expr::Invocation, lit(4_200_000_000)),
                lit(7),
            ),
            op(
                Arith::Rem,
                op(Arith::Mul, Expr::Invocation, lit(4_200_000_001)),
                lit(7),
            ),
            // Products past 2^64 before reduction; literals stay `u32`s.
            [4_000_000_007usize; 3]
                .into_iter()
                .fold(Expr::Invocation, |e, k| op(Arith::Mul, e, lit(k))),
        ]);
        let expected = values(&body, 4096);
        let simplified = simplify_indices(body.clone(), &entry(4096));
        assert_eq!(values(&simplified, 4096), expected);
        let every_rewrite = rewrite_indices(body, &entry(4096), false);
        assert_eq!(values(&every_rewrite, 4096), expected);
    }

    /// A random shape of 1 to 4 dims of 1 to 6, and a permutation of it.
    fn shape_and_order() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
        prop::collection::vec(1usize..=6, 1..=4).prop_flat_map(|shape| {
            let order: Vec<usize> = (0..shape.len()).collect();
            (Just(shape), Just(order).prop_shuffle())
        })
    }

    proptest! {
        /// Addresses through two views in turn (a transposition, then a
        /// strided or broadcast view of a reshape of it), an offset, a
        /// `min` clamp: every value is kept at every invocation.
        #[test]
        fn composed_views_keep_every_value(
            (shape, order) in shape_and_order(),
            broadcast in prop::collection::vec(any::<bool>(), 4),
            offset in 0usize..50,
            clamp in 1usize..400,
        ) {
            let count: usize = shape.iter().product();
            let dense = row_major(&shape);
            let permuted: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
            let permuted_strides: Vec<usize> = order.iter().map(|&d| dense[d]).collect();
            let first = through_view(&Expr::Invocation, &permuted, &permuted_strides);
            let strides: Vec<usize> = (row_major(&shape).iter().zip(&broadcast))
                .map(|(&s, &b)| if b { 0 } else { s * 2 })
                .collect();
            let second = through_view(&Expr::Var(var(0)), &shape, &strides);
            let body = lets(vec![
                first,
                op(Arith::Add, second, lit(offset)),
                op(Arith::Rem, op(Arith::Div, Expr::Var(var(1)), lit(3)), lit(5)),
                Expr::call(Builtin::Min, vec![Expr::Var(var(0)), lit(clamp)]),
                op(Arith::Rem, Expr::Var(var(3)), lit(clamp.max(2))),
            ]);
            let expected = values(&body, count as u32);
            let simplified = simplify_indices(body.clone(), &entry(count));
            prop_assert_eq!(values(&simplified, count as u32), expected.clone());
            let every_rewrite = rewrite_indices(body, &entry(count), false);
            prop_assert_eq!(values(&every_rewrite, count as u32), expected);
        }

        /// Sums of coordinates times constants (some sharing factors with
        /// the divisor, some not), divided and taken modulo: each rule
        /// against the oracle, every rewrite kept.
        #[test]
        fn divisions_of_sums_keep_every_value(
            terms in prop::collection::vec((1usize..64, 1usize..50, 0usize..3), 1..4),
            constant in 0usize..100,
            k in 2usize..100,
        ) {
            let count = 3000;
            let atom = |(c, m, kind): (usize, usize, usize)| {
                let x = match kind {
                    0 => op(Arith::Rem, Expr::Invocation, lit(m)),
                    1 => op(Arith::Div, Expr::Invocation, lit(m)),
                    _ => Expr::Invocation,
                };
                op(Arith::Mul, x, lit(c))
            };
            let sum = op(Arith::Add, Expr::sum(terms.into_iter().map(atom).collect()), lit(constant));
            let body = lets(vec![
                sum,
                op(Arith::Div, Expr::Var(var(0)), lit(k)),
                op(Arith::Rem, Expr::Var(var(0)), lit(k)),
                op(Arith::Rem, op(Arith::Div, Expr::Var(var(0)), lit(k)), lit(k + 3)),
            ]);
            let expected = values(&body, count);
            let every_rewrite = rewrite_indices(body, &entry(count as usize), false);
            prop_assert_eq!(values(&every_rewrite, count), expected);
        }
    }
}
