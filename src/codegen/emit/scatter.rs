//! Lowering of scatter-adds as index arithmetic in the kernel IR: the
//! traced `ScatterAdd` (each output element scans the source along the
//! axis for the elements whose index names it) and the GPU's lowering of
//! an axis-only index (`schedule::split::sort_scatters`), where each
//! output element sums a run of the index's sorted order instead.

use crate::dtype::DType;
use crate::kernel::ir::{Arith, Check, Expr, Inst, Ty};

use super::Gen;
use super::unroll_guarded;
use crate::kernel::Sz;

impl Gen<'_> {
    /// `ScatterAdd`: the base element plus every source element along
    /// `axis` whose index names this position (a loop over the source's
    /// extent along `axis`).
    pub(super) fn scatter_add_value(&mut self, n: usize, axis: usize, idx: &Expr) -> Expr {
        let node = &self.nodes[n];
        let inputs = node.inputs.clone();
        let shape = Sz::shape(n, &node.shape);
        let src_shape = Sz::shape(inputs[2], &self.nodes[inputs[2]].shape);
        let coords = self.coords(&shape, idx);
        let acc = self.scatter_accumulator(n, inputs[0], idx);
        let inside = Self::inside_source(&coords, &src_shape, axis);
        let counter = self.fresh("s");
        let target = coords[axis].clone();
        let mut src_coords = coords;
        src_coords[axis] = Expr::Var(counter);
        let j = Self::ravel(&src_shape, src_coords);
        let body = self.block(|g| {
            let j = g.emit("j", Ty::U32, j);
            let k = g.value(inputs[1], &j, false, false);
            let size = g.indexed_axis(n);
            g.check(
                Check::Index {
                    index: k.clone(),
                    size: Expr::size_i32(&size),
                },
                n,
            );
            let names_this = Expr::all(vec![
                Expr::arith(Arith::Eq, as_u32(k.clone()), target),
                Expr::arith(Arith::Ge, k, Expr::I32(0)),
            ]);
            // The source element is read (and its inlined chain
            // computed) only where its index names this position: most
            // iterations of the scan skip it (an embedding's gradient
            // matches one row in the vocabulary's size).
            let add = g.block(|g| {
                let v = g.value(inputs[2], &j, false, false);
                g.push(Inst::Accumulate { var: acc, value: v });
            });
            g.push(Inst::If {
                cond: names_this,
                body: add,
            });
        });
        let scan = self.counted_loop(counter, &src_shape[axis], body);
        self.push(Inst::If {
            cond: inside,
            body: vec![scan],
        });
        Expr::Var(acc)
    }

    /// `SortedScatterAdd`: the base element plus the source's elements
    /// at the positions of this row's run of the sorted order (inputs:
    /// base, source, order, starts), in ascending position, the order
    /// `ScatterAdd`'s scan adds them in. A loop of the run's length: the
    /// kernel's loops together visit each source element once.
    pub(super) fn sorted_scatter_add_value(&mut self, n: usize, axis: usize, idx: &Expr) -> Expr {
        let node = &self.nodes[n];
        let shape = Sz::shape(n, &node.shape);
        let [base, src, order, starts] = node.inputs[..] else {
            unreachable!("a sorted scatter-add reads base, source, order and starts")
        };
        let src_shape = Sz::shape(src, &self.nodes[src].shape);
        let coords = self.coords(&shape, idx);
        let acc = self.scatter_accumulator(n, base, idx);
        let inside = Self::inside_source(&coords, &src_shape, axis);
        let row = coords[axis].clone();
        let longest = src_shape[axis].clone();
        let unroll = unroll_guarded(&longest, self.cx.target.loop_budget(1), &mut self.guards);
        let body = self.block(|g| {
            let start_at = |g: &mut Gen, at: Expr| {
                let start = g.value(starts, &at, false, false);
                g.emit("r", Ty::U32, as_u32(start))
            };
            let first = start_at(g, row.clone());
            let end = start_at(g, Expr::arith(Arith::Add, row, Expr::U32(1)));
            let counter = g.fresh("s");
            let step = g.block(|g| {
                let i = Expr::arith(Arith::Add, first.clone(), Expr::Var(counter));
                let i = g.emit("i", Ty::U32, i);
                let position = g.value(order, &i, false, false);
                let mut src_coords = coords.clone();
                src_coords[axis] = g.emit("t", Ty::U32, as_u32(position));
                let j = g.emit("j", Ty::U32, Self::ravel(&src_shape, src_coords));
                let v = g.value(src, &j, false, false);
                g.push(Inst::Accumulate { var: acc, value: v });
            });
            // The run's length is known only at run time: at most the
            // source's extent, which sets the unroll that keeps the loop
            // within the adapter's loop limit. Read from a buffer, it is
            // clamped there, so that starts that were not ascending could
            // never make the loop run for ever.
            let run = Expr::arith(Arith::Sub, end.clone(), first.clone());
            let run = Expr::select(
                Expr::arith(Arith::Lt, first.clone(), end),
                Expr::call(
                    crate::kernel::ir::Builtin::Min,
                    vec![run, Expr::size_u32(&longest)],
                ),
                Expr::U32(0),
            );
            let count = g.emit("n", Ty::U32, run);
            g.push(Inst::Loop {
                counter,
                count,
                unroll,
                body: step,
            });
        });
        self.push(Inst::If { cond: inside, body });
        Expr::Var(acc)
    }

    /// `SortedStarts` at `idx` (a row `v`): how many keys are less than
    /// `v`, by binary search over the keys read in their sorted order.
    pub(super) fn sorted_starts_value(&mut self, n: usize, idx: &Expr) -> Expr {
        let [keys, order] = self.nodes[n].inputs[..] else {
            unreachable!("sorted starts read the keys and their order")
        };
        let len = Sz::dim(keys, 0, self.nodes[keys].shape[0]);
        let row = Expr::Construct {
            ty: Ty::scalar(DType::I32),
            x: Box::new(idx.clone()),
        };
        let lo = self.variable_of("lo", Ty::U32, Expr::U32(0));
        let hi = self.variable_of("hi", Ty::U32, Expr::size_u32(&len));
        // Each step halves `hi - lo`, from `len` to nothing.
        let steps = len.bits();
        let counter = self.fresh("b");
        let step = self.block(|g| {
            let halve = g.block(|g| {
                let sum = Expr::arith(Arith::Add, lo.clone(), hi.clone());
                let mid = g.emit("m", Ty::U32, Expr::arith(Arith::Div, sum, Expr::U32(2)));
                let position = g.value(order, &mid, false, false);
                let key = g.value(keys, &as_u32(position), false, false);
                let below = g.emit(
                    "lt",
                    Ty::scalar(DType::Bool),
                    Expr::arith(Arith::Lt, key, row.clone()),
                );
                let after = Expr::arith(Arith::Add, mid.clone(), Expr::U32(1));
                g.assign(&lo, Expr::select(below.clone(), after, lo.clone()));
                g.assign(&hi, Expr::select(below, hi.clone(), mid));
            });
            g.push(Inst::If {
                cond: Expr::arith(Arith::Lt, lo.clone(), hi.clone()),
                body: halve,
            });
        });
        self.push(Inst::Loop {
            counter,
            count: Expr::size_u32(&steps),
            unroll: 1,
            body: step,
        });
        let start = Expr::Construct {
            ty: Ty::scalar(DType::I32),
            x: Box::new(lo),
        };
        self.emit("v", Ty::scalar(DType::I32), start)
    }

    /// A scatter's accumulator of node `n`'s type, starting at the base's
    /// element `idx`.
    fn scatter_accumulator(&mut self, n: usize, base: usize, idx: &Expr) -> crate::kernel::ir::Var {
        let ty = Ty::scalar(self.nodes[n].dtype);
        let acc = self.fresh("acc");
        let b = self.value(base, idx, false, false);
        self.push(Inst::Declare {
            var: acc,
            ty,
            init: Some(b),
        });
        acc
    }

    /// Whether an output element at `coords` lies inside the source's
    /// extent on every dim but `axis` (only those receive anything).
    fn inside_source(coords: &[Expr], src_shape: &[Sz], axis: usize) -> Expr {
        let inside = (0..src_shape.len())
            .filter(|&d| d != axis)
            .map(|d| Expr::arith(Arith::Lt, coords[d].clone(), Expr::size_u32(&src_shape[d])))
            .collect();
        Expr::all(inside)
    }
}

/// An `i32` position as the `u32` index it is.
fn as_u32(x: Expr) -> Expr {
    Expr::Construct {
        ty: Ty::U32,
        x: Box::new(x),
    }
}
