//! The strategy choices as data (`strategy.rs`): each one by its sizes,
//! the precedents a site's later sizes keep, and the guards each choice
//! records (`kernel::sizes`).

use super::sizes::{Guard, Guards, Leaf, Sz};
use super::strategy::*;
use super::target::MatmulKernel;
use crate::dtype::DType;
use crate::graph::op::ReduceOp;

/// A kernel's loop budget on lavapipe (`Target::loop_budget(1)`).
const LIMIT: Option<usize> =
    Some(crate::kernel::target::LAVAPIPE_LOOP_LIMIT - crate::kernel::target::FIXED_LOOP_ITERATIONS);

fn sum(reduced: usize, parts: usize) -> ReduceShape {
    ReduceShape {
        op: ReduceOp::Sum,
        dtype: DType::F32,
        reduced: Sz::constant(reduced),
        parts,
        trailing: true,
        vectorizable: true,
    }
}

/// `choose_reduce` of sizes that are constants (no guards).
fn reduce(
    shape: ReduceShape,
    choices: (Option<ReduceStrategy>, Option<Strategy>),
    budget: Option<usize>,
    rule: ReduceRule,
) -> ReduceStrategy {
    choose_reduce(&shape, choices, (budget, rule), &mut Guards::default())
}

/// `choose_softmax` of sizes that are constants (no guards).
fn softmax_of(
    (len, rows, inner): (usize, usize, usize),
    vectorizable: bool,
    precedent: Option<Strategy>,
    budget: Option<usize>,
) -> SoftmaxStrategy {
    let [len, rows, inner] = [len, rows, inner].map(Sz::constant);
    let guards = &mut Guards::default();
    choose_softmax(
        (&len, &rows, &inner),
        vectorizable,
        precedent,
        (budget, guards),
    )
}

#[test]
fn reductions_by_size_and_layout() {
    // W2's first stage: 16M elements in 131,072 parts of 128.
    assert_eq!(
        reduce(sum(1 << 24, 1 << 17), (None, None), LIMIT, ReduceRule::GPU),
        ReduceStrategy::SumByFours
    );
    // Its second stage: 131,072 partial sums, one output.
    assert_eq!(
        reduce(sum(1 << 17, 1), (None, None), LIMIT, ReduceRule::GPU),
        ReduceStrategy::WorkgroupTree
    );
    // A row sum of 100: one invocation per row.
    assert_eq!(
        reduce(sum(100, 1), (None, None), LIMIT, ReduceRule::GPU),
        ReduceStrategy::PerInvocation
    );
    // A split max, or a strided split sum, is not read by fours.
    let max = ReduceShape {
        op: ReduceOp::Max,
        ..sum(1 << 20, 8192)
    };
    assert_eq!(
        reduce(max, (None, None), LIMIT, ReduceRule::GPU),
        ReduceStrategy::PerInvocation
    );
    let strided = ReduceShape {
        trailing: false,
        ..sum(1 << 20, 8192)
    };
    assert_eq!(
        reduce(strided, (None, None), LIMIT, ReduceRule::GPU),
        ReduceStrategy::PerInvocation
    );
}

#[test]
fn rows_past_the_loop_limit_take_a_workgroup() {
    use SoftmaxStrategy::*;
    let softmax = |p| Some(Strategy::Softmax(p));
    // 2,048 rows of 70,000 (or 40,000: two passes of it): a row per
    // invocation would stop early.
    assert_eq!(
        softmax_of((40_000, 2048, 1), true, None, LIMIT),
        RowPerWorkgroup
    );
    assert_eq!(
        softmax_of((70_000, 2048, 1), true, None, LIMIT),
        RowPerWorkgroup
    );
    assert_eq!(
        softmax_of((70_000, 263, 1), true, softmax(RowPerInvocation), LIMIT),
        RowPerWorkgroup
    );
    assert_eq!(
        softmax_of((70_000, 263, 1), true, softmax(RowPerInvocation), None),
        RowPerInvocation
    );
}

#[test]
fn softmax_by_rows() {
    use SoftmaxStrategy::*;
    // (row length, rows, stride between a row's elements) and the kernel.
    let cases = [
        // W3: 4,096 rows of 1,024.
        ((1024, 4096, 1), RowPerInvocationVec4),
        // Ten logits, 64 rows; 37 columns.
        ((10, 64, 1), RowPerInvocation),
        ((37, 5000, 1), RowPerInvocation),
        // Few long rows; a softmax along a leading axis.
        ((4096, 8, 1), RowPerWorkgroup),
        ((512, 2048, 3), RowPerInvocation),
    ];
    for (sizes, want) in cases {
        assert_eq!(softmax_of(sizes, true, None, LIMIT), want, "{sizes:?}");
    }
}

#[test]
fn a_tuned_rule_moves_the_tree_threshold_and_may_drop_sums_by_fours() {
    use ReduceStrategy::*;
    let pick = |shape, rule| reduce(shape, (None, None), LIMIT, rule);
    let from_1024 = ReduceRule::parse("tree-from-1024").expect("a candidate");
    let from_64 = ReduceRule::parse("tree-from-64").expect("a candidate");
    assert_eq!(pick(sum(1000, 1), ReduceRule::GPU), WorkgroupTree);
    assert_eq!(pick(sum(1000, 1), from_1024), PerInvocation);
    assert_eq!(pick(sum(100, 1), from_64), WorkgroupTree);
    let no_fours = ReduceRule::parse("tree-from-256-no-fours").expect("a candidate");
    assert_eq!(pick(sum(1 << 24, 1 << 17), no_fours), PerInvocation);
    // A rule's pick that would loop past the loop limit takes a tree.
    let never = ReduceRule {
        tree_from: usize::MAX,
        by_fours: true,
    };
    assert_eq!(pick(sum(1 << 20, 1), never), WorkgroupTree);
    // Every candidate's name reads back as itself, the built-in first,
    // each once.
    for builtin in [ReduceRule::GPU, ReduceRule::CPU] {
        let candidates = ReduceRule::candidates(builtin);
        assert_eq!(candidates[0], builtin);
        assert_eq!(candidates.len(), 6, "{candidates:?}");
        for rule in candidates {
            assert_eq!(ReduceRule::parse(&rule.name()), Some(rule));
        }
    }
    assert_eq!(ReduceRule::parse("tree-from-0"), None);
    assert_eq!(ReduceRule::parse("tree-from-x"), None);
    // On a CPU adapter a row of 1,000 is one invocation's loop.
    assert_eq!(pick(sum(1000, 1), ReduceRule::CPU), PerInvocation);
    assert_eq!(pick(sum(5000, 1), ReduceRule::CPU), WorkgroupTree);
}

#[test]
fn a_forced_reduction_is_used_where_valid_and_before_a_precedent() {
    use ReduceStrategy::*;
    let tree = Some(Strategy::Reduce(WorkgroupTree));
    // Sizes alone would take a tree for 1,000 elements a result.
    assert_eq!(
        reduce(sum(1000, 1), (None, None), LIMIT, ReduceRule::GPU),
        WorkgroupTree
    );
    assert_eq!(
        reduce(
            sum(1000, 1),
            (Some(PerInvocation), tree),
            LIMIT,
            ReduceRule::GPU
        ),
        PerInvocation
    );
    // Sizes alone: one invocation per short result.
    assert_eq!(
        reduce(
            sum(10, 1),
            (Some(WorkgroupTree), None),
            LIMIT,
            ReduceRule::GPU
        ),
        WorkgroupTree
    );
    assert_eq!(
        reduce(
            sum(4096, 32),
            (Some(SumByFours), None),
            LIMIT,
            ReduceRule::GPU
        ),
        SumByFours
    );
    // Not valid: by fours for an unsplit sum or a max; one invocation
    // past the loop budget. The built-in choice instead.
    assert_eq!(
        reduce(
            sum(4096, 1),
            (Some(SumByFours), None),
            LIMIT,
            ReduceRule::GPU
        ),
        WorkgroupTree
    );
    let max = ReduceShape {
        op: ReduceOp::Max,
        ..sum(4096, 32)
    };
    assert_eq!(
        reduce(
            max.clone(),
            (Some(SumByFours), None),
            LIMIT,
            ReduceRule::GPU
        ),
        reduce(max, (None, None), LIMIT, ReduceRule::GPU)
    );
    assert_eq!(
        reduce(
            sum(70_000, 1),
            (Some(PerInvocation), None),
            LIMIT,
            ReduceRule::GPU
        ),
        WorkgroupTree
    );
}

#[test]
fn a_precedent_is_kept_where_it_is_valid() {
    use ReduceStrategy::*;
    // The strategy for `shape` with `kept` as the site's precedent,
    // within `budget`.
    let with = |shape, kept, budget| {
        reduce(
            shape,
            (None, Some(Strategy::Reduce(kept))),
            budget,
            ReduceRule::GPU,
        )
    };
    // A loss summed over a batch of 64 (640 elements, a workgroup
    // tree), then of 17 (170 elements): the tree is kept.
    assert_eq!(
        reduce(sum(170, 1), (None, None), LIMIT, ReduceRule::GPU),
        PerInvocation
    );
    assert_eq!(with(sum(170, 1), WorkgroupTree, LIMIT), WorkgroupTree);
    assert_eq!(with(sum(1 << 15, 1), PerInvocation, LIMIT), PerInvocation);
    // Past the kernel's loop budget, one invocation per output would
    // stop early (lavapipe: 65,535 iterations): a tree instead, and
    // kept where nothing cuts loops short.
    assert_eq!(with(sum(70_000, 1), PerInvocation, LIMIT), WorkgroupTree);
    assert_eq!(
        with(sum(60_000 * 4, 4), PerInvocation, LIMIT),
        PerInvocation
    );
    assert_eq!(with(sum(1 << 20, 1), PerInvocation, None), PerInvocation);
    // Sums by fours need a multiple of four elements.
    assert_eq!(with(sum(4096, 32), SumByFours, LIMIT), SumByFours);
    assert_eq!(with(sum(4094, 32), SumByFours, LIMIT), PerInvocation);
    // Another kind of precedent (the site's graph changed) is ignored.
    let other = Some(Strategy::RowNorm { vec4: false });
    assert_eq!(
        reduce(sum(170, 1), (None, other), LIMIT, ReduceRule::GPU),
        PerInvocation
    );
}

#[test]
fn candidates_say_which_kernels_are_valid() {
    let names = |c: Vec<(String, bool)>| {
        c.into_iter()
            .filter(|&(_, ok)| ok)
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(reduce_candidates(&sum(100, 1), LIMIT)),
        ["PerInvocation", "WorkgroupTree"]
    );
    assert_eq!(
        names(reduce_candidates(&sum(1 << 24, 1 << 17), LIMIT)),
        ["PerInvocation", "SumByFours", "WorkgroupTree"]
    );
    assert_eq!(
        names(reduce_candidates(&sum(70_000, 1), LIMIT)),
        ["WorkgroupTree"]
    );
    assert_eq!(
        names(softmax_candidates(
            (&Sz::constant(1024), &Sz::constant(1)),
            true,
            LIMIT
        )),
        [
            "RowPerInvocationVec4",
            "RowPerInvocation",
            "RowPerWorkgroup"
        ]
    );
    assert_eq!(
        names(softmax_candidates(
            (&Sz::constant(40_000), &Sz::constant(1)),
            true,
            LIMIT
        )),
        ["RowPerWorkgroup"]
    );
}

#[test]
fn softmax_and_vec4_precedents_are_kept_where_valid() {
    use SoftmaxStrategy::*;
    let softmax = |p| Some(Strategy::Softmax(p));
    assert_eq!(
        softmax_of((10, 17, 1), true, softmax(RowPerWorkgroup), LIMIT),
        RowPerWorkgroup
    );
    assert_eq!(
        softmax_of((12, 17, 1), true, softmax(RowPerInvocationVec4), LIMIT),
        RowPerInvocationVec4
    );
    assert_eq!(
        softmax_of((10, 17, 1), true, softmax(RowPerInvocationVec4), LIMIT),
        RowPerInvocation
    );

    let scalar = Some(Strategy::Elementwise { vec4: false });
    let vec4 = Some(Strategy::Elementwise { vec4: true });
    assert!(!choose_vec4(true, scalar));
    assert!(choose_vec4(true, vec4) && choose_vec4(true, None));
    assert!(!choose_vec4(false, vec4));
}

/// A matmul stores fours where it can, unless its site stored
/// elements; a site that stored elements keeps that precedent when
/// its first sizes' (fours) are inherited.
#[test]
fn a_site_that_stored_elements_keeps_storing_them() {
    let matmul = |vec4_out| Strategy::Matmul {
        kernel: MatmulKernel::Blocked,
        tile: None,
        vec4_out,
    };
    assert!(choose_vec4_out(true, None) && choose_vec4_out(true, Some(matmul(true))));
    assert!(!choose_vec4_out(true, Some(matmul(false))));
    assert!(!choose_vec4_out(false, Some(matmul(true))));
    let (mut newer, mut older) = (Precedents::default(), Precedents::default());
    newer.record(0, matmul(false));
    newer.record(1, matmul(true));
    older.record(0, matmul(true));
    older.record(1, Strategy::Elementwise { vec4: true });
    newer.inherit(&older);
    assert_eq!(newer.get(0), Some(matmul(false)));
    assert_eq!(newer.get(1), Some(Strategy::Elementwise { vec4: true }));
}

/// Sizes that sit on and around every threshold the choices test.
const SIZES: [usize; 16] = [
    1, 2, 3, 4, 7, 100, 255, 256, 257, 1000, 1024, 4096, 5000, 32_767, 65_536, 70_001,
];

/// Whether every guard recorded at some sizes holds where dimension
/// `(node, dim)` is `at(node, dim)`.
fn all_hold(guards: &Guards, at: &dyn Fn(usize, usize) -> usize) -> bool {
    let at = |leaf: Leaf| match leaf {
        Leaf::Dim { node, dim } => at(node, dim),
        _ => unreachable!("strategies read dimensions"),
    };
    (guards.list().iter()).all(|g| g.holds_at(g.size.eval(&at)))
}

/// The guards a choice records are all it depends on: wherever the
/// guards recorded at one size hold at another, the other size gets
/// the same choice; and a reduction below the tree threshold names
/// it.
#[test]
fn a_choice_is_the_same_wherever_its_guards_hold() {
    let row = |len: usize, parts: usize| ReduceShape {
        reduced: Sz::dim(4, 1, len),
        parts,
        ..sum(0, 1)
    };
    let chosen = |len, parts, rule| {
        let mut guards = Guards::default();
        let s = choose_reduce(&row(len, parts), (None, None), (LIMIT, rule), &mut guards);
        (s, guards)
    };
    for rule in [ReduceRule::CPU, ReduceRule::GPU] {
        for parts in [1, 2, 32] {
            for a in SIZES {
                let (picked, guards) = chosen(a, parts, rule);
                for b in SIZES {
                    if all_hold(&guards, &|_, _| b) {
                        assert_eq!(chosen(b, parts, rule).0, picked, "{a} then {b}");
                    }
                }
            }
        }
    }
    let (picked, guards) = chosen(1000, 1, ReduceRule::CPU);
    assert_eq!(picked, ReduceStrategy::PerInvocation);
    let listed: Vec<String> = guards.list().iter().map(Guard::condition).collect();
    let budget = LIMIT.expect("lavapipe's budget");
    let expected = [
        "max(n4[1], 1) < 4096".to_string(),
        format!("max(n4[1], 1) <= {budget}"),
    ];
    assert_eq!(listed, expected);

    // A softmax over rows of n2[1], n2[0] of them.
    let softmax = |len, rows| {
        let (len, rows) = (Sz::dim(2, 1, len), Sz::dim(2, 0, rows));
        let mut guards = Guards::default();
        let budget = (LIMIT, &mut guards);
        let s = choose_softmax((&len, &rows, &Sz::constant(1)), true, None, budget);
        (s, guards)
    };
    for (len, rows) in SIZES.iter().flat_map(|&l| SIZES.map(|r| (l, r))) {
        let (picked, guards) = softmax(len, rows);
        for (l, r) in [(7, 1), (256, 1024), (1000, 3), (4096, 70_001), (70_001, 2)] {
            let at = |_: usize, dim: usize| if dim == 1 { l } else { r };
            if all_hold(&guards, &at) {
                assert_eq!(softmax(l, r).0, picked, "{len}x{rows} then {l}x{r}");
            }
        }
    }
}
