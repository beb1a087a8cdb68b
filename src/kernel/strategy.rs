//! How each kernel computes its values, as data: decided by pure
//! functions of the shapes involved (testable without a device, printed
//! in dumps), then carried out by the kernel builders in `codegen/`.
//!
//! A compile of a trace site whose sizes changed (a batch of 50 after
//! 64) is given the strategies the site's last compile chose
//! (`Precedents`) and keeps each one that is still valid for its sizes:
//! every strategy here computes the right values for any sizes but the
//! `vec4` ones (which need lengths that are multiples of four), so a
//! kernel whose sizes change keeps its code but for the literal sizes and
//! becomes generic over them (`kernel::generic`) instead of
//! being compiled again where a size crosses a threshold (a batch of 17
//! under a lane matmul's 32 rows or under a reduction's 256 elements).
//! The first sizes a site sees decide: the static fast path for sites
//! whose sizes never change, and for the others the price of a few idle
//! lanes at smaller sizes (measured in PERFORMANCE.md).

use std::collections::HashMap;

use crate::dtype::DType;
use crate::graph::op::ReduceOp;

use super::sizes::{Guards, Sz};
use super::target::MatmulKernel;

/// Invocations per workgroup of the generated kernels.
pub(crate) const WORKGROUP_SIZE: usize = 256;

/// The strategy of one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Elementwise work: one invocation per element, or per four elements
    /// loaded and stored as `vec4`s.
    Elementwise { vec4: bool },
    /// A reduction.
    Reduce(ReduceStrategy),
    /// A softmax or log-softmax.
    Softmax(SoftmaxStrategy),
    /// A matmul, with the kernel actually generated (the lane kernel falls
    /// back to `Blocked` where its textures would not fit) and, for the
    /// lane kernel, its workgroup tile.
    Matmul {
        kernel: MatmulKernel,
        tile: Option<LaneTile>,
        /// Whether its outputs are stored four elements at a time
        /// (`codegen::matmul::stores_in_fours`). A site that stored them
        /// one at a time keeps doing so at its later sizes, as an
        /// elementwise kernel keeps scalars, so that its kernels stay
        /// generic over a size that is at times a multiple of four.
        vec4_out: bool,
    },
    /// A packing kernel writing a matmul operand into a texture.
    Pack,
    /// A row normalisation (layer norm) or its gradient: a row per
    /// invocation (or a workgroup a row on GPUs), the row read three or
    /// four times; `vec4`: a row per invocation read four elements a
    /// load (rows along the last axis of a multiple of four elements,
    /// inputs that can be computed four at a time).
    RowNorm { vec4: bool },
    /// Fused attention: a query row per invocation, online softmax.
    Attention,
    /// A running sum or product: a line per invocation, walked once.
    Scan,
    /// A sort: a bitonic network a line per workgroup.
    Sort,
    /// A top-k select: a radix select a line per workgroup.
    Select,
}

/// The output tile of one workgroup of the lane matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaneTile {
    /// Rows (a multiple of the subgroup size, at most 64:
    /// `codegen::lane_tile`).
    pub rows: usize,
    /// Lanes (a power of two from the subgroup size).
    pub lanes: usize,
    /// Texels of output columns (four columns each) a lane computes,
    /// side by side: 1, or 2 where a tile over a packed B is made wide
    /// (`codegen::lane_tile::tile_for`).
    pub texels: usize,
    /// Whether A is read in place through its view rather than packed
    /// into a texture first (`lane_reads_a_in_place`, or kept from the
    /// site's precedent).
    pub a_in_place: bool,
    /// Whether A, read in place, is read four K values a load (where it
    /// lies row-major and K is a multiple of four, for a batch of
    /// matrices one that does not change between the site's graphs;
    /// never after the site's precedent read it one value at a time, so
    /// that a length that changes keeps one kernel).
    pub a_vec4: bool,
    /// Whether B is read in place through its view rather than packed
    /// into a texture first (`lane_reads_b_in_place`).
    pub b_in_place: bool,
    /// Whether A's texture is a copy of a stored value holding A's
    /// transpose (a texel: four rows at one K).
    pub a_transposed: bool,
    /// Whether B's texture is a copy of a stored value holding B's
    /// transpose (a texel: four K values of one column).
    pub b_transposed: bool,
}

/// The strategies a trace site's last compile chose, by the node each
/// kernel is keyed by (its root, or an elementwise kernel's first
/// output). See the module's documentation.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Precedents(HashMap<usize, Strategy>);

impl Precedents {
    /// Records that the kernel keyed by `node` used `strategy`.
    pub fn record(&mut self, node: usize, strategy: Strategy) {
        self.0.insert(node, strategy);
    }

    /// Takes `older`'s strategy for every node it has: the first sizes a
    /// site saw decide, whatever sizes came between (a batch of one,
    /// whose size-one dims make other kernels). One choice is kept from
    /// the newer side: a matmul that stored its outputs one at a time
    /// keeps doing so.
    pub fn inherit(&mut self, older: &Precedents) {
        for (&node, &was) in &older.0 {
            let kept = match (self.0.get(&node), was) {
                // Outputs stored one at a time stay so (see
                // `Strategy::Matmul::vec4_out`).
                (
                    Some(Strategy::Matmul {
                        vec4_out: false, ..
                    }),
                    Strategy::Matmul { kernel, tile, .. },
                ) => Strategy::Matmul {
                    kernel,
                    tile,
                    vec4_out: false,
                },
                _ => was,
            };
            self.0.insert(node, kept);
        }
    }

    /// The node an elementwise kernel writing `outputs` is keyed by (a
    /// root kernel is keyed by its root).
    pub fn elementwise_node(outputs: &[usize]) -> Option<usize> {
        outputs.first().copied()
    }

    /// The strategy of the kernel keyed by `node`, if recorded.
    pub fn get(&self, node: usize) -> Option<Strategy> {
        self.0.get(&node).copied()
    }

    /// These precedents without the strategies `drop` picks.
    pub fn without(&self, drop: impl Fn(&Strategy) -> bool) -> Precedents {
        Precedents(
            self.0
                .iter()
                .filter(|(_, s)| !drop(s))
                .map(|(&n, &s)| (n, s))
                .collect(),
        )
    }
}

/// Whether an elementwise kernel works on `vec4`s: where it `can`, unless
/// its precedent did not (a kernel that once had a length that is not a
/// multiple of four keeps the scalar code for every length).
pub(crate) fn choose_vec4(can: bool, precedent: Option<Strategy>) -> bool {
    can && precedent != Some(Strategy::Elementwise { vec4: false })
}

/// Whether a matmul stores its outputs four at a time: where it `can`
/// and its site's earlier sizes did not store them one at a time (see
/// `Strategy::Matmul::vec4_out`).
pub(crate) fn choose_vec4_out(can: bool, precedent: Option<Strategy>) -> bool {
    let stored_elements = matches!(
        precedent,
        Some(Strategy::Matmul {
            vec4_out: false,
            ..
        })
    );
    can && !stored_elements
}

/// How a reduction is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceStrategy {
    /// One invocation per output (or per part), looping over its elements:
    /// for short reductions.
    PerInvocation,
    /// The first stage of a split sum, one invocation per part reading a
    /// `vec4` per group of four elements (8 ms against 18 ms one element
    /// at a time for 16M f32 on lavapipe).
    SumByFours,
    /// A workgroup per output: invocations stride over the elements, then
    /// a tree in workgroup memory.
    WorkgroupTree,
}

/// The facts a reduction's strategy depends on.
#[derive(Clone, Debug)]
pub(crate) struct ReduceShape {
    pub op: ReduceOp,
    /// The input's dtype.
    pub dtype: DType,
    /// Elements reduced into each output (all parts together).
    pub reduced: Sz,
    /// Parts of a split reduction's first stage (1: not split).
    pub parts: usize,
    /// Whether the reduced dims are the input's trailing ones (so groups
    /// of four reduced elements are neighbours in memory).
    pub trailing: bool,
    /// Whether the input can be read four elements at a time.
    pub vectorizable: bool,
}

/// Which reduction kernel sizes alone pick (where nothing is forced or
/// kept from a site's earlier sizes): a workgroup tree from `tree_from`
/// elements an output (a split reduction's part), else sums by fours
/// where they are valid and `by_fours`, else one invocation per output.
/// A value of `Target` (`Target::reduce_rule`): `CPU` or `GPU` by the
/// adapter's kind, or the one tuning found fastest (`tune::reduce`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReduceRule {
    /// Elements an output from which a workgroup tree reduces it.
    pub tree_from: usize,
    /// Whether split sums over trailing dims read four elements at a time.
    pub by_fours: bool,
}

impl ReduceRule {
    /// GPUs: a tree from a workgroup's 256 elements (a loop per output
    /// leaves most of a GPU idle).
    pub const GPU: ReduceRule = ReduceRule {
        tree_from: WORKGROUP_SIZE,
        by_fours: true,
    };

    /// CPU adapters: a tree only from 4,096 elements. Lavapipe's barriers
    /// are dear and a few invocations keep its cores busy: timed by the
    /// tuner on six sums (PERFORMANCE.md), a tree from 4,096 took 0.43-0.47
    /// of the time of a tree from 256 (geometric mean, four runs on one
    /// 2-core AMD EPYC, two of them with `LP_NUM_THREADS=1`), and from
    /// 16,384 no less.
    pub const CPU: ReduceRule = ReduceRule {
        tree_from: 4096,
        by_fours: true,
    };

    /// The rules tuning times: `builtin` (the adapter kind's) first, a
    /// tree from each of 64, 256, 1,024, 4,096 and 16,384 elements, and
    /// `builtin` without sums by fours.
    pub fn candidates(builtin: ReduceRule) -> Vec<ReduceRule> {
        let mut out = vec![builtin];
        for tree_from in [64, 256, 1024, 4096, 16_384] {
            let rule = ReduceRule {
                tree_from,
                by_fours: true,
            };
            if !out.contains(&rule) {
                out.push(rule);
            }
        }
        out.push(ReduceRule {
            by_fours: !builtin.by_fours,
            ..builtin
        });
        out
    }

    /// The name it is cached and reported under: `tree-from-256`, with
    /// `-no-fours` where sums are not read by fours.
    pub fn name(&self) -> String {
        let fours = if self.by_fours { "" } else { "-no-fours" };
        format!("tree-from-{}{fours}", self.tree_from)
    }

    /// The rule named `name` (as `name` writes it).
    pub fn parse(name: &str) -> Option<ReduceRule> {
        let rest = name.strip_prefix("tree-from-")?;
        let (count, by_fours) = match rest.strip_suffix("-no-fours") {
            Some(count) => (count, false),
            None => (rest, true),
        };
        let tree_from = count.parse().ok().filter(|&n: &usize| n >= 1)?;
        Some(ReduceRule {
            tree_from,
            by_fours,
        })
    }
}

/// Every reduction kernel and whether it is valid for `shape` in a kernel
/// whose loops may run `loop_budget` iterations (`LAZYWGPU_DUMP` lists
/// them beside the one chosen).
pub(crate) fn reduce_candidates(
    shape: &ReduceShape,
    loop_budget: Option<usize>,
) -> Vec<(String, bool)> {
    // Listed, not decided on: the tests record no guard of the kernel.
    let guards = &mut Guards::default();
    [
        ReduceStrategy::PerInvocation,
        ReduceStrategy::SumByFours,
        ReduceStrategy::WorkgroupTree,
    ]
    .into_iter()
    .map(|s| {
        let valid = reduce_valid(s, shape, loop_budget, guards);
        (format!("{s:?}"), valid)
    })
    .collect()
}

/// Every softmax kernel and whether it is valid for rows of `len` (see
/// `choose_softmax`), for `LAZYWGPU_DUMP`.
pub(crate) fn softmax_candidates(
    (len, inner): (&Sz, &Sz),
    vectorizable: bool,
    loop_budget: Option<usize>,
) -> Vec<(String, bool)> {
    // Listed, not decided on: the tests record no guard of the kernel.
    let guards = &mut Guards::default();
    [
        SoftmaxStrategy::RowPerInvocationVec4,
        SoftmaxStrategy::RowPerInvocation,
        SoftmaxStrategy::RowPerWorkgroup,
    ]
    .into_iter()
    .map(|s| {
        let valid = softmax_valid(s, (len, inner), vectorizable, (loop_budget, guards));
        (format!("{s:?}"), valid)
    })
    .collect()
}

/// The strategy for a reduction of `shape`: the `forced` one
/// (`Target::reduce`) where that is valid for `shape`, else its
/// precedent's where that is, else `rule`'s, in a kernel whose loops may
/// run `loop_budget` iterations (`Target::loop_budget`). Each test of a
/// size it makes is recorded in `guards`.
pub(crate) fn choose_reduce(
    shape: &ReduceShape,
    (forced, precedent): (Option<ReduceStrategy>, Option<Strategy>),
    (loop_budget, rule): (Option<usize>, ReduceRule),
    guards: &mut Guards,
) -> ReduceStrategy {
    if let Some(f) = forced.filter(|&f| reduce_valid(f, shape, loop_budget, guards)) {
        return f;
    }
    match precedent {
        Some(Strategy::Reduce(kept)) if reduce_valid(kept, shape, loop_budget, guards) => kept,
        _ => {
            let chosen = reduce_for(shape, rule, guards);
            if reduce_valid(chosen, shape, loop_budget, guards) {
                chosen
            } else {
                ReduceStrategy::WorkgroupTree
            }
        }
    }
}

/// The elements one invocation or workgroup of a reduction of `shape`
/// reduces: a part's (at least one).
fn chunk_of(shape: &ReduceShape) -> Sz {
    (shape.reduced)
        .div_ceil(&Sz::constant(shape.parts))
        .max(&Sz::constant(1))
}

/// Whether `strategy` computes a reduction of `shape` right: sums by
/// fours need their layout, and one invocation per output loops over its
/// whole chunk, which must fit the kernel's loop budget (a workgroup
/// tree's loop is unrolled where it would not).
fn reduce_valid(
    strategy: ReduceStrategy,
    shape: &ReduceShape,
    loop_budget: Option<usize>,
    guards: &mut Guards,
) -> bool {
    match strategy {
        ReduceStrategy::SumByFours => by_fours(shape, guards),
        ReduceStrategy::PerInvocation => loop_budget.is_none_or(|budget| {
            guards.at_most(
                &chunk_of(shape),
                budget,
                "a loop per reduced output (the loop budget)",
            )
        }),
        ReduceStrategy::WorkgroupTree => true,
    }
}

/// The strategy `rule` gives a reduction of `shape` by its sizes.
fn reduce_for(shape: &ReduceShape, rule: ReduceRule, guards: &mut Guards) -> ReduceStrategy {
    if guards.at_least(
        &chunk_of(shape),
        rule.tree_from,
        "a reduction's workgroup tree",
    ) {
        return ReduceStrategy::WorkgroupTree;
    }
    if rule.by_fours && by_fours(shape, guards) {
        ReduceStrategy::SumByFours
    } else {
        ReduceStrategy::PerInvocation
    }
}

/// Whether a reduction can be summed by fours (`SumByFours`).
fn by_fours(shape: &ReduceShape, guards: &mut Guards) -> bool {
    shape.op == ReduceOp::Sum
        && shape.dtype != DType::Bool
        && shape.parts >= 2
        && shape.trailing
        && shape.vectorizable
        && guards.multiple_of(&shape.reduced, 4, "a split sum read four elements a load")
}

/// How a softmax is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SoftmaxStrategy {
    /// One invocation per row, reading and writing `vec4`s in three
    /// passes (two exponentials an element).
    RowPerInvocationVec4,
    /// One invocation per row, one element at a time.
    RowPerInvocation,
    /// A workgroup per row (few long rows).
    RowPerWorkgroup,
}

/// The strategy for a softmax over rows of `len` elements, `rows` of
/// them, `inner` the stride between a row's elements; `vectorizable`:
/// the input can be read four elements at a time. Its precedent's where
/// that is valid.
/// In a kernel whose loops may run `loop_budget` iterations, a row per
/// invocation (two passes over the row) is valid only for rows that fit.
/// Each test of a size it makes is recorded in `guards`.
pub(crate) fn choose_softmax(
    (len, rows, inner): (&Sz, &Sz, &Sz),
    vectorizable: bool,
    precedent: Option<Strategy>,
    (loop_budget, guards): (Option<usize>, &mut Guards),
) -> SoftmaxStrategy {
    use SoftmaxStrategy::*;
    let valid = |s, guards: &mut Guards| {
        softmax_valid(s, (len, inner), vectorizable, (loop_budget, guards))
    };
    match precedent {
        Some(Strategy::Softmax(RowPerInvocationVec4)) if valid(RowPerInvocationVec4, guards) => {
            RowPerInvocationVec4
        }
        Some(Strategy::Softmax(RowPerInvocation | RowPerInvocationVec4))
            if valid(RowPerInvocation, guards) =>
        {
            RowPerInvocation
        }
        Some(Strategy::Softmax(RowPerWorkgroup)) => RowPerWorkgroup,
        // Many rows, or rows too short to keep a workgroup busy (a
        // classifier's 10 logits): one invocation per row.
        _ if valid(RowPerInvocation, guards)
            && (guards.at_least(rows, 1024, "a softmax row per invocation (many rows)")
                || guards.at_most(len, 256, "a softmax row per invocation (short rows)")) =>
        {
            if valid(RowPerInvocationVec4, guards) {
                RowPerInvocationVec4
            } else {
                RowPerInvocation
            }
        }
        _ => RowPerWorkgroup,
    }
}

/// Whether `strategy` computes a softmax over rows of `len` (`inner` the
/// stride between a row's elements; `vectorizable`: the input can be read
/// four elements at a time) in a kernel whose loops may run
/// `loop_budget` iterations: a row per invocation (two passes over the
/// row) only where the row fits, read as `vec4`s only along contiguous
/// rows of a multiple of four.
fn softmax_valid(
    strategy: SoftmaxStrategy,
    (len, inner): (&Sz, &Sz),
    vectorizable: bool,
    (loop_budget, guards): (Option<usize>, &mut Guards),
) -> bool {
    let row_fits = |guards: &mut Guards| {
        loop_budget.is_none_or(|budget| {
            guards.at_most(
                &len.times(2),
                budget,
                "a softmax row per invocation (the loop budget)",
            )
        })
    };
    match strategy {
        SoftmaxStrategy::RowPerInvocationVec4 => {
            vectorizable
                && row_fits(guards)
                && guards.equals(inner, 1, "softmax rows read as vec4s (contiguous rows)")
                && guards.multiple_of(len, 4, "softmax rows read as vec4s")
        }
        SoftmaxStrategy::RowPerInvocation => row_fits(guards),
        SoftmaxStrategy::RowPerWorkgroup => true,
    }
}

/// Row length from which a softmax row on a GPU is a workgroup's work
/// (`Target::rows_per_workgroup`): shorter rows (a classifier's logits)
/// would leave most of a workgroup idle.
pub(crate) const GPU_ROW_MIN: usize = 64;
