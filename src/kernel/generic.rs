//! Kernels generic over the sizes that change at their trace site.
//!
//! A kernel is lowered with provenance: each literal that is a size
//! carries the expression that computes it from the graph's numbers
//! (`Expr::Sized`). `symbolize` turns the literals whose expression reads
//! a changing number (`kernel::changing`) into reads of the kernel's
//! dynamic sizes (`Expr::Size`, bound last as `Binding::Sizes`), one slot
//! per distinct expression, and the rest into plain literals. The kernel
//! then no longer depends on the changing numbers' values: each size of
//! the site that lowers to it binds its pipeline with its own values
//! (the literals it would have had inline), and compiles nothing. With
//! nothing changing (a site's first sizes) it is the plain kernel, whose
//! index arithmetic is simplified by its values.
//!
//! Correctness does not rest on provenance: a size binds a generic kernel
//! only where its own lowering, symbolized, is that kernel, and gives it
//! the values of its own literals. A literal whose provenance is missing
//! stays a literal; where it changes, the kernel is another one, and
//! compiles (its structure is what `structural_difference` names).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::ir::{Expr, Inst};
use super::program::{Declared, Entry, Kernel};
use super::sizes::{Leaf, SizeExpr};
use crate::dtype::DType;

/// What a generic kernel reads from its sizes binding: per slot, the
/// expression of the graph's numbers it stands for and its value (the
/// 32-bit word the kernel reads) at the graph lowered.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DynamicSizes {
    /// Per slot, how the graph's numbers give it.
    pub exprs: Vec<Arc<SizeExpr>>,
    /// Per slot, its value here.
    pub values: Vec<u32>,
    /// Whether a literal that reads a changing number stayed inline (its
    /// value past 32 bits): the kernel is then right at this graph's
    /// value of it only, and no other size may bind it unlowered.
    pub pinned: bool,
}

impl DynamicSizes {
    /// Whether the kernel reads no dynamic size.
    pub fn is_empty(&self) -> bool {
        self.exprs.is_empty()
    }

    /// Its slots' values at a graph whose numbers are `at`, or `None`
    /// where one would not be the kernel's literal there: past `i32`'s
    /// range (a slot may be read as an `i32`), or a literal that reads
    /// a changing number is inline (`pinned`).
    pub fn values_at(&self, at: &dyn Fn(Leaf) -> usize) -> Option<Vec<u32>> {
        if self.pinned {
            return None;
        }
        (self.exprs.iter())
            .map(|e| i32::try_from(e.eval(at)).ok().map(|v| v as u32))
            .collect()
    }
}

/// The workgroups `entry` launches at a graph whose numbers are `at`:
/// its count (a literal, or a size read from slot `s` of `dynamic`,
/// evaluated there), a workgroup's worth of invocations each where it
/// counts invocations. `None` where the count is neither. What a new size
/// that binds a site's kernel without lowering it launches.
pub(crate) fn groups_at(
    entry: &Entry,
    dynamic: &DynamicSizes,
    at: &dyn Fn(Leaf) -> usize,
) -> Option<usize> {
    let count = match &entry.count {
        Expr::U32(n) => usize::try_from(*n).ok()?,
        Expr::Size { slot, .. } => dynamic.exprs.get(*slot)?.eval(at),
        _ => return None,
    };
    Some(match entry.per_invocation {
        true => count.div_ceil(entry.workgroup_size),
        false => count,
    })
}

/// Makes a kernel's body and entry generic over the numbers `changing`
/// holds: each literal whose provenance reads one becomes a read of the
/// sizes binding (one slot per distinct expression, in order of first
/// appearance), every other literal loses its provenance. Returns the
/// slots. A size past 32 bits stays a literal.
pub(crate) fn symbolize(
    body: &mut [Inst],
    entry: &mut Entry,
    changing: &dyn Fn(Leaf) -> bool,
) -> DynamicSizes {
    let mut slots: FxHashMap<Arc<SizeExpr>, usize> = FxHashMap::default();
    let mut sizes = DynamicSizes::default();
    let mut replace = |e: &mut Expr| {
        let Expr::Sized { lit, size } = e else {
            return;
        };
        let reads_changing = size.reads_any(changing);
        let Some(word) = word(lit).filter(|_| reads_changing) else {
            sizes.pinned |= reads_changing;
            *e = std::mem::replace(&mut **lit, Expr::U32(0));
            return;
        };
        let dtype = literal_dtype(lit);
        let slot = *slots.entry(size.clone()).or_insert_with(|| {
            sizes.exprs.push(size.clone());
            sizes.values.push(word);
            sizes.exprs.len() - 1
        });
        // One expression, one value: every sized literal is its size's
        // value, as a `u32` or an `i32` of the same word.
        debug_assert_eq!(sizes.values[slot], word, "slot {slot}: `{size}`");
        *e = Expr::Size { slot, dtype };
    };
    let sized = |e: &Expr| matches!(e, Expr::Sized { .. });
    visit_expr(&mut entry.count, sized, &mut replace);
    visit_body(body, sized, &mut replace);
    sizes
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

/// The first line in which the IR listings of two kernels differ, as
/// `` `a` -> `b` ``: where they differ in literals only, which.
pub(crate) fn first_difference(a: &Kernel, b: &Kernel) -> Option<String> {
    let (la, lb) = (a.to_string(), b.to_string());
    let (x, y) = la.lines().zip(lb.lines()).find(|(x, y)| x != y)?;
    Some(format!("`{}` -> `{}`", x.trim(), y.trim()))
}

/// Each numeric literal of `kernel`, in `visit_kernel`'s order, with
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

/// The kernel with every literal's value erased, and every dynamic
/// size's slot (their types kept): what two kernels share where they
/// differ in sizes alone, inline or read.
fn skeleton(kernel: &Kernel) -> Kernel {
    let mut copy = kernel.clone();
    let erased = |e: &Expr| is_literal(e) || is_size(e);
    visit_kernel(&mut copy, erased, &mut |e| {
        *e = Expr::Size {
            slot: 0,
            dtype: literal_dtype(e),
        }
    });
    copy
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
/// children not visited), the entry's count, then the body's expressions, outer before
/// inner, in order.
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

/// The dtype of a literal or a dynamic size.
fn literal_dtype(e: &Expr) -> DType {
    match e {
        Expr::Size { dtype, .. } => *dtype,
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
    use crate::kernel::program::Helpers;
    use crate::kernel::sizes::Sz;

    /// An elementwise kernel over a `[rows, 784]` input (node 0): its
    /// invocation count `rows * 784` and the row's length as sizes, an
    /// `f32` scale and an `i32` that are no sizes, and the count again.
    fn kernel(rows: usize) -> Kernel {
        let (r, cols) = (Sz::dim(0, 0, rows), Sz::dim(0, 1, 784));
        let count = r.mul(&cols);
        let v = Var { prefix: "v", id: 1 };
        let row = Expr::arith(Arith::Div, Expr::Invocation, Expr::size_u32(&cols));
        let load = Expr::Load {
            buffer: Buffer {
                output: false,
                k: 0,
                part: None,
                half: None,
            },
            index: Box::new(row),
        };
        let scaled = Expr::arith(Arith::Mul, load, Expr::F32(0.5f32.to_bits()));
        let last = Expr::arith(Arith::Sub, Expr::size_u32(&count), Expr::U32(1));
        Kernel {
            bindings: Vec::new(),
            helpers: Helpers::default(),
            entry: Entry::per_invocation_of(&count),
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
                Inst::Let {
                    var: v,
                    ty: Ty::U32,
                    value: last,
                    node: None,
                },
            ],
        }
    }

    fn symbolized(rows: usize, changing: &dyn Fn(Leaf) -> bool) -> (Kernel, DynamicSizes) {
        let mut k = kernel(rows);
        let sizes = symbolize(&mut k.body, &mut k.entry, changing);
        (k, sizes)
    }

    const ROWS: Leaf = Leaf::Dim { node: 0, dim: 0 };

    #[test]
    fn sizes_that_read_a_changing_number_become_one_read_each() {
        let (k, sizes) = symbolized(64, &|l| l == ROWS);
        // The count twice, one slot; the row's length stays a literal.
        assert_eq!(sizes.values, vec![64 * 784]);
        assert_eq!(sizes.exprs[0].to_string(), "n0[0] * n0[1]");
        let read = Expr::Size {
            slot: 0,
            dtype: DType::U32,
        };
        assert_eq!(k.entry.count, read);
        let listing = k.to_string();
        assert!(listing.contains("(gi / 784u)"), "{listing}");
        assert!(listing.contains("size[0] as u32 - 1u"), "{listing}");
        // Every size of the site lowers to the same kernel, its values
        // its own literals.
        for rows in [1, 50, 33, 70_000] {
            let (other, at) = symbolized(rows, &|l| l == ROWS);
            assert_eq!(other, k, "{rows} rows");
            assert_eq!(at.values, vec![(rows * 784) as u32]);
        }
        // The columns change too: a second slot, in order of appearance.
        let (both, sizes) = symbolized(64, &|_| true);
        assert_eq!(sizes.values, vec![64 * 784, 784]);
        assert!(both.to_string().contains("gi / size[1] as u32"), "{both}");
    }

    #[test]
    fn a_size_read_as_u32_and_as_i32_shares_its_slot_and_slots_pass_four() {
        let rows = Sz::dim(0, 0, 70);
        let sizes: Vec<Sz> = (1..=5).map(|k| rows.times(k)).collect();
        let mut body: Vec<Inst> = sizes
            .iter()
            .map(|s| Inst::Let {
                var: Var { prefix: "v", id: 1 },
                ty: Ty::U32,
                value: Expr::size_u32(s),
                node: None,
            })
            .collect();
        body.push(Inst::Let {
            var: Var { prefix: "v", id: 2 },
            ty: Ty::scalar(DType::I32),
            value: Expr::size_i32(&rows),
            node: None,
        });
        let mut entry = Entry::per_invocation_of(&rows);
        let found = symbolize(&mut body, &mut entry, &|l| l == ROWS);
        // The count and the i32 read share `rows`'s slot 0.
        assert_eq!(found.values, vec![70, 140, 210, 280, 350]);
        assert_eq!(
            entry.count,
            Expr::Size {
                slot: 0,
                dtype: DType::U32
            }
        );
        let Inst::Let { value, .. } = &body[5] else {
            panic!("a let")
        };
        assert_eq!(
            *value,
            Expr::Size {
                slot: 0,
                dtype: DType::I32
            }
        );
        let Inst::Let { value, .. } = &body[4] else {
            panic!("a let")
        };
        assert_eq!(
            *value,
            Expr::Size {
                slot: 4,
                dtype: DType::U32
            }
        );
        // A size past 32 bits stays its literal.
        let huge = Sz::dim(0, 0, 1 << 33);
        let mut body = vec![Inst::Let {
            var: Var { prefix: "v", id: 1 },
            ty: Ty::U32,
            value: Expr::size_u32(&huge),
            node: None,
        }];
        let mut entry = Entry::per_invocation_of(&rows);
        let found = symbolize(&mut body, &mut entry, &|l| l == ROWS);
        assert_eq!(found.values, vec![70], "only the count");
        let Inst::Let { value, .. } = &body[0] else {
            panic!("a let")
        };
        assert_eq!(*value, Expr::U32(1 << 33));
    }

    #[test]
    fn with_nothing_changing_every_size_is_its_literal() {
        let (k, sizes) = symbolized(64, &|_| false);
        assert!(sizes.is_empty());
        assert_eq!(k.entry.count, Expr::U32(64 * 784));
        assert!(literal_provenance(&k).iter().all(|(_, p)| p.is_none()));
        // Another number of rows is another kernel, whose difference is
        // in literals only.
        let (other, _) = symbolized(50, &|_| false);
        assert_ne!(other, k);
        assert_eq!(structural_difference(&k, &other), None);
        let first = first_difference(&k, &other).expect("a literal differs");
        assert!(
            first.contains("50176") && first.contains("39200"),
            "{first}"
        );
        // A generic kernel and a plain one differ only in sizes too.
        let (generic, _) = symbolized(50, &|l| l == ROWS);
        assert_eq!(structural_difference(&k, &generic), None);
    }

    #[test]
    fn a_structural_difference_names_the_first_line_that_differs() {
        let (b64, _) = symbolized(64, &|_| false);
        let mut wider = b64.clone();
        wider.entry.workgroup_size = 64;
        let why = structural_difference(&b64, &wider).expect("differs");
        assert_eq!(
            why,
            "workgroups of 256 indexing invocations -> of 64 indexing invocations"
        );
        let mut bound = b64.clone();
        bound.bindings.push(crate::kernel::Declared {
            binding: crate::kernel::Binding::Read { node: 3, part: 1 },
            name: "in0_p1".to_string(),
            element: Some(Ty::F32),
        });
        let why = structural_difference(&b64, &bound).expect("differs");
        assert_eq!(why, "binding 0: `none` -> `in0_p1: f32 = read n3 part 1`");
        let mut longer = b64.clone();
        longer.body.pop();
        let why = structural_difference(&b64, &longer).expect("differs");
        assert_eq!(why, "4 lines of IR -> 3", "{b64}");
    }
}
