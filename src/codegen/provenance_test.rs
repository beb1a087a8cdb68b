//! Literal provenance (`Expr::Sized`): a literal that is a size carries
//! how the graph's numbers compute it, so that another size's value can
//! be evaluated rather than found by lowering again and comparing. Over
//! the programs of `guards_test` lowered at many sizes, wherever one
//! size's guards hold at another's numbers (so that the two kernels have
//! one structure), every literal with a provenance evaluates, at the
//! other's numbers, to the other kernel's literal; and the literals that
//! change between the two without one are counted, per program.
//!
//! What the runtime does with it is held to the same pairs: both kernels
//! made generic over the numbers that differ between the two graphs
//! (`kernel::generic::symbolize`, then simplified as the runtime does)
//! are one kernel, so the second size binds the first's pipeline; the
//! first's grid, evaluated from its generic entry at the second's numbers
//! (`kernel::generic::groups_at`), is the second's, so a size that binds
//! a kernel without lowering it can launch it; and a kernel generic over
//! every number of its graph prints WGSL that naga validates.

use std::fmt;

use super::guards_test::{
    Lowered, Program, Steps, guarded_pairs, lowered_over, number_of, ops_over_rows, strided_views,
};
use super::{kernel_wgsl, validate_wgsl};
use crate::graph::GraphKey;
use crate::kernel::changing::{Before, ChangingSizes};
use crate::kernel::generic::{
    DynamicSizes, first_difference, groups_at, literal_provenance, structural_difference, symbolize,
};
use crate::kernel::ir::Expr;
use crate::kernel::sizes::Leaf;
use crate::kernel::{Binding, Declared, Kernel, MatmulKernel, Target, simplify_indices};

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
    /// Pairs whose kernels, made generic over what changes between the
    /// two, are two kernels: the second size would compile.
    not_one_kernel: Vec<String>,
    /// Kernels generic over every number whose WGSL naga rejects.
    invalid: Vec<String>,
    /// Pairs whose structure differs although the first's guards hold at
    /// the second's numbers: a choice made on a size without its guard.
    unguarded: Vec<String>,
    /// Kernels whose launch at the other size's numbers, evaluated from
    /// their expressions as a size bound without lowering launches it
    /// (grid, the values of its sizes, a packing kernel's texture), is
    /// not the other kernel's.
    wrong_grid: Vec<String>,
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

/// `kernel` made generic over the numbers `changing` holds, as the
/// runtime lowers a site's later sizes: its sizes read from their
/// binding, its index arithmetic simplified with the rest.
fn generic(kernel: &Kernel, changing: &ChangingSizes) -> (Kernel, DynamicSizes) {
    let mut k = kernel.clone();
    let sizes = symbolize(&mut k.body, &mut k.entry, &|leaf| changing.contains(leaf));
    k.body = simplify_indices(std::mem::take(&mut k.body), &k.entry);
    if !sizes.is_empty() {
        k.bindings.push(Declared {
            binding: Binding::Sizes {
                vec4s: sizes.values.len().div_ceil(4),
            },
            name: "dyn_sizes".to_string(),
            element: None,
        });
    }
    (k, sizes)
}

/// The numbers that differ between two graphs of one structure.
fn differing(ka: &GraphKey, kb: &GraphKey) -> ChangingSizes {
    let identity: Vec<usize> = (0..kb.nodes.len()).collect();
    let none = ChangingSizes::none();
    let before = Before {
        traced: ka,
        lowered: ka,
        origin: &identity,
        changing: &none,
    };
    ChangingSizes::at((kb, kb, &identity), Some(before), &[])
}

/// Compares the literals of every pair of `lowered` graphs whose kernels
/// keep their structure (the first's guards holding at the second's
/// numbers), and the two kernels made generic over what differs.
fn compare(lowered: &[Lowered], count: &mut Count) {
    guarded_pairs(lowered, &mut |x, y, (ka, kb)| {
        if let Some(why) = structural_difference(&x.kernel, &y.kernel) {
            if count.unguarded.len() < 4 {
                (count.unguarded).push(format!("{:?}: {why}", x.strategy));
            }
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
        let changing = differing(ka, kb);
        let ((gx, sx), (gy, sy)) = (generic(&x.kernel, &changing), generic(&y.kernel, &changing));
        let groups = groups_at(&gx.entry, &sx, &at);
        if groups != Some(y.groups) && count.wrong_grid.len() < 4 {
            (count.wrong_grid).push(format!("{:?}: {groups:?} for {}", x.strategy, y.groups));
        }
        let values = sx.values_at(&at);
        if values.as_ref() != Some(&sy.values) && count.wrong_grid.len() < 4 {
            let want = &sy.values;
            (count.wrong_grid).push(format!("{:?}: sizes {values:?} for {want:?}", x.strategy));
        }
        let texture = |p: &super::lane_packs::Packing| {
            let sizes = [
                &p.batch,
                &p.rows,
                &p.cols,
                &p.width,
                &p.height,
                &p.row_blocks,
            ];
            (sizes.map(|s| s.literal()), p.col_blocks.literal())
        };
        let (px, py) = (x.packed.as_ref(), y.packed.as_ref());
        let packed_at = px.map(|p| texture(&p.at(&at)));
        if packed_at != py.map(texture) && count.wrong_grid.len() < 4 {
            (count.wrong_grid).push(format!("packing: {packed_at:?} for {:?}", py.map(texture)));
        }
        if gx != gy && count.not_one_kernel.len() < 4 {
            let why = first_difference(&gx, &gy).unwrap_or_default();
            (count.not_one_kernel).push(format!("{:?}: {why}", x.strategy));
        }
    });
    // Each kernel generic over every number of its graph.
    for (key, sources) in lowered {
        let all = ChangingSizes::all(key);
        for source in sources {
            let text = kernel_wgsl(&generic(&source.kernel, &all).0, None);
            if let Err(e) = validate_wgsl(&text) {
                let line = e.lines().next().unwrap_or_default().to_string();
                count.invalid.push(format!("{:?}: {line}", source.strategy));
            }
        }
    }
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
/// its layer norm, a CNN) on lavapipe and with a GPU's choices (the tiled
/// and the blocked matmul). Made generic over what changes, the two
/// kernels of every such pair are one, and the first's grid evaluated at
/// the second's numbers is the second's; generic over everything, every
/// kernel is valid WGSL.
#[test]
fn literals_that_are_sizes_evaluate_to_another_sizes_literals() {
    let mut all = Vec::new();
    strided_views(&mut |programs, lengths| all.extend(counts_of(programs, lengths)));
    ops_over_rows(&mut |programs, lengths| all.extend(counts_of(programs, lengths)));
    let steps = Steps::new();
    let sizes = [64usize, 50, 33, 17, 9, 2];
    // Lavapipe's lane matmul, and a GPU's reductions with the tiled and
    // the blocked matmul.
    let gpu = |matmul| Target {
        matmul,
        ..Target::lavapipe().with_gpu_choices()
    };
    let targets = [
        ("", Target::lavapipe()),
        (" (tiled)", gpu(MatmulKernel::Tiled)),
        (" (blocked)", gpu(MatmulKernel::Blocked)),
    ];
    for (on, target) in &targets {
        let training: [(&str, &dyn Fn(usize) -> Lowered); 3] = [
            ("mlp", &|b| steps.mlp(b, target)),
            ("block", &|b| steps.block(b, target)),
            ("cnn", &|b| steps.cnn(b, target)),
        ];
        for (name, program) in training {
            let mut count = Count::default();
            let lowered: Vec<Lowered> = sizes.iter().map(|&b| program(b)).collect();
            compare(&lowered, &mut count);
            all.push((format!("{name}{on}"), count));
        }
    }
    for (name, count) in &all {
        eprintln!("{name}: {count}; {:?}", count.first_unexplained);
        assert!(count.wrong.is_empty(), "{name}: {:#?}", count.wrong);
        assert!(count.invalid.is_empty(), "{name}: {:#?}", count.invalid);
        assert!(count.unguarded.is_empty(), "{name}: {:#?}", count.unguarded);
        assert!(
            count.wrong_grid.is_empty(),
            "{name}: {:#?}",
            count.wrong_grid
        );
        assert!(
            count.not_one_kernel.is_empty(),
            "{name}: {:#?}",
            count.not_one_kernel
        );
        assert_eq!(
            count.unexplained, 0,
            "{name}: {:?}",
            count.first_unexplained
        );
        assert!(count.explained > 0, "{name}: nothing compared");
    }
}
