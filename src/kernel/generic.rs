//! Dynamic sizes on kernel values: one pipeline for a kernel whose sizes
//! change between steps (a batch of 64, then 50, then 33). When a trace
//! site compiles again with the same structure and other sizes, each
//! kernel is lowered for the new sizes as usual and compared, as IR, with
//! the site's last one: where the two differ only in literals (`u32`,
//! `i32` and `f32` values: element counts, strides, loop counts, a mean's
//! scale), those literals become reads of the kernel's dynamic sizes
//! (`Expr::Size`, bound last as `Binding::Sizes`), which each executable
//! fills with its own values, and the generic kernel is compiled once.
//! Later sizes lower to the same generic kernel, so they find its
//! pipeline and compile nothing. The first sizes of a site keep literal
//! kernels (the static fast path: divisions by constants stay
//! multiplications).
//!
//! Correctness does not rest on guessing which literals depend on a size:
//! a generic kernel is used for new sizes only when their own kernel is
//! the same value but for the generic's dynamic literals, and it is given
//! exactly the values that kernel would have had inline. What is not an
//! `Expr` literal (workgroup size, array lengths, binding parts, unrolls)
//! is structure: where it differs, the kernel is not generic.

#[cfg(test)]
use std::sync::Arc;

use super::binding::Binding;
use super::ir::{Expr, Inst};
use super::program::{Declared, Entry, Kernel};
#[cfg(test)]
use super::sizes::SizeExpr;
use crate::dtype::DType;

/// A kernel made generic over some of its literals.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Generic {
    /// The kernel, reading its dynamic literals from its sizes binding.
    pub kernel: Kernel,
    /// Which literals (by their order in the kernel, see `literals`) are
    /// dynamic.
    pub dynamic: Vec<usize>,
    /// The values the concrete kernel gives them, in `dynamic`'s order,
    /// as the 32-bit words the kernel reads.
    pub values: Vec<u32>,
}

/// Makes `new` (a kernel lowered for the new sizes) generic against
/// `before` (the same kernel lowered for the site's last sizes) and the
/// literals already dynamic there (`known`): the literals that differ join
/// them. `None` when the two differ in anything but literals, or nothing
/// differs.
pub(crate) fn generalize(before: &Kernel, new: &Kernel, known: &[usize]) -> Option<Generic> {
    let (differing, ln) = compare(before, new)?;
    let mut dynamic: Vec<usize> = known.iter().copied().filter(|&i| i < ln.len()).collect();
    dynamic.extend(differing);
    dynamic.sort_unstable();
    dynamic.dedup();
    if dynamic.is_empty() {
        return None;
    }
    let values = dynamic
        .iter()
        .map(|&i| word(&ln[i]))
        .collect::<Option<_>>()?;
    let mut kernel = new.clone();
    read_sizes_at(&mut kernel, &dynamic);
    kernel.bindings.push(Declared {
        binding: Binding::Sizes {
            vec4s: dynamic.len().div_ceil(4),
        },
        name: "dyn_sizes".to_string(),
        element: None,
    });
    Some(Generic {
        kernel,
        dynamic,
        values,
    })
}

/// The values that `concrete` (a kernel lowered for new sizes) gives the
/// dynamic literals of `generic` (made generic over the literals at
/// `dynamic` by `generalize`), where `concrete` is that kernel but for
/// them; `None` where it differs in anything else (its structure, or a
/// literal that was the same at earlier sizes). The same test as
/// `generalize` against the kernel it was made from, with no literal
/// newly dynamic, without copying or printing either kernel: a new size
/// binds the generic kernel after one walk (its literals swapped for
/// reads) and one comparison. Where it matches, `concrete` is left equal
/// to `generic` (the caller binds `generic` in its place); elsewhere it is
/// left as it was (a second walk swaps the literals back).
pub(crate) fn values_for(
    generic: &Kernel,
    dynamic: &[usize],
    concrete: &mut Kernel,
) -> Option<Vec<u32>> {
    let (sizes, bindings) = generic.bindings.split_last()?;
    if !matches!(sizes.binding, Binding::Sizes { .. }) || *bindings != concrete.bindings[..] {
        return None;
    }
    // Each dynamic literal swapped for its read, as `generalize` makes
    // it, then swapped back: the kernel compared in place.
    let replaced = read_sizes_at(concrete, dynamic);
    let same = replaced.len() == dynamic.len()
        && concrete.entry == generic.entry
        && concrete.helpers == generic.helpers
        && concrete.body == generic.body;
    if same {
        // `concrete` now equals the generic kernel the caller binds in
        // its place: nothing to restore.
        return replaced.iter().map(word).collect();
    }
    // The concrete kernel reads no sizes: each read is one placed above.
    let mut seen = 0;
    let placed = replaced.len();
    let mut literals = replaced.into_iter();
    visit_kernel(concrete, is_size, &mut |e| {
        if let Some(literal) = literals.next() {
            *e = literal;
        }
        seen += 1;
    });
    debug_assert_eq!(seen, placed, "a size read in a concrete kernel");
    None
}

/// Replaces the literals at `dynamic` (positions in `for_each_literal`'s
/// order, sorted) by reads of the sizes binding, slot by slot, and
/// returns the literals replaced, in order.
fn read_sizes_at(kernel: &mut Kernel, dynamic: &[usize]) -> Vec<Expr> {
    let mut replaced = Vec::with_capacity(dynamic.len());
    let mut at = 0;
    // `dynamic` is sorted: the next position to replace is the only one
    // to compare with.
    let mut next = dynamic.iter().copied().peekable();
    for_each_literal(kernel, &mut |e| {
        if next.next_if_eq(&at).is_some() {
            let read = Expr::Size {
                slot: replaced.len(),
                dtype: literal_dtype(e),
            };
            replaced.push(std::mem::replace(e, read));
        }
        at += 1;
    });
    replaced
}

/// Why `new` cannot be made generic against `before` (the same dispatch
/// lowered at earlier sizes), the guard a size crossed, once every
/// literal is erased: another workgroup size, the first binding that
/// differs (a buffer bound in more parts), other workgroup arrays or
/// helpers, else the first line in which their IR listings differ (a
/// loop tail at one size only, another strategy's body). `None` where
/// they differ in literals alone.
pub(crate) fn structural_difference(before: &Kernel, new: &Kernel) -> Option<String> {
    let (a, b) = (skeleton(before), skeleton(new));
    if a == b {
        return None;
    }
    // What a launch fixes first, named as such; then the listing.
    let (ea, eb) = (&a.entry, &b.entry);
    if (ea.workgroup_size, ea.per_invocation) != (eb.workgroup_size, eb.per_invocation) {
        let unit = |per: bool| if per { "invocations" } else { "workgroups" };
        return Some(format!(
            "workgroups of {} indexing {} -> of {} indexing {}",
            ea.workgroup_size,
            unit(ea.per_invocation),
            eb.workgroup_size,
            unit(eb.per_invocation)
        ));
    }
    if a.bindings != b.bindings {
        // The first binding that differs, as the listing spells it.
        let spelled = |d: Option<&Declared>| d.map_or("none".to_string(), Declared::to_string);
        let at = (0..a.bindings.len().max(b.bindings.len()))
            .find(|&i| a.bindings.get(i) != b.bindings.get(i))
            .unwrap_or(0);
        return Some(format!(
            "binding {at}: `{}` -> `{}`",
            spelled(a.bindings.get(at)),
            spelled(b.bindings.get(at))
        ));
    }
    let arrays = |k: &Kernel| -> String {
        let each: Vec<String> = (k.entry.arrays.iter())
            .map(|w| format!("[{}; {}]", w.element, w.len))
            .collect();
        each.join(", ")
    };
    if arrays(&a) != arrays(&b) {
        return Some(format!("workgroup arrays {} -> {}", arrays(&a), arrays(&b)));
    }
    if a.helpers != b.helpers {
        return Some(format!(
            "helper functions {:?} -> {:?}",
            a.helpers, b.helpers
        ));
    }
    // Lines compared without digits first: a variable's number shifts
    // after an instruction more or less (literals are erased already).
    let shape = |line: &str| -> String { line.chars().filter(|c| !c.is_ascii_digit()).collect() };
    let (la, lb) = (a.to_string(), b.to_string());
    let mut pairs = la.lines().zip(lb.lines());
    let differing =
        (pairs.clone().find(|(x, y)| shape(x) != shape(y))).or_else(|| pairs.find(|(x, y)| x != y));
    Some(match differing {
        Some((x, y)) => format!("`{}` -> `{}`", x.trim(), y.trim()),
        None => format!(
            "{} lines of IR -> {}",
            la.lines().count(),
            lb.lines().count()
        ),
    })
}

/// The literals (by their order in the kernel) in which two kernels of the
/// same structure differ; `None` where their structure differs.
pub(crate) fn differing_literals(a: &Kernel, b: &Kernel) -> Option<Vec<usize>> {
    compare(a, b).map(|(differing, _)| differing)
}

/// Where `a` and `b` differ, if only in literals: the literals that differ
/// (by their order in the kernel), and `b`'s literals.
fn compare(a: &Kernel, b: &Kernel) -> Option<(Vec<usize>, Vec<Expr>)> {
    if skeleton(a) != skeleton(b) {
        return None;
    }
    let (la, lb) = (literals(a), literals(b));
    let differing = la
        .iter()
        .zip(&lb)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, _)| i)
        .collect();
    Some((differing, lb))
}

/// The kernel's literals, in the fixed order `for_each_literal` visits
/// them.
fn literals(kernel: &Kernel) -> Vec<Expr> {
    let mut out = Vec::new();
    let mut copy = kernel.clone();
    for_each_literal(&mut copy, &mut |e| out.push(e.clone()));
    out
}

/// Each numeric literal of `kernel`, in `for_each_literal`'s order, with
/// its provenance where it is a size (`Expr::Sized`): how another graph's
/// numbers give its value there.
#[cfg(test)]
pub(crate) fn literal_provenance(kernel: &Kernel) -> Vec<(Expr, Option<Arc<SizeExpr>>)> {
    let mut out = Vec::new();
    let mut copy = kernel.clone();
    let leaf = |e: &Expr| is_literal(e) || matches!(e, Expr::Sized { .. });
    visit_kernel(&mut copy, leaf, &mut |e| match e {
        Expr::Sized { lit, size } => out.push(((**lit).clone(), Some(size.clone()))),
        other => out.push((other.clone(), None)),
    });
    out
}

/// Drops every literal's provenance (`Expr::Sized` becomes its literal):
/// a kernel lowered for fixed sizes, whose index arithmetic is then
/// simplified by the literals' values.
pub(crate) fn forget_provenance(body: &mut [Inst], entry: &mut Entry) {
    let mut plain = |e: &mut Expr| {
        if let Expr::Sized { lit, .. } = e {
            *e = std::mem::replace(&mut **lit, Expr::U32(0));
        }
    };
    let sized = |e: &Expr| matches!(e, Expr::Sized { .. });
    visit_expr(&mut entry.count, sized, &mut plain);
    visit_body(body, sized, &mut plain);
}

/// The kernel with every literal's value erased (its type kept): what two
/// kernels must share to be one generic kernel.
fn skeleton(kernel: &Kernel) -> Kernel {
    let mut copy = kernel.clone();
    for_each_literal(&mut copy, &mut |e| {
        *e = Expr::Size {
            slot: 0,
            dtype: literal_dtype(e),
        }
    });
    copy
}

/// Calls `f` on each numeric literal of the kernel (the entry's count,
/// then the body's expressions, outer before inner, in order).
fn for_each_literal<F: FnMut(&mut Expr)>(kernel: &mut Kernel, f: &mut F) {
    visit_kernel(kernel, is_literal, f);
}

/// Whether `e` is a numeric literal.
fn is_literal(e: &Expr) -> bool {
    matches!(e, Expr::U32(_) | Expr::I32(_) | Expr::F32(_))
}

/// Whether `e` reads a dynamic size.
fn is_size(e: &Expr) -> bool {
    matches!(e, Expr::Size { .. })
}

/// Calls `f` on each expression of the kernel that is a `leaf` (its
/// children not visited), in the order `for_each_literal` names.
/// Generic over `f` (inlined, not called through a pointer): a new size
/// walks every kernel of its graph with it.
fn visit_kernel<F: FnMut(&mut Expr)>(kernel: &mut Kernel, leaf: fn(&Expr) -> bool, f: &mut F) {
    visit_expr(&mut kernel.entry.count, leaf, f);
    visit_body(&mut kernel.body, leaf, f);
}

fn visit_body<F: FnMut(&mut Expr)>(body: &mut [Inst], leaf: fn(&Expr) -> bool, f: &mut F) {
    for inst in body {
        for e in inst.exprs_mut() {
            visit_expr(e, leaf, f);
        }
        if let Some(nested) = inst.nested_body_mut() {
            visit_body(nested, leaf, f);
        }
    }
}

fn visit_expr<F: FnMut(&mut Expr)>(e: &mut Expr, leaf: fn(&Expr) -> bool, f: &mut F) {
    if leaf(e) {
        f(e);
        return;
    }
    e.for_each_child_mut(|child| visit_expr(child, leaf, f));
}

/// The dtype of a literal.
fn literal_dtype(e: &Expr) -> DType {
    match e {
        Expr::I32(_) => DType::I32,
        Expr::F32(_) => DType::F32,
        _ => DType::U32,
    }
}

/// A literal as the 32-bit word the kernel reads (`None` for a `u32` or
/// `i32` value outside 32 bits).
fn word(e: &Expr) -> Option<u32> {
    match *e {
        Expr::U32(v) => u32::try_from(v).ok(),
        Expr::I32(v) => i32::try_from(v).ok().map(|v| v as u32),
        Expr::F32(bits) => Some(bits),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ir::{Arith, Buffer, Ty, Var};
    use crate::kernel::program::{Entry, Helpers};

    /// An elementwise kernel over `n` elements of rows of 784, scaled by
    /// `scale`, plus an i32 literal and a bit pattern that never changes.
    fn kernel(n: usize, scale: f32) -> Kernel {
        let v = Var { prefix: "v", id: 1 };
        let row = Expr::arith(Arith::Div, Expr::Invocation, Expr::U32(784));
        let load = Expr::Load {
            buffer: Buffer {
                output: false,
                k: 0,
                part: None,
                half: None,
            },
            index: Box::new(row),
        };
        let scaled = Expr::arith(Arith::Mul, load, Expr::F32(scale.to_bits()));
        Kernel {
            bindings: Vec::new(),
            helpers: Helpers::default(),
            entry: Entry {
                workgroup_size: 256,
                per_invocation: true,
                count: Expr::count(n),
                arrays: Vec::new(),
                subgroup_id: false,
            },
            body: vec![
                Inst::Let {
                    var: v,
                    ty: Ty::F32,
                    value: scaled,
                    node: None,
                },
                Inst::Let {
                    var: v,
                    ty: Ty::scalar(DType::I32),
                    value: Expr::arith(Arith::Add, Expr::I32(3), Expr::I32(-1)),
                    node: None,
                },
            ],
        }
    }

    #[test]
    fn literals_that_differ_become_reads_of_the_sizes_binding() {
        // Batch 64 -> 50: the element count and the 1/64 scale change.
        let (b64, b50) = (kernel(50_176, 1.0 / 64.0), kernel(39_200, 0.02));
        let g = generalize(&b64, &b50, &[]).expect("same structure");
        assert_eq!(g.dynamic, vec![0, 2]);
        assert_eq!(g.values, vec![39_200, 0.02f32.to_bits()]);
        assert_eq!(
            g.kernel.entry.count,
            Expr::Size {
                slot: 0,
                dtype: DType::U32
            }
        );
        let listing = g.kernel.to_string();
        assert!(
            listing.contains("(gi / 784u)"),
            "static sizes stay literals"
        );
        assert!(listing.contains("size[1] as f32"), "{listing}");
        assert_eq!(
            g.kernel.bindings.last().map(|d| d.binding),
            Some(Binding::Sizes { vec4s: 1 })
        );
        // Batch 33 against 50, with the same literals known dynamic: the
        // same generic kernel, other values.
        let b33 = kernel(25_872, 1.0 / 33.0);
        let g33 = generalize(&b50, &b33, &g.dynamic).expect("same structure");
        assert_eq!(g33.kernel, g.kernel);
        assert_eq!(g33.values[0], 25_872);
    }

    #[test]
    fn another_structure_or_nothing_that_differs_is_not_generic() {
        let b64 = kernel(50_176, 1.0 / 64.0);
        let mut other = b64.clone();
        other.entry.workgroup_size = 64;
        assert_eq!(generalize(&b64, &other, &[]), None, "workgroup size");
        let mut typed = b64.clone();
        typed.entry.count = Expr::I32(50_176);
        assert_eq!(generalize(&b64, &typed, &[]), None, "a literal's type");
        assert_eq!(generalize(&b64, &b64, &[]), None, "nothing differs");
        assert_eq!(differing_literals(&b64, &other), None);
        let b50 = kernel(39_200, 0.02);
        assert_eq!(differing_literals(&b64, &b50), Some(vec![0, 2]));
    }

    #[test]
    fn a_kernel_that_lowers_to_a_generic_one_gets_its_values_and_becomes_it() {
        let (b64, b50) = (kernel(50_176, 1.0 / 64.0), kernel(39_200, 0.02));
        let g = generalize(&b64, &b50, &[]).expect("same structure");
        // Random sizes: the walk agrees with `generalize` against the
        // kernel the generic one was made from; a kernel that matches is
        // left equal to the generic one, one that does not as it was.
        let mut seed = 0x9e37_79b9_u32;
        for _ in 0..64 {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let batch = 1 + (seed >> 8) as usize % 100_000;
            let mut new = kernel(batch * 784, 1.0 / batch as f32);
            let before = new.clone();
            let values = values_for(&g.kernel, &g.dynamic, &mut new);
            let want = generalize(&b50, &before, &g.dynamic).map(|w| w.values);
            assert_eq!(values, want, "batch {batch}");
            assert!(values.is_some(), "batch {batch}");
            // All but the sizes binding, which the concrete kernel lacks.
            assert_eq!(
                (&new.entry, &new.body),
                (&g.kernel.entry, &g.kernel.body),
                "a match becomes the generic kernel"
            );
        }
        // A literal that was the same at both sizes (the rows of 784)
        // changes: not this generic kernel; nor another structure.
        let mut wider = b50.clone();
        for_each_literal(&mut wider, &mut |e| {
            if *e == Expr::U32(784) {
                *e = Expr::U32(785);
            }
        });
        let mut read = wider.clone();
        assert_eq!(values_for(&g.kernel, &g.dynamic, &mut read), None);
        assert_eq!(read, wider, "a kernel that does not match is restored");
        assert!(generalize(&b50, &wider, &g.dynamic).is_some_and(|w| w.dynamic.len() > 2));
        let mut other = b50.clone();
        other.entry.workgroup_size = 64;
        assert_eq!(values_for(&g.kernel, &g.dynamic, &mut other), None);
        // A concrete kernel (no sizes binding) is never a generic one.
        assert_eq!(values_for(&b64, &[], &mut b64.clone()), None);
    }

    #[test]
    fn a_structural_difference_names_the_first_line_that_differs() {
        let (b64, b50) = (kernel(50_176, 1.0 / 64.0), kernel(39_200, 0.02));
        assert_eq!(structural_difference(&b64, &b50), None, "literals only");
        let mut wider = b50.clone();
        wider.entry.workgroup_size = 64;
        let why = structural_difference(&b64, &wider).expect("differs");
        assert_eq!(
            why,
            "workgroups of 256 indexing invocations -> of 64 indexing invocations"
        );
        let mut bound = b50.clone();
        bound.bindings.push(Declared {
            binding: Binding::Read { node: 3, part: 1 },
            name: "in0_p1".to_string(),
            element: Some(Ty::F32),
        });
        let why = structural_difference(&b64, &bound).expect("differs");
        assert_eq!(why, "binding 0: `none` -> `in0_p1: f32 = read n3 part 1`");
        let mut longer = b50.clone();
        longer.body.pop();
        let why = structural_difference(&b64, &longer).expect("differs");
        assert_eq!(why, "3 lines of IR -> 2", "{b64}");
    }
}
