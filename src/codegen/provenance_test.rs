//! Literal provenance (`Expr::Sized`): a literal that is a size carries
//! how the graph's numbers compute it, so that another size's value can
//! be evaluated rather than found by lowering again and comparing. Over
//! the programs of `guards_test` lowered at many sizes, wherever one
//! size's guards hold at another's numbers (so that the two kernels have
//! one structure), every literal with a provenance evaluates, at the
//! other's numbers, to the other kernel's literal; and the literals that
//! change between the two without one are counted, per program.

use std::fmt;

use super::guards_test::{
    Lowered, Program, Steps, guarded_pairs, lowered_over, number_of, ops_over_rows, strided_views,
};
use crate::kernel::Target;
use crate::kernel::generic::{literal_provenance, structural_difference};
use crate::kernel::ir::Expr;
use crate::kernel::sizes::Leaf;

/// What comparing literals over pairs of sizes found.
#[derive(Default)]
struct Count {
    /// Literals that differ between the two sizes and whose provenance
    /// gives the other size's value.
    explained: usize,
    /// Literals that differ between the two sizes, without provenance:
    /// each the first met, by kernel strategy.
    unexplained: usize,
    first_unexplained: Vec<String>,
    /// Provenances that give another value than the other size's: each
    /// a wrong value a generic kernel would compute with.
    wrong: Vec<String>,
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} literals that change explained, {} not",
            self.explained, self.unexplained
        )
    }
}

/// A literal's value as a number (`None`: not a `u32` or `i32`).
fn value(lit: &Expr) -> Option<i64> {
    match *lit {
        Expr::U32(v) => Some(v as i64),
        Expr::I32(v) => Some(v),
        _ => None,
    }
}

/// Compares the literals of every pair of `lowered` graphs whose kernels
/// keep their structure (the first's guards holding at the second's
/// numbers).
fn compare(lowered: &[Lowered], count: &mut Count) {
    guarded_pairs(lowered, &mut |x, y, kb| {
        if structural_difference(&x.kernel, &y.kernel).is_some() {
            return;
        }
        let at = |leaf: Leaf| number_of(kb, leaf);
        let (lx, ly) = (literal_provenance(&x.kernel), literal_provenance(&y.kernel));
        for ((a, size), (b, _)) in lx.iter().zip(&ly) {
            match size {
                Some(size) => {
                    let evaluated = size.eval(&at) as i64;
                    if Some(evaluated) == value(b) {
                        count.explained += usize::from(a != b);
                    } else {
                        count.wrong.push(format!(
                            "{:?}: `{size}` gives {evaluated}, the kernel has {b:?}",
                            x.strategy
                        ));
                    }
                }
                None if a != b => {
                    count.unexplained += 1;
                    let kind = format!("{:?}", x.strategy);
                    if !count.first_unexplained.iter().any(|k| k.starts_with(&kind)) {
                        count
                            .first_unexplained
                            .push(format!("{kind}: {a:?} -> {b:?}"));
                    }
                }
                None => {}
            }
        }
    });
}

/// The counts of each of `programs` over `lengths`.
fn counts_of(programs: &[(&str, Program<'_>)], lengths: &[usize]) -> Vec<(String, Count)> {
    (programs.iter())
        .map(|(name, program)| {
            let mut count = Count::default();
            compare(&lowered_over(*program, lengths), &mut count);
            (name.to_string(), count)
        })
        .collect()
}

/// Every provenance evaluates to the other size's literal, and no
/// program has a literal that changes without one: views, padding,
/// flips, gathers, scatter-adds and concatenation computed elementwise,
/// reductions, softmax, scans, sorts (networks, merges, radix passes),
/// top-k, matmuls (lane tiles, their packed textures, operands read in
/// place), and the three training steps (an MLP, an attention block with
/// its layer norm, a CNN).
#[test]
fn literals_that_are_sizes_evaluate_to_another_sizes_literals() {
    let mut all = Vec::new();
    strided_views(&mut |programs, lengths| all.extend(counts_of(programs, lengths)));
    ops_over_rows(&mut |programs, lengths| all.extend(counts_of(programs, lengths)));
    let steps = Steps::new();
    let sizes = [64usize, 50, 33, 17, 9, 2];
    let target = Target::lavapipe();
    let training: [(&str, &dyn Fn(usize) -> Lowered); 3] = [
        ("mlp", &|b| steps.mlp(b, &target)),
        ("block", &|b| steps.block(b, &target)),
        ("cnn", &|b| steps.cnn(b, &target)),
    ];
    for (name, program) in training {
        let mut count = Count::default();
        let lowered: Vec<Lowered> = sizes.iter().map(|&b| program(b)).collect();
        compare(&lowered, &mut count);
        all.push((name.to_string(), count));
    }
    for (name, count) in &all {
        eprintln!("{name}: {count}; {:?}", count.first_unexplained);
        assert!(count.wrong.is_empty(), "{name}: {:#?}", count.wrong);
        assert_eq!(
            count.unexplained, 0,
            "{name}: {:?}",
            count.first_unexplained
        );
        assert!(count.explained > 0, "{name}: nothing compared");
    }
}
