//! The two kernels of a radix sort pass (`Op::RadixCount`,
//! `Op::RadixScatter`), built as IR: an invocation per block of
//! `RadixPass::block` positions of a line's order, walking them in
//! order, with sixteen counters (one a digit value) in registers. No
//! barriers, no workgroup memory: on lavapipe, where a barrier switches
//! between every SIMD slice of a workgroup and a sort's network takes
//! one per step, eight passes of three kernels (the counts' running sum
//! between them) sort a line several times faster than sorted runs and
//! their merges.
//!
//! A pass is stable: each block writes its elements of each digit value
//! in the order it walks them, after those of the blocks before it
//! (where the running sum of the digit-major counts says), so eight
//! passes from the least significant digit order by the whole key
//! (`keys::order_key`), equal keys by their original index.

use super::emit::Gen;
use super::keys::{count_digit, digit_counters, digit_of, order_key};
use super::reduce_ir::{sarith, split_index, uarith};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::RadixPass;
use crate::kernel::ir::{Arith, Expr, Inst, Ty};
use crate::kernel::layouts::elements;
use crate::kernel::{Entry, Sz};

/// The kernel of `RadixCount(pass)` at `root`: its entry, body and
/// workgroup count.
pub(super) fn radix_count(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    pass: RadixPass,
) -> (Entry, Vec<Inst>, usize) {
    let block = BlockOf::new(g, key, root, pass);
    let counts = digit_counters(g, &|_, _| Expr::U32(0));
    block.walk(g, &|g, _, digit| count_digit(g, &counts, digit, None));
    for (d, count) in counts.iter().enumerate() {
        let at = block.count_at(g, d);
        let value = Expr::Construct {
            ty: Ty::scalar(DType::I32),
            x: Box::new(count.clone()),
        };
        let store = g.store(0, root, &at, value, false);
        g.push(store);
    }
    block.finish(g)
}

/// The kernel of `RadixScatter(pass)` at `root`: its entry, body and
/// workgroup count.
pub(super) fn radix_scatter(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    pass: RadixPass,
) -> (Entry, Vec<Inst>, usize) {
    let block = BlockOf::new(g, key, root, pass);
    let inputs = &key.nodes[root].inputs;
    let (counts, sums) = (inputs[inputs.len() - 2], inputs[inputs.len() - 1]);
    // Where this block's next element of each digit goes: the running sum
    // of the counts before its own, then one further per element placed.
    let next = digit_counters(g, &|g, d| {
        let at = block.count_at(g, d);
        let before = Expr::arith(
            Arith::Sub,
            g.value(sums, &at, false, false),
            g.value(counts, &at, false, false),
        );
        Expr::Construct {
            ty: Ty::U32,
            x: Box::new(before),
        }
    });
    block.walk(g, &|g, index, digit| {
        let mut dest = next[0].clone();
        for (d, place) in next.iter().enumerate().skip(1) {
            dest = Expr::select(uarith(Arith::Eq, digit.clone(), d), place.clone(), dest);
        }
        let dest = g.emit("dst", Ty::U32, dest);
        let at = block.position(g, &dest);
        let value = Expr::Construct {
            ty: Ty::scalar(DType::I32),
            x: Box::new(index.clone()),
        };
        let store = g.store(0, root, &at, value, false);
        g.push(store);
        count_digit(g, &next, digit, None);
    });
    block.finish(g)
}

/// One invocation's block of a line, as both kernels walk it.
struct BlockOf {
    /// The sorted input, and the order so far (`None`: the identity).
    x: usize,
    order: Option<usize>,
    dtype: DType,
    pass: RadixPass,
    shape: Vec<Sz>,
    len: Sz,
    lines: Sz,
    /// Blocks of a line.
    blocks: Sz,
    /// This invocation's line and block.
    line: Expr,
    index: Expr,
}

impl BlockOf {
    /// The block of this invocation (every pass but the first, `shift`
    /// 0, walks the order its second input holds).
    fn new(g: &mut Gen, key: &GraphKey, root: usize, pass: RadixPass) -> Self {
        let inputs = &key.nodes[root].inputs;
        let x = inputs[0];
        let order = (pass.shift > 0).then(|| inputs[1]);
        let shape = Sz::shape(x, &key.nodes[x].shape);
        let len = shape[pass.axis].max(&Sz::constant(1));
        let lines = elements(&shape).div_by(&len);
        let blocks = len.div_ceil(&Sz::constant(pass.block));
        let line = g.emit("o", Ty::U32, sarith(Arith::Div, Expr::Invocation, &blocks));
        let index = g.emit("bk", Ty::U32, sarith(Arith::Rem, Expr::Invocation, &blocks));
        BlockOf {
            x,
            order,
            dtype: key.nodes[x].dtype.compute(),
            pass,
            shape,
            len,
            lines,
            blocks,
            line,
            index,
        }
    }

    /// The flat element of this line at line position `p`.
    fn position(&self, g: &mut Gen, p: &Expr) -> Expr {
        let at = split_index(&self.shape, &[self.pass.axis], &self.line, p);
        g.emit("p", Ty::U32, at)
    }

    /// Where digit `d`'s count of this block lies in the counts
    /// (`[lines, 16 * blocks]`, digit-major).
    fn count_at(&self, g: &mut Gen, d: usize) -> Expr {
        let row = sarith(
            Arith::Mul,
            self.line.clone(),
            &self.blocks.times(RadixPass::DIGITS),
        );
        let at = Expr::arith(
            Arith::Add,
            row,
            sarith(Arith::Add, self.index.clone(), &self.blocks.times(d)),
        );
        g.emit("ca", Ty::U32, at)
    }

    /// `each(g, index, digit)` over the block's positions in order: the
    /// line index the order holds there, and its key's digit.
    fn walk(&self, g: &mut Gen, each: &dyn Fn(&mut Gen, &Expr, &Expr)) {
        let first = uarith(Arith::Mul, self.index.clone(), self.pass.block);
        let first = g.emit("bf", Ty::U32, first);
        let counter = g.fresh("j");
        let body = g.block(|g| {
            let e = Expr::arith(Arith::Add, first.clone(), Expr::Var(counter));
            let e = g.emit("e", Ty::U32, e);
            let inside = sarith(Arith::Lt, e.clone(), &self.len);
            let body = g.block(|g| {
                let index = match self.order {
                    Some(order) => {
                        let at = self.position(g, &e);
                        let i = g.value(order, &at, false, false);
                        let i = Expr::Construct {
                            ty: Ty::U32,
                            x: Box::new(i),
                        };
                        g.emit("ix", Ty::U32, i)
                    }
                    None => e.clone(),
                };
                let at = self.position(g, &index);
                let v = g.value(self.x, &at, false, false);
                let v = g.emit("v", Ty::scalar(self.dtype), v);
                let key = order_key(g, &v, self.dtype, self.pass.descending);
                let digit = digit_of(g, key, Expr::count(self.pass.shift));
                each(g, &index, &digit);
            });
            g.push(Inst::If { cond: inside, body });
        });
        let walk = g.counted_loop(counter, &Sz::constant(self.pass.block), body);
        g.push(walk);
    }

    /// The kernel's entry (an invocation per block of every line), body
    /// and workgroup count.
    fn finish(&self, g: &mut Gen) -> (Entry, Vec<Inst>, usize) {
        let invocations = self.lines.mul(&self.blocks);
        (
            Entry::per_invocation_of(&invocations),
            g.take_body(),
            Entry::groups_for(invocations.literal()),
        )
    }
}
