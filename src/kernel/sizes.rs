//! Sizes as symbolic values, and the guards that decisions on them
//! record.
//!
//! A kernel builder that decides something by a size (a reduction's
//! strategy by its length, `vec4`s by a multiple of four) reads that size
//! as an `Sz`: its value at the graph being lowered together with where
//! it comes from (a dimension of a graph node's shape, through products,
//! sums and quotients). An `Sz` has no comparison operators: every test
//! of one goes through `Guards`, which answers it and records it as a
//! `Guard` (the size's expression, the test, and how it came out). The
//! guards of a kernel are thus the whole list of what its code depends
//! on among the sizes it read this way, printed in `LAZYWGPU_DUMP` and
//! named in a recompile warning when another size of the site crosses
//! one of them (`first_crossed`).

use rustc_hash::FxHashSet;
use std::fmt;
use std::sync::Arc;

/// How a symbolic size is computed from the graph's dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SizeExpr {
    /// A number that does not come from a dimension.
    Const(usize),
    /// A number of the graph the kernel was lowered from: a symbol.
    Leaf(Leaf),
    /// An operation on two sizes.
    Bin(SizeOp, Arc<SizeExpr>, Arc<SizeExpr>),
    /// The bits a size takes (0 for 0): the steps of a binary search
    /// over that many elements.
    Bits(Arc<SizeExpr>),
}

/// A number of the lowered graph that sizes are computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Leaf {
    /// Dimension `dim` of the shape of graph node `node`.
    Dim { node: usize, dim: usize },
    /// How many elements of its buffer node `node` spans: the furthest
    /// element its layout reaches, plus one (`GNode::extent`; a view of
    /// an input reaches past its own elements).
    Extent { node: usize },
    /// How many elements of its buffer node `node`'s layout reaches from
    /// its first (`Layout::elements_reached`: fewer than its own where
    /// strides repeat elements, as a broadcast's do).
    Reached { node: usize },
    /// Stride `dim` of the layout node `node` carries: an input's, or a
    /// strided view's or window scatter's (`graph::GNode::layout`).
    Stride { node: usize, dim: usize },
    /// The offset of the layout node `node` carries.
    Offset { node: usize },
    /// The padding padding node `node` adds along `dim`, before its
    /// input's elements (`after`: after them).
    Pad {
        node: usize,
        dim: usize,
        after: bool,
    },
}

impl Leaf {
    /// The graph node it is a number of.
    pub fn node(self) -> usize {
        match self {
            Leaf::Dim { node, .. }
            | Leaf::Extent { node }
            | Leaf::Reached { node }
            | Leaf::Stride { node, .. }
            | Leaf::Offset { node }
            | Leaf::Pad { node, .. } => node,
        }
    }
}

impl fmt::Display for Leaf {
    /// `n7[1]` for dimension 1 of node 7, `extent(n7)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Leaf::Dim { node, dim } => write!(f, "n{node}[{dim}]"),
            Leaf::Extent { node } => write!(f, "extent(n{node})"),
            Leaf::Reached { node } => write!(f, "reached(n{node})"),
            Leaf::Stride { node, dim } => write!(f, "stride(n{node})[{dim}]"),
            Leaf::Offset { node } => write!(f, "offset(n{node})"),
            Leaf::Pad { node, dim, after } => {
                let side = if *after { "after" } else { "before" };
                write!(f, "pad_{side}(n{node})[{dim}]")
            }
        }
    }
}

/// The operations sizes are combined by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SizeOp {
    Add,
    /// Subtraction cut at zero.
    Sub,
    Mul,
    /// Division rounding down.
    Div,
    /// The remainder of a division.
    Rem,
    /// Division rounding up.
    DivCeil,
    Max,
    /// How far apart two sizes are (`|a - b|`): its test against zero
    /// is their equality.
    Dist,
    /// `a` shifted left by `b` bits: `1 << b` is two to the `b`.
    Shl,
}

impl SizeOp {
    /// Whether it prints as a call, `max(a, b)`, not infix.
    fn is_call(self) -> bool {
        matches!(self, SizeOp::Max | SizeOp::Dist)
    }

    fn apply(self, a: usize, b: usize) -> usize {
        match self {
            SizeOp::Add => a + b,
            SizeOp::Sub => a.saturating_sub(b),
            SizeOp::Mul => a * b,
            SizeOp::Div => a.checked_div(b).unwrap_or(0),
            SizeOp::Rem => a.checked_rem(b).unwrap_or(0),
            SizeOp::DivCeil => match b {
                0 => 0,
                b => a.div_ceil(b),
            },
            SizeOp::Max => a.max(b),
            SizeOp::Dist => a.abs_diff(b),
            SizeOp::Shl => u32::try_from(b)
                .ok()
                .and_then(|b| a.checked_shl(b))
                .unwrap_or(0),
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            SizeOp::Add => "+",
            SizeOp::Sub => "-",
            SizeOp::Mul => "*",
            SizeOp::Div => "/",
            SizeOp::Rem => "%",
            SizeOp::DivCeil => "/^",
            SizeOp::Max => "max",
            SizeOp::Dist => "dist",
            SizeOp::Shl => "<<",
        }
    }
}

impl SizeExpr {
    /// Whether it reads a number for which `f` holds.
    pub fn reads_any(&self, f: &dyn Fn(Leaf) -> bool) -> bool {
        match self {
            SizeExpr::Const(_) => false,
            SizeExpr::Leaf(leaf) => f(*leaf),
            SizeExpr::Bin(_, a, b) => a.reads_any(f) || b.reads_any(f),
            SizeExpr::Bits(a) => a.reads_any(f),
        }
    }

    /// Its value where each of the graph's numbers is `at(leaf)`: what
    /// a size lowered at one graph is at another of the same structure.
    pub fn eval(&self, at: &dyn Fn(Leaf) -> usize) -> usize {
        match self {
            SizeExpr::Const(n) => *n,
            SizeExpr::Leaf(leaf) => at(*leaf),
            SizeExpr::Bin(op, a, b) => op.apply(a.eval(at), b.eval(at)),
            SizeExpr::Bits(a) => bits(a.eval(at)),
        }
    }

    /// Whether it reads no dimension.
    pub fn is_constant(&self) -> bool {
        match self {
            SizeExpr::Const(_) => true,
            SizeExpr::Leaf(_) => false,
            SizeExpr::Bin(_, a, b) => a.is_constant() && b.is_constant(),
            SizeExpr::Bits(a) => a.is_constant(),
        }
    }

    /// The graph nodes whose dimensions it reads, each once, in order of
    /// appearance.
    pub fn nodes(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.collect_nodes(&mut out);
        out
    }

    fn collect_nodes(&self, out: &mut Vec<usize>) {
        match self {
            SizeExpr::Const(_) => {}
            SizeExpr::Leaf(leaf) => {
                if !out.contains(&leaf.node()) {
                    out.push(leaf.node());
                }
            }
            SizeExpr::Bin(_, a, b) => {
                a.collect_nodes(out);
                b.collect_nodes(out);
            }
            SizeExpr::Bits(a) => a.collect_nodes(out),
        }
    }
}

impl fmt::Display for SizeExpr {
    /// `n7[1]` for dimension 1 of node 7; `max(a, b)`; other operations
    /// infix, parenthesised where nested.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeExpr::Const(n) => write!(f, "{n}"),
            SizeExpr::Leaf(leaf) => write!(f, "{leaf}"),
            SizeExpr::Bin(op @ (SizeOp::Max | SizeOp::Dist), a, b) => {
                write!(f, "{}({a}, {b})", op.symbol())
            }
            SizeExpr::Bits(a) => write!(f, "bits({a})"),
            SizeExpr::Bin(op, a, b) => {
                let operand = |e: &SizeExpr, f: &mut fmt::Formatter<'_>| match e {
                    SizeExpr::Bin(o, ..) if !o.is_call() && *o != *op => write!(f, "({e})"),
                    _ => write!(f, "{e}"),
                };
                operand(a, f)?;
                write!(f, " {} ", op.symbol())?;
                operand(b, f)
            }
        }
    }
}

/// A size: its value at the graph being lowered and how it is computed
/// from that graph's dimensions. It cannot be compared: tests go through
/// `Guards`, which records them.
#[derive(Clone, Debug)]
pub(crate) struct Sz {
    value: usize,
    expr: Arc<SizeExpr>,
}

impl Sz {
    /// A number that does not depend on the graph's dimensions.
    pub fn constant(n: usize) -> Sz {
        Sz {
            value: n,
            expr: Arc::new(SizeExpr::Const(n)),
        }
    }

    /// Symbol `leaf`, whose value here is `value`.
    fn leaf(leaf: Leaf, value: usize) -> Sz {
        Sz {
            value,
            expr: Arc::new(SizeExpr::Leaf(leaf)),
        }
    }

    /// Dimension `dim` of graph node `node`, whose value is `value`.
    pub fn dim(node: usize, dim: usize, value: usize) -> Sz {
        Sz::leaf(Leaf::Dim { node, dim }, value)
    }

    /// How many elements of its buffer node `node` spans, `value` here
    /// (see `Leaf::Extent`).
    pub fn extent(node: usize, value: usize) -> Sz {
        Sz::leaf(Leaf::Extent { node }, value)
    }

    /// How many elements node `node`'s layout reaches, `value` here (see
    /// `Leaf::Reached`).
    pub fn reached(node: usize, value: usize) -> Sz {
        Sz::leaf(Leaf::Reached { node }, value)
    }

    /// The last dimension of node `node`, of shape `shape` (1 for a
    /// scalar).
    pub fn last_dim(node: usize, shape: &[usize]) -> Sz {
        match shape.len().checked_sub(1) {
            Some(d) => Sz::dim(node, d, shape[d]),
            None => Sz::constant(1),
        }
    }

    /// Stride `dim` of the layout node `node` carries, `value` here (see
    /// `Leaf::Stride`).
    pub fn stride(node: usize, dim: usize, value: usize) -> Sz {
        Sz::leaf(Leaf::Stride { node, dim }, value)
    }

    /// The offset of the layout node `node` carries, `value` here.
    pub fn offset(node: usize, value: usize) -> Sz {
        Sz::leaf(Leaf::Offset { node }, value)
    }

    /// The padding node `node` adds along `dim` before its input's
    /// elements (`after`: after them), `value` here.
    pub fn pad(node: usize, (dim, after): (usize, bool), value: usize) -> Sz {
        Sz::leaf(Leaf::Pad { node, dim, after }, value)
    }

    /// Every dimension of node `node`, of shape `shape`.
    pub fn shape(node: usize, shape: &[usize]) -> Vec<Sz> {
        (shape.iter().enumerate())
            .map(|(d, &len)| Sz::dim(node, d, len))
            .collect()
    }

    /// `len`, as the last dimension of node `node` (of shape `shape`)
    /// where it is that, else as a number of its own: the rows of a
    /// matmul operand's packing are its node's last dimension, but a
    /// shared matrix or a transpose may lay them out otherwise.
    pub fn last_dim_or(node: usize, shape: &[usize], len: usize) -> Sz {
        match shape.last() {
            Some(&last) if last == len => Sz::last_dim(node, shape),
            _ => Sz::constant(len),
        }
    }

    /// Node `node`'s element count: every dimension of its `shape`
    /// multiplied.
    pub fn elements(node: usize, shape: &[usize]) -> Sz {
        Sz::dims_product(node, shape, 0..shape.len())
    }

    /// Dimensions `dims` of node `node`, of shape `shape`, multiplied
    /// (1 for none).
    pub fn dims_product(node: usize, shape: &[usize], dims: impl IntoIterator<Item = usize>) -> Sz {
        dims.into_iter()
            .map(|d| Sz::dim(node, d, shape[d]))
            .fold(Sz::constant(1), |acc, d| acc.mul(&d))
    }

    /// How it is computed.
    pub fn expr(&self) -> &Arc<SizeExpr> {
        &self.expr
    }

    /// The same size at a graph whose numbers are `at(leaf)` (same
    /// expression, its value there).
    pub fn at(&self, at: &dyn Fn(Leaf) -> usize) -> Sz {
        Sz {
            value: self.expr.eval(at),
            expr: self.expr.clone(),
        }
    }

    fn bin(&self, op: SizeOp, other: &Sz) -> Sz {
        let value = op.apply(self.value, other.value);
        let expr = match (&*self.expr, &*other.expr) {
            (SizeExpr::Const(_), SizeExpr::Const(_)) => SizeExpr::Const(value),
            // Identities keep expressions short: a product with 1, a sum
            // with 0, a quotient by 1.
            (SizeExpr::Const(1), _) if op == SizeOp::Mul => return other.clone(),
            (_, SizeExpr::Const(1))
                if matches!(op, SizeOp::Mul | SizeOp::DivCeil | SizeOp::Div) =>
            {
                return self.clone();
            }
            (SizeExpr::Const(0), _) if op == SizeOp::Add => return other.clone(),
            // `(x * a) * b` is `x * (a b)`.
            (SizeExpr::Bin(SizeOp::Mul, x, a), SizeExpr::Const(b))
                if op == SizeOp::Mul && matches!(**a, SizeExpr::Const(_)) =>
            {
                let a = match **a {
                    SizeExpr::Const(a) => a,
                    _ => unreachable!("matched a constant"),
                };
                SizeExpr::Bin(op, x.clone(), Arc::new(SizeExpr::Const(a * b)))
            }
            _ => SizeExpr::Bin(op, self.expr.clone(), other.expr.clone()),
        };
        Sz {
            value,
            expr: Arc::new(expr),
        }
    }

    /// `self * other`.
    pub fn mul(&self, other: &Sz) -> Sz {
        self.bin(SizeOp::Mul, other)
    }

    /// `self + other`.
    pub fn add(&self, other: &Sz) -> Sz {
        self.bin(SizeOp::Add, other)
    }

    /// `self - other`, cut at zero.
    pub fn sub(&self, other: &Sz) -> Sz {
        self.bin(SizeOp::Sub, other)
    }

    /// `self / other`, rounded down (0 where `other` is 0).
    pub fn div_by(&self, other: &Sz) -> Sz {
        self.bin(SizeOp::Div, other)
    }

    /// `self % other` (0 where `other` is 0).
    pub fn rem_by(&self, other: &Sz) -> Sz {
        self.bin(SizeOp::Rem, other)
    }

    /// `self / n`, rounded down.
    pub fn div(&self, n: usize) -> Sz {
        self.bin(SizeOp::Div, &Sz::constant(n))
    }

    /// `self % n`.
    pub fn rem(&self, n: usize) -> Sz {
        self.bin(SizeOp::Rem, &Sz::constant(n))
    }

    /// Its value as a literal of the kernel (a loop's count, a stride):
    /// literals are not decisions (a generic kernel reads those that
    /// change from its sizes binding), so no guard is recorded. A choice
    /// made on the value goes through `Guards` instead.
    pub fn literal(&self) -> usize {
        self.value
    }

    /// `self * n`.
    pub fn times(&self, n: usize) -> Sz {
        self.mul(&Sz::constant(n))
    }

    /// `self / other`, rounded up (0 where `other` is 0).
    pub fn div_ceil(&self, other: &Sz) -> Sz {
        self.bin(SizeOp::DivCeil, other)
    }

    /// The larger of the two.
    pub fn max(&self, other: &Sz) -> Sz {
        self.bin(SizeOp::Max, other)
    }

    /// Two to the power of it (`1 << self`).
    pub fn pow2(&self) -> Sz {
        Sz::constant(1).bin(SizeOp::Shl, self)
    }

    /// The bits it takes (0 for 0; `SizeExpr::Bits`).
    pub fn bits(&self) -> Sz {
        let value = bits(self.value);
        let expr = match &*self.expr {
            SizeExpr::Const(_) => SizeExpr::Const(value),
            _ => SizeExpr::Bits(self.expr.clone()),
        };
        Sz {
            value,
            expr: Arc::new(expr),
        }
    }
}

/// The bits `n` takes (0 for 0).
fn bits(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()) as usize
}

/// What a guard tests a size for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Test {
    /// `size == n`.
    Equals(usize),
    /// `size < n`.
    Below(usize),
    /// `size <= n`.
    AtMost(usize),
    /// `size % n == 0`.
    MultipleOf(usize),
}

impl Test {
    /// Whether `value` passes it.
    pub fn passes(self, value: usize) -> bool {
        match self {
            Test::Equals(n) => value == n,
            Test::Below(n) => value < n,
            Test::AtMost(n) => value <= n,
            Test::MultipleOf(n) => n != 0 && value.is_multiple_of(n),
        }
    }

    /// The condition, as it held (`passed`) or failed.
    fn condition(self, passed: bool) -> String {
        match (self, passed) {
            (Test::Equals(n), true) => format!("== {n}"),
            (Test::Equals(n), false) => format!("!= {n}"),
            (Test::Below(n), true) => format!("< {n}"),
            (Test::Below(n), false) => format!(">= {n}"),
            (Test::AtMost(n), true) => format!("<= {n}"),
            (Test::AtMost(n), false) => format!("> {n}"),
            (Test::MultipleOf(n), true) => format!("% {n} == 0"),
            (Test::MultipleOf(n), false) => format!("% {n} != 0"),
        }
    }
}

/// One test a kernel's code depends on: `size` tested by `test` came out
/// `passed` (its value then was `value`), which decided `decides`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Guard {
    pub size: Arc<SizeExpr>,
    pub test: Test,
    pub passed: bool,
    /// The size's value when the guard was recorded.
    pub value: usize,
    /// The choice it decided, for people (`a reduction's workgroup tree`).
    pub decides: &'static str,
}

impl Guard {
    /// Whether the code recorded with it is right for a size of `value`
    /// as far as this guard goes: the test comes out as it did.
    pub fn holds_at(&self, value: usize) -> bool {
        self.test.passes(value) == self.passed
    }

    /// The condition that held, as `n7[1] < 4096` (a computed size in
    /// parentheses).
    pub fn condition(&self) -> String {
        let test = self.test.condition(self.passed);
        match &*self.size {
            // Two sizes' distance against zero: their equality.
            SizeExpr::Bin(SizeOp::Dist, a, b) if self.test == Test::Equals(0) => {
                let equal = if self.passed { "==" } else { "!=" };
                format!("{a} {equal} {b}")
            }
            SizeExpr::Bin(op, ..) if op.is_call() => format!("{} {test}", self.size),
            SizeExpr::Const(_) | SizeExpr::Leaf(_) | SizeExpr::Bits(_) => {
                format!("{} {test}", self.size)
            }
            SizeExpr::Bin(..) => format!("({}) {test}", self.size),
        }
    }
}

impl fmt::Display for Guard {
    /// `n7[1] < 4096 (2048; a reduction's workgroup tree)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}; {})", self.condition(), self.value, self.decides)
    }
}

/// A kernel's guards once lowered (`Guards::recorded`).
pub(crate) type GuardList = Arc<[Guard]>;

/// The guards recorded while one kernel was lowered, in the order its
/// tests were made. Tests of sizes that read no dimension are answered
/// without a guard; a test made twice is recorded once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Guards {
    list: Vec<Guard>,
    /// The tests recorded, to record each once in constant time (a long
    /// fused chain tests every dimension of thousands of nodes).
    made: FxHashSet<(Arc<SizeExpr>, Test)>,
}

impl Guards {
    /// Answers `test` of `size` and records it, for `decides`.
    fn record(&mut self, size: &Sz, test: Test, decides: &'static str) -> bool {
        let passed = test.passes(size.value);
        if !size.expr.is_constant() {
            let guard = Guard {
                size: size.expr.clone(),
                test,
                passed,
                value: size.value,
                decides,
            };
            self.push(guard);
        }
        passed
    }

    /// Adds `guard` unless its test was recorded already.
    pub fn push(&mut self, guard: Guard) {
        if self.made.insert((guard.size.clone(), guard.test)) {
            self.list.push(guard);
        }
    }

    /// Whether `size <= bound`.
    pub fn at_most(&mut self, size: &Sz, bound: usize, decides: &'static str) -> bool {
        self.record(size, Test::AtMost(bound), decides)
    }

    /// Whether `size >= bound`.
    pub fn at_least(&mut self, size: &Sz, bound: usize, decides: &'static str) -> bool {
        !self.record(size, Test::Below(bound), decides)
    }

    /// Whether `size == n`.
    pub fn equals(&mut self, size: &Sz, n: usize, decides: &'static str) -> bool {
        self.record(size, Test::Equals(n), decides)
    }

    /// `size`'s value, which the code depends on exactly (an `== value`
    /// guard): for a choice whose every value makes other code.
    pub fn value(&mut self, size: &Sz, decides: &'static str) -> usize {
        self.record(size, Test::Equals(size.value), decides);
        size.value
    }

    /// The power of two at least `size` (1 for 0), recorded as the two
    /// tests that bound it: for an unroll that makes a loop fit.
    pub fn power_of_two_above(&mut self, size: &Sz, decides: &'static str) -> usize {
        let p = size.value.next_power_of_two();
        self.at_most(size, p, decides);
        if p > 1 {
            self.at_least(size, p / 2 + 1, decides);
        }
        p
    }

    /// Whether `a <= b`, recorded as `a - b <= 0` (the difference cut
    /// at zero).
    pub fn at_most_size(&mut self, a: &Sz, b: &Sz, decides: &'static str) -> bool {
        self.record(&a.bin(SizeOp::Sub, b), Test::AtMost(0), decides)
    }

    /// Whether `a < b`, recorded as `(a + 1) - b <= 0`.
    pub fn below_size(&mut self, a: &Sz, b: &Sz, decides: &'static str) -> bool {
        self.at_most_size(&a.add(&Sz::constant(1)), b, decides)
    }

    /// Whether `a == b`, recorded as their distance against zero: one
    /// guard, whichever is larger.
    pub fn equals_size(&mut self, a: &Sz, b: &Sz, decides: &'static str) -> bool {
        self.record(&a.bin(SizeOp::Dist, b), Test::Equals(0), decides)
    }

    /// Whether `size` is a multiple of `n`.
    pub fn multiple_of(&mut self, size: &Sz, n: usize, decides: &'static str) -> bool {
        self.record(size, Test::MultipleOf(n), decides)
    }

    /// The guards, in the order recorded.
    #[cfg(test)]
    pub fn list(&self) -> &[Guard] {
        &self.list
    }

    /// The guards recorded, as a kernel keeps them: shared, so that a
    /// site's record of each dispatch takes them without a copy.
    pub fn recorded(&self) -> GuardList {
        self.list.as_slice().into()
    }

    /// Adds `other`'s guards (a kernel's packing kernels' choices).
    pub fn extend(&mut self, other: &Guards) {
        for g in &other.list {
            self.push(g.clone());
        }
    }
}

/// The first of `before`'s guards (a kernel's at a site's last sizes)
/// whose test comes out otherwise at the value its size has among
/// `now`'s (the same kernel's at new sizes): the test whose answer
/// changed the code. The new value is read from any of `now`'s guards on
/// the same size (a power of two above a length is tested against 1,024
/// at one size and 512 at another); a size tested at one size only (a
/// path another decision left) is passed over.
pub(crate) fn first_crossed<'a>(before: &'a [Guard], now: &'a [Guard]) -> Option<Crossed<'a>> {
    let mut by_size: rustc_hash::FxHashMap<&SizeExpr, &Guard> = Default::default();
    for guard in now {
        by_size.entry(&*guard.size).or_insert(guard);
    }
    before.iter().find_map(|was| {
        let new = *by_size.get(&*was.size)?;
        (!was.holds_at(new.value)).then_some(Crossed {
            was,
            now: new.value,
        })
    })
}

/// A guard a new size crossed: as recorded at the site's last sizes,
/// and its size's value at the new ones.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crossed<'a> {
    pub was: &'a Guard,
    /// The size's value at the new sizes.
    pub now: usize,
}

impl Crossed<'_> {
    /// `n7[1] < 4096 held at 2048, not at 5000 (a reduction's workgroup
    /// tree)`, the dimensions named by `name(node, dim)` where it gives a
    /// name.
    pub fn describe(&self, name: &dyn Fn(usize) -> Option<String>) -> String {
        let named: Vec<String> = (self.was.size.nodes().into_iter())
            .filter_map(|n| name(n).map(|label| format!("n{n} is {label}")))
            .collect();
        let named = match named.is_empty() {
            true => String::new(),
            false => format!("; {}", named.join(", ")),
        };
        format!(
            "guard `{}` held at {}, not at {} ({}{named})",
            self.was.condition(),
            self.was.value,
            self.now,
            self.was.decides
        )
    }
}

#[cfg(test)]
#[path = "sizes_test.rs"]
mod tests;
