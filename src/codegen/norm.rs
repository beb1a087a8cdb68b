//! Row normalisation (the core of layer norm) and its gradient, built as
//! IR, reading the row three times (mean, centred second moment, write)
//! forward and four times backward. On CPU adapters one invocation per
//! row of the last axis: rows of a layer norm are short (the model
//! width), so a row stays in cache and no workgroup barrier is needed
//! (they are dear on CPU drivers); read four elements a load where the
//! row allows (lavapipe makes each storage load a loop over its SIMD
//! lanes, so a quarter of the loads is most of the cost). On GPUs a
//! workgroup per row, whose partial sums meet in workgroup trees
//! (`Target::rows_per_workgroup`).

use super::emit::Gen;
use super::reduce_ir::{strided_within, workgroup_tree};
use super::roots::store_outputs;
use super::vectorize::vectorizable;
use super::wgsl::unroll_guarded;
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::{BinaryOp, UnaryOp};
use crate::kernel::ir::{Arith, Expr, Inst, Ty, Var};
use crate::kernel::{Entry, Guards, Sz, WorkgroupArray};

/// What one pass does with (generator, element index, x there, gy there).
type PassBody<'a> = dyn Fn(&mut Gen, &Expr, &Expr, Option<&Expr>) + 'a;

/// What a summing pass adds at one element (same arguments as
/// `PassBody`): one value for each of its sums, in order.
type SumBody<'a> = dyn Fn(&mut Gen, &Expr, &Expr, Option<&Expr>) -> Vec<Expr> + 'a;

/// Elements (or groups of four) of a block whose sum is taken apart
/// before it joins the row's (`RowPasses::sum_pass`).
const SUM_BLOCK: usize = 64;

/// Rows of at least this many elements (or groups of four) are summed
/// by blocks; shorter ones add each element to the row's sum.
const BLOCKED_FROM: usize = 8 * SUM_BLOCK;

/// The kernel of `Normalize` (or `NormalizeBackward` when `backward`;
/// the root mean square variants when `rms`) at
/// `root`, whose `eps` is parameter word `eps_slot`: its entry, its body
/// and its workgroup count. A row per invocation on CPU adapters; on GPUs
/// (`Target::rows_per_workgroup`) a row per workgroup of
/// `ROW_WORKGROUP`, whose invocations stride the row and combine their
/// partial sums by a tree in workgroup memory. Also returns whether the
/// rows are read four elements a load (`RowPasses::vec4`).
pub(super) fn normalize(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    eps_slot: usize,
    (backward, rms): (bool, bool),
    outputs: &[usize],
) -> ((Entry, Vec<Inst>, usize), bool) {
    let row = RowPasses::new(g, key, root, (backward, rms));
    let len_f = Expr::Cast {
        from: DType::U32,
        to: DType::F32,
        vec: false,
        x: Box::new(Expr::size_u32(&row.len)),
    };
    let eps = g.param(eps_slot, DType::F32);
    let stats = if rms {
        row_rms(g, &row, &len_f, eps)
    } else {
        let shift = row.first_element(g);
        row_stats(g, &row, &len_f, eps, shift)
    };
    if backward {
        write_gradient(g, &row, &stats, &len_f, |g, i, dx| {
            store_outputs(g, key, (root, outputs), i, dx)
        });
    } else {
        row.pass(g, &|g, i, v, _| {
            let y = stats.normalised(g, v);
            store_outputs(g, key, (root, outputs), i, &y);
        });
    }
    let (entry, groups) = row.entry();
    ((entry, g.take_body(), groups), row.vec4)
}

/// How the statistics see the rows: passes over a row's elements, and
/// the combination of an invocation's partial sum into the row's (one
/// invocation a row, or a workgroup a row meeting in a tree).
struct RowPasses {
    /// The input whose rows are normalised.
    x: usize,
    /// The output's gradient, read beside x when backward.
    gy: Option<usize>,
    /// Elements of a row (the last axis).
    len: Sz,
    rows: Sz,
    /// Passes over the row, which share the kernel's loop budget.
    passes: usize,
    unroll: usize,
    /// A workgroup a row (GPUs) rather than an invocation a row.
    per_workgroup: bool,
    /// An invocation's row read four elements a load (x, and gy when
    /// backward): rows of a multiple of four elements whose inputs can be
    /// computed four at a time. Each group's elements are then visited
    /// in order, one at a time, so the sums are the scalar kernel's.
    vec4: bool,
    /// How a summing pass takes an invocation's row by blocks
    /// (`sum_blocks`); `None` for rows summed whole: a workgroup's (its
    /// invocations' partial sums meet in a tree), a short one, or one too
    /// long for blocks.
    blocks: Option<SumBlocks>,
    /// The workgroup array the partial sums meet in.
    partial: Var,
}

impl RowPasses {
    /// The rows of `root`'s input, and the workgroup array's variable.
    fn new(g: &mut Gen, key: &GraphKey, root: usize, (backward, rms): (bool, bool)) -> Self {
        let inputs = &key.nodes[root].inputs;
        let x = inputs[0];
        let shape = &key.nodes[x].shape;
        let len = Sz::last_dim(x, shape);
        let rows = Sz::elements(x, shape).div_by(&len.max(&Sz::constant(1)));
        let per_workgroup = g.context().target.rows_per_workgroup;
        // Three passes over the row forward, four backward (one fewer for
        // the root mean square, which takes no mean), each within its share
        // of the kernel's loop budget.
        let passes = if backward { 4 } else { 3 } - usize::from(rms);
        let gy = backward.then(|| inputs[1]);
        let stored = g.stored;
        let four_at_a_time =
            |n: usize, guards: &mut Guards| vectorizable(&key.nodes, n, stored, false, guards);
        let vec4 = !per_workgroup
            && four_at_a_time(x, &mut g.guards)
            && gy.is_none_or(|gy| four_at_a_time(gy, &mut g.guards))
            && (g.guards).multiple_of(&len, 4, "norm rows read four elements a load");
        let loads = if vec4 { len.div(4) } else { len.clone() };
        let budget = g.context().target.loop_budget(passes);
        let unroll = unroll_guarded(&loads, budget, &mut g.guards);
        let blocks = match per_workgroup {
            true => None,
            false => sum_blocks(&loads, budget, &mut g.guards),
        };
        let partial = g.fresh("row_part");
        RowPasses {
            x,
            gy,
            len,
            rows,
            passes,
            unroll,
            per_workgroup,
            vec4,
            blocks,
            partial,
        }
    }

    /// Reads x (and gy) at element `k` of row gi, then runs `f`.
    fn at_element(&self, g: &mut Gen, k: Expr, f: &PassBody<'_>) {
        let at = Expr::arith(
            Arith::Add,
            Expr::arith(Arith::Mul, Expr::Invocation, Expr::size_u32(&self.len)),
            k,
        );
        let i = g.emit("i", Ty::U32, at);
        let v = g.value(self.x, &i, false, false);
        let gv = self.gy.map(|gy| g.value(gy, &i, false, false));
        f(g, &i, &v, gv.as_ref());
    }

    /// Reads x (and gy) at group of four `k` of row gi, then runs `f` at
    /// each of its elements in order.
    fn at_group(&self, g: &mut Gen, k: Expr, f: &PassBody<'_>) {
        let at = Expr::arith(
            Arith::Add,
            Expr::arith(
                Arith::Mul,
                Expr::Invocation,
                Expr::size_u32(&self.len.div(4)),
            ),
            k,
        );
        let i4 = g.emit("i", Ty::U32, at);
        let v4 = g.value(self.x, &i4, false, true);
        let gv4 = self.gy.map(|gy| g.value(gy, &i4, false, true));
        for q in 0..4 {
            let at = Expr::arith(Arith::Mul, i4.clone(), Expr::U32(4));
            let i = g.emit("i", Ty::U32, Expr::arith(Arith::Add, at, Expr::U32(q)));
            let v = g.emit("v", Ty::F32, Expr::index(v4.clone(), Expr::U32(q)));
            let gv = gv4
                .as_ref()
                .map(|gv4| g.emit("gv", Ty::F32, Expr::index(gv4.clone(), Expr::U32(q))));
            f(g, &i, &v, gv.as_ref());
        }
    }

    /// Runs one pass over the row: `f` at each element. It visits them
    /// all in one invocation, or every `ROW_WORKGROUP`th from the
    /// invocation's own.
    fn pass(&self, g: &mut Gen, f: &PassBody<'_>) {
        if self.per_workgroup {
            let wg = Sz::constant(ROW_WORKGROUP);
            let within = (&Expr::Local, &wg, &self.len);
            strided_within(g, within, self.passes, &|g, k| self.at_element(g, k, f));
        } else {
            // Over the row's elements, or its groups of four.
            let counter = g.fresh("k");
            let k = Expr::Var(counter);
            let (body, count) = if self.vec4 {
                (g.block(|g| self.at_group(g, k, f)), self.len.div(4))
            } else {
                (g.block(|g| self.at_element(g, k, f)), self.len.clone())
            };
            g.push(Inst::Loop {
                counter,
                count: Expr::size_u32(&count),
                unroll: self.unroll,
                body,
            });
        }
    }

    /// Runs one pass over the row that adds `f`'s values into `sums`.
    /// Where one invocation takes a long row, its elements are summed by
    /// blocks of `SUM_BLOCK`, each block's sum then added to the row's:
    /// one running sum over a whole row drifts with the row's length
    /// (its rounding grows with the sum), as PyTorch's cascaded sums do
    /// not. A row too long for the loop budget in blocks adds each
    /// element to the row's sum.
    fn sum_pass(&self, g: &mut Gen, sums: &[&Expr], f: &SumBody<'_>) {
        let add = |g: &mut Gen, into: &[&Expr], i: &Expr, v: &Expr, gv: Option<&Expr>| {
            for (acc, value) in into.iter().zip(f(g, i, v, gv)) {
                g.accumulate(acc, value);
            }
        };
        let Some(SumBlocks {
            full, unroll, tail, ..
        }) = &self.blocks
        else {
            return self.pass(g, &|g, i, v, gv| add(g, sums, i, v, gv));
        };
        let visit = |g: &mut Gen, k: Expr, into: &[&Expr]| {
            let f = |g: &mut Gen, i: &Expr, v: &Expr, gv: Option<&Expr>| add(g, into, i, v, gv);
            if self.vec4 {
                self.at_group(g, k, &f)
            } else {
                self.at_element(g, k, &f)
            }
        };
        let block = g.fresh("kb");
        let body = g.block(|g| {
            let parts: Vec<Expr> = sums.iter().map(|_| g.accumulator("part")).collect();
            let counter = g.fresh("k");
            let start = Expr::arith(Arith::Mul, Expr::Var(block), Expr::U32(SUM_BLOCK as u64));
            let within = g.block(|g| {
                let k = Expr::arith(Arith::Add, start.clone(), Expr::Var(counter));
                visit(g, k, &parts.iter().collect::<Vec<_>>())
            });
            g.push(Inst::Loop {
                counter,
                count: Expr::count(SUM_BLOCK),
                unroll: *unroll,
                body: within,
            });
            for (total, part) in sums.iter().zip(parts) {
                g.accumulate(total, part);
            }
        });
        g.push(Inst::Loop {
            counter: block,
            count: Expr::size_u32(full),
            unroll: 1,
            body,
        });
        if self.blocks.as_ref().is_some_and(|b| b.ragged) {
            let counter = g.fresh("k");
            let start = Expr::size_u32(&full.times(SUM_BLOCK));
            let body =
                g.block(|g| visit(g, Expr::arith(Arith::Add, start, Expr::Var(counter)), sums));
            g.push(Inst::Loop {
                counter,
                count: Expr::size_u32(tail),
                unroll: 1,
                body,
            });
        }
    }

    /// A pass's partial sum made the row's: as it is in one invocation, or
    /// by the workgroup's tree, then a barrier, so that every invocation
    /// has read the result before the next tree reuses the array.
    fn total(&self, g: &mut Gen, part: Expr) -> Expr {
        if !self.per_workgroup {
            return part;
        }
        let t = workgroup_tree(g, self.partial, &part, BinaryOp::Add, ROW_WORKGROUP);
        g.push(Inst::Barrier);
        t
    }

    /// The row's first element, the shift its moments are taken about.
    fn first_element(&self, g: &mut Gen) -> Expr {
        if self.vec4 {
            // Read as the passes read x: a binding holds one element type.
            let group = Expr::arith(
                Arith::Mul,
                Expr::Invocation,
                Expr::size_u32(&self.len.div(4)),
            );
            let group = g.emit("i0", Ty::U32, group);
            let v4 = g.value(self.x, &group, false, true);
            return g.emit("v0", Ty::F32, Expr::index(v4, Expr::U32(0)));
        }
        let first = Expr::arith(Arith::Mul, Expr::Invocation, Expr::size_u32(&self.len));
        let first = g.emit("i0", Ty::U32, first);
        g.value(self.x, &first, false, false)
    }

    /// The kernel's entry and workgroup count.
    fn entry(&self) -> (Entry, usize) {
        let rows = &self.rows;
        if self.per_workgroup {
            let array = WorkgroupArray {
                var: self.partial,
                element: Ty::F32,
                len: ROW_WORKGROUP,
            };
            (
                row_entry(ROW_WORKGROUP, false, rows, vec![array]),
                rows.literal(),
            )
        } else {
            let wg = ROWS_PER_WORKGROUP_CPU;
            let groups = rows.literal().div_ceil(wg);
            (row_entry(wg, true, rows, Vec::new()), groups)
        }
    }
}

/// How one invocation sums a row by blocks (`RowPasses::sum_pass`).
#[derive(Clone, Debug)]
struct SumBlocks {
    /// Full blocks of `SUM_BLOCK`.
    full: Sz,
    /// The unroll of the loop within a block.
    unroll: usize,
    /// Elements (or groups of four) past the full blocks, summed by a
    /// loop of their own where there are any (`ragged`).
    tail: Sz,
    ragged: bool,
}

/// How one invocation sums a row of `units` by blocks: its full blocks,
/// the smallest unroll of the loop within a block that keeps the pass's
/// loop iterations (the blocks, their elements, the tail) within
/// `budget`, and the tail. `None` for a row shorter than `BLOCKED_FROM`
/// or too long for blocks in the budget. Each test is recorded in
/// `guards`.
fn sum_blocks(units: &Sz, budget: Option<usize>, guards: &mut Guards) -> Option<SumBlocks> {
    if !guards.at_least(units, BLOCKED_FROM, "a norm's row summed by blocks") {
        return None;
    }
    let full = units.div(SUM_BLOCK);
    let tail = units.rem(SUM_BLOCK);
    let unroll = match budget {
        None => 1,
        Some(budget) => {
            let iterations = |unroll: usize| full.times(1 + SUM_BLOCK / unroll).add(&tail);
            (0..=SUM_BLOCK.trailing_zeros())
                .map(|p| 1 << p)
                .find(|&u| guards.at_most(&iterations(u), budget, "a norm's blocks unrolled"))?
        }
    };
    // A loop over the tail where the blocks leave one.
    let whole = guards.multiple_of(units, SUM_BLOCK, "a norm's row ends in a partial block");
    Some(SumBlocks {
        full,
        unroll,
        tail,
        ragged: !whole,
    })
}

/// The entry of a row kernel over `rows` rows.
fn row_entry(wg: usize, per_invocation: bool, rows: &Sz, arrays: Vec<WorkgroupArray>) -> Entry {
    Entry {
        workgroup_size: wg,
        per_invocation,
        count: Expr::size_u32(rows),
        arrays,
        subgroup_id: false,
    }
}

/// Invocations of a row's workgroup (GPUs): two of NVIDIA's warps of 32,
/// one of AMD's waves of 64; rows of a model's width (128-4096) give each
/// a few to a few dozen elements.
const ROW_WORKGROUP: usize = 64;

/// Rows of a workgroup where each invocation takes a row (CPU adapters):
/// a model's batch of rows (768 in the baby GPT's step) in workgroups of
/// 256 made three, which two cores split two to one.
const ROWS_PER_WORKGROUP_CPU: usize = 64;

/// A row's mean (none for the root mean square) and reciprocal standard
/// deviation.
struct RowStats {
    mean: Option<Expr>,
    rstd: Expr,
}

impl RowStats {
    /// `(v - mean) * rstd`.
    fn normalised(&self, g: &mut Gen, v: &Expr) -> Expr {
        let Some(mean) = &self.mean else {
            return g.emit(
                "xh",
                Ty::F32,
                f32_op(BinaryOp::Mul, v.clone(), self.rstd.clone()),
            );
        };
        let d = g.emit("d", Ty::F32, f32_op(BinaryOp::Sub, v.clone(), mean.clone()));
        g.emit("xh", Ty::F32, f32_op(BinaryOp::Mul, d, self.rstd.clone()))
    }
}

/// The row's mean, then its centred second moment (two passes).
///
/// The first mean is `shift + sum(v - shift) / len`, `shift` being the
/// row's first element: a constant row then has a mean equal to its
/// elements whatever the driver does with the division (NVIDIA's Vulkan
/// driver multiplies by a reciprocal, within the 2.5 ulp Vulkan allows,
/// and fuses `v - s * (1 / len)` into one FMA, which left `3 - 15 / 5`
/// at -4.5e-8 and a normalised constant row at -1.4e-5 where PyTorch has
/// 0); the shift also keeps the sum small where a row sits far from zero.
///
/// That sum still grows with the row where the first element is far
/// from the mean, and one invocation adds a row's elements one after
/// another (CPU adapters): its rounding drifts, by 1e-4 of the standard
/// deviation for rows of 16,000 normal values. The second pass corrects
/// the mean by the sum of the deviations from it (`c`, which stays of the
/// size of a random walk), and takes the variance about the corrected
/// mean, `q / len - (c / len)^2` (the corrected two-pass algorithm; a
/// constant row still has `c = 0`). The variance is kept from going
/// below zero by rounding (where `eps` is 0); a NaN stays NaN.
fn row_stats(g: &mut Gen, row: &RowPasses, len_f: &Expr, eps: Expr, shift: Expr) -> RowStats {
    let s = g.accumulator("s");
    row.sum_pass(g, &[&s], &|g, _, v, _| {
        let d = f32_op(BinaryOp::Sub, v.clone(), shift.clone());
        vec![g.emit("d", Ty::F32, d)]
    });
    let s = row.total(g, s);
    let ms = g.emit("ms", Ty::F32, f32_op(BinaryOp::Div, s, len_f.clone()));
    let first_mean = g.emit("mean0", Ty::F32, f32_op(BinaryOp::Add, shift, ms));
    let (c, q) = (g.accumulator("c"), g.accumulator("q"));
    row.sum_pass(g, &[&c, &q], &|g, _, v, _| {
        let d = f32_op(BinaryOp::Sub, v.clone(), first_mean.clone());
        let d = g.emit("d", Ty::F32, d);
        let dd = g.emit("dd", Ty::F32, f32_op(BinaryOp::Mul, d.clone(), d.clone()));
        vec![d, dd]
    });
    let c = row.total(g, c);
    let q = row.total(g, q);
    let mc = g.emit("mc", Ty::F32, f32_op(BinaryOp::Div, c, len_f.clone()));
    let mean = g.emit(
        "mean",
        Ty::F32,
        f32_op(BinaryOp::Add, first_mean, mc.clone()),
    );
    let mq = g.emit("mq", Ty::F32, f32_op(BinaryOp::Div, q, len_f.clone()));
    let mc2 = g.emit("mc2", Ty::F32, f32_op(BinaryOp::Mul, mc.clone(), mc));
    let var = f32_op(BinaryOp::Sub, mq, mc2);
    let var = g.emit("var", Ty::F32, f32_op(BinaryOp::Maximum, var, Expr::F32(0)));
    let var_eps = g.emit("ve", Ty::F32, f32_op(BinaryOp::Add, var, eps));
    let rstd = g.emit("rstd", Ty::F32, f32_unary(UnaryOp::Rsqrt, var_eps));
    RowStats {
        mean: Some(mean),
        rstd,
    }
}

/// The reciprocal root mean square `1 / sqrt(mean(v^2) + eps)` (one pass).
fn row_rms(g: &mut Gen, row: &RowPasses, len_f: &Expr, eps: Expr) -> RowStats {
    let q = g.accumulator("q");
    row.sum_pass(g, &[&q], &|g, _, v, _| {
        vec![g.emit("vv", Ty::F32, f32_op(BinaryOp::Mul, v.clone(), v.clone()))]
    });
    let q = row.total(g, q);
    let ms = g.emit("ms", Ty::F32, f32_op(BinaryOp::Div, q, len_f.clone()));
    let ms_eps = g.emit("ve", Ty::F32, f32_op(BinaryOp::Add, ms, eps));
    let rstd = g.emit("rstd", Ty::F32, f32_unary(UnaryOp::Rsqrt, ms_eps));
    RowStats { mean: None, rstd }
}

/// The gradient with respect to x, `rstd * (gy - mean(gy) - xhat *
/// mean(gy * xhat))` (without `mean(gy)` for the root mean square, whose
/// output does not move with the row's mean): a pass for the two means, a
/// pass that writes it (`store` at each element).
fn write_gradient(
    g: &mut Gen,
    row: &RowPasses,
    stats: &RowStats,
    len_f: &Expr,
    store: impl Fn(&mut Gen, &Expr, &Expr),
) {
    let centred = stats.mean.is_some();
    let sg = centred.then(|| g.accumulator("sg"));
    let sgx = g.accumulator("sgx");
    let sums: Vec<&Expr> = sg.iter().chain([&sgx]).collect();
    row.sum_pass(g, &sums, &|g, _, v, gv| {
        let gv = gv.expect("backward reads gy");
        let xh = stats.normalised(g, v);
        let t = g.emit("t", Ty::F32, f32_op(BinaryOp::Mul, gv.clone(), xh));
        sg.iter().map(|_| gv.clone()).chain([t]).collect()
    });
    let mg = sg.map(|sg| {
        let sg = row.total(g, sg);
        g.emit("mg", Ty::F32, f32_op(BinaryOp::Div, sg, len_f.clone()))
    });
    let sgx = row.total(g, sgx);
    let mgx = g.emit("mgx", Ty::F32, f32_op(BinaryOp::Div, sgx, len_f.clone()));
    row.pass(g, &|g, i, v, gv| {
        let gv = gv.expect("backward reads gy");
        let a = match &mg {
            Some(mg) => g.emit("a", Ty::F32, f32_op(BinaryOp::Sub, gv.clone(), mg.clone())),
            None => gv.clone(),
        };
        let xh = stats.normalised(g, v);
        let b = g.emit("b", Ty::F32, f32_op(BinaryOp::Mul, xh, mgx.clone()));
        let c = g.emit("c", Ty::F32, f32_op(BinaryOp::Sub, a, b));
        let dx = g.emit("dx", Ty::F32, f32_op(BinaryOp::Mul, stats.rstd.clone(), c));
        store(g, i, &dx);
    });
}

/// `a op b` on f32 values.
pub(super) fn f32_op(op: BinaryOp, a: Expr, b: Expr) -> Expr {
    Expr::f32_binary(op, a, b, false)
}

/// `op x` on an f32 value.
pub(super) fn f32_unary(op: UnaryOp, x: Expr) -> Expr {
    Expr::f32_unary(op, x, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Target;

    /// `sum_blocks` of a row of a constant length: full blocks and unroll.
    fn blocks(units: usize, budget: Option<usize>) -> Option<(usize, usize)> {
        let blocks = sum_blocks(&Sz::constant(units), budget, &mut Guards::default())?;
        assert_eq!(blocks.tail.literal(), units % SUM_BLOCK);
        assert_eq!(blocks.ragged, !units.is_multiple_of(SUM_BLOCK));
        Some((blocks.full.literal(), blocks.unroll))
    }

    #[test]
    fn long_rows_are_summed_by_blocks_within_the_loop_budget() {
        // Lavapipe's budget for each of three passes.
        let budget = Target::lavapipe().loop_budget(3);
        assert_eq!(blocks(511, budget), None, "a short row");
        assert_eq!(blocks(1024, budget), Some((16, 1)));
        // 70,001 elements: 1,093 blocks, whose loops fit once unrolled by
        // four (1,093 * 65 iterations would not).
        let (full, unroll) = blocks(70_001, budget).expect("blocks");
        assert_eq!((full, unroll), (1_093, 4));
        let iterations = full * (1 + SUM_BLOCK / unroll) + 70_001 % SUM_BLOCK;
        assert!(iterations <= budget.unwrap_or(0), "{iterations}");
        // Past what blocks can fit, the row is summed whole (its own
        // unroll keeps it within the budget); without a limit, no unroll.
        assert_eq!(blocks(2_000_000, budget), None);
        assert_eq!(blocks(2_000_000, None), Some((31_250, 1)));
    }
}
