//! Tests of symbolic sizes and their guards.

use super::*;

#[test]
fn sizes_keep_their_value_and_their_expression() {
    let rows = Sz::dim(3, 0, 50);
    let cols = Sz::dim(3, 1, 12);
    let n = rows
        .mul(&cols)
        .div_ceil(&Sz::constant(4))
        .max(&Sz::constant(1));
    assert_eq!(n.value, 150);
    assert_eq!(n.expr().to_string(), "max((n3[0] * n3[1]) /^ 4, 1)");
    let at = |leaf: Leaf| match leaf {
        Leaf::Dim { node: 3, dim } => [64, 12][dim],
        _ => 0,
    };
    assert_eq!(n.expr().eval(&at), 64 * 12 / 4);
    assert_eq!(n.expr().eval(&|_| 0), 1);
    let spanned = Sz::extent(5, 100).times(4);
    assert_eq!(spanned.expr().to_string(), "extent(n5) * 4");
    assert_eq!(n.expr().nodes(), vec![3]);
    // Identities do not grow expressions; constants fold.
    assert_eq!(*rows.times(1).expr(), *rows.expr());
    assert!(Sz::constant(3).times(4).expr().is_constant());
    let bytes = Sz::extent(5, 10).times(4).times(4);
    assert_eq!(
        (bytes.value, bytes.expr().to_string()),
        (160, "extent(n5) * 16".into())
    );
    // A binary search's steps: the bits of its length.
    let steps = rows.bits();
    assert_eq!(
        (steps.value, steps.expr().to_string()),
        (6, "bits(n3[0])".into())
    );
    assert_eq!(steps.expr().eval(&|_| 64), 7);
    assert!(Sz::constant(8).bits().expr().is_constant());
    let product = Sz::dims_product(3, &[50, 12, 7], [0, 2]);
    assert_eq!(
        (product.value, product.expr().to_string()),
        (350, "n3[0] * n3[2]".into())
    );
}

#[test]
fn every_test_of_a_dimension_is_recorded_once_and_constants_are_not() {
    let mut guards = Guards::default();
    let len = Sz::dim(7, 1, 2048);
    assert!(!guards.at_least(&len, 4096, "a tree"));
    assert!(!guards.at_least(&len, 4096, "a tree"));
    assert!(guards.multiple_of(&len, 4, "fours"));
    assert!(!guards.at_least(&len, 4096, "again"));
    assert!(guards.at_most(&len, 2048, "at most"));
    assert!(!guards.equals(&len, 1, "one"));
    assert!(!guards.at_least(&Sz::constant(3), 4, "constant"));
    let listed: Vec<String> = guards.list().iter().map(Guard::condition).collect();
    assert_eq!(
        listed,
        [
            "n7[1] < 4096",
            "n7[1] % 4 == 0",
            "n7[1] <= 2048",
            "n7[1] != 1"
        ]
    );
    // Each guard says whether other values keep its answer.
    let tree = &guards.list()[0];
    assert!(tree.holds_at(4095) && !tree.holds_at(4096));
    let one = &guards.list()[3];
    assert!(one.holds_at(5) && !one.holds_at(1));
    assert_eq!(tree.to_string(), "n7[1] < 4096 (2048; a tree)");
}

#[test]
fn the_first_guard_whose_answer_changed_is_the_one_crossed() {
    let lowered = |len: usize| {
        let mut guards = Guards::default();
        let len = Sz::dim(7, 1, len);
        guards.multiple_of(&len, 4, "vec4 rows");
        if !guards.at_least(&len, 4096, "a workgroup tree") {
            guards.at_most(&len, 65_535, "the loop budget");
        }
        guards
    };
    let (small, other_small, large) = (lowered(2048), lowered(1000), lowered(5000));
    assert!(first_crossed(small.list(), other_small.list()).is_none());
    let crossed = first_crossed(small.list(), large.list()).expect("a guard crossed");
    assert_eq!(crossed.was.condition(), "n7[1] < 4096");
    let name = |n: usize| (n == 7).then(|| "sum recorded at a.rs:3".to_string());
    assert_eq!(
        crossed.describe(&name),
        "guard `n7[1] < 4096` held at 2048, not at 5000 (a workgroup tree; n7 is sum recorded at a.rs:3)"
    );
    // A multiple of four crossed first where it did.
    let odd = lowered(2047);
    let crossed = first_crossed(small.list(), odd.list()).expect("a guard crossed");
    assert_eq!(crossed.was.condition(), "n7[1] % 4 == 0");
    assert_eq!(crossed.now, 2047);
    // A power of two above a length, tested against other bounds at
    // each size: the bound at the last sizes fails at the new ones.
    let padded = |len: usize| {
        let mut guards = Guards::default();
        guards.power_of_two_above(&Sz::dim(3, 0, len), "a sort's network");
        guards
    };
    let (p768, p396) = (padded(768), padded(396));
    let crossed = first_crossed(p768.list(), p396.list()).expect("crossed");
    assert_eq!(crossed.was.condition(), "n3[0] >= 513");
    assert!(first_crossed(padded(768).list(), padded(600).list()).is_none());
}
