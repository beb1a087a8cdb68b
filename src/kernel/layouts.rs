//! Layouts as sizes: the strides and offset a node carries as symbols
//! (`Leaf::Stride`, `Leaf::Offset`), and the decisions lowering takes on
//! a layout (row-major or not, read in aligned groups of four, a view of
//! a view folded into one layout) recorded as guards, as
//! `kernel::sizes` records those on dimensions. Each function answers as
//! its plain counterpart on `shape::Layout` does (a property test below
//! holds them to it), and records each test it made on the way, in the
//! order made: a test it did not reach is one the code does not depend
//! on.

use super::sizes::{Guards, Sz};
use crate::shape::Layout;

/// A layout whose strides and offset are sizes.
#[derive(Clone, Debug)]
pub(crate) struct SzLayout {
    pub strides: Vec<Sz>,
    pub offset: Sz,
}

/// How a view steps through a row-major shape it views without carries
/// (`SzLayout::steps_within`; `shape::DimSteps` in sizes): the
/// coordinates of its first element, and per dim of the view the inner
/// dim it steps along and by how much (`None`: it does not move).
#[derive(Clone, Debug)]
pub(crate) struct SzSteps {
    pub first: Vec<Sz>,
    pub steps: Vec<Option<(usize, Sz)>>,
}

/// The product of `shape`'s dimensions (1 for none).
pub(crate) fn elements(shape: &[Sz]) -> Sz {
    (shape.iter()).fold(Sz::constant(1), |acc, d| acc.mul(d))
}

/// The row-major strides of `shape`: each dimension's, the product of the
/// dimensions after it (those of none counted as one, as
/// `shape::contiguous_strides` counts them).
pub(crate) fn contiguous_strides(shape: &[Sz]) -> Vec<Sz> {
    let mut strides = vec![Sz::constant(1); shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].mul(&shape[d + 1].max(&Sz::constant(1)));
    }
    strides
}

const ROW_MAJOR: &str = "a row-major layout";
const FOURS: &str = "a layout read in aligned groups of four";
const FOLDS: &str = "a view of a view read through one layout";

impl SzLayout {
    /// The layout node `node` carries (`graph::GNode::layout`), its
    /// strides and offset the node's symbols.
    pub fn of(node: usize, layout: &Layout) -> SzLayout {
        SzLayout {
            strides: (layout.strides.iter().enumerate())
                .map(|(d, &s)| Sz::stride(node, d, s))
                .collect(),
            offset: Sz::offset(node, layout.offset),
        }
    }

    /// Row-major `shape` from its first element.
    pub fn contiguous(shape: &[Sz]) -> SzLayout {
        SzLayout {
            strides: contiguous_strides(shape),
            offset: Sz::constant(0),
        }
    }

    /// Its numbers: the layout the kernel's literals spell.
    #[cfg(test)]
    pub fn numbers(&self) -> Layout {
        Layout {
            strides: self.strides.iter().map(Sz::literal).collect(),
            offset: self.offset.literal(),
        }
    }

    /// `Layout::is_row_major`: every dimension past one steps by the
    /// product of the dimensions after it.
    pub fn is_row_major(&self, shape: &[Sz], guards: &mut Guards) -> bool {
        let expected = contiguous_strides(shape);
        for ((dim, stride), want) in shape.iter().zip(&self.strides).zip(&expected) {
            if !guards.at_most(dim, 1, ROW_MAJOR) && !guards.equals_size(stride, want, ROW_MAJOR) {
                return false;
            }
        }
        true
    }

    /// Whether it starts at element 0.
    pub fn starts_at_zero(&self, guards: &mut Guards) -> bool {
        guards.equals(&self.offset, 0, "a layout's offset of zero")
    }

    /// Whether it is row-major and starts on a group of four: read four
    /// at a time in place.
    pub fn row_major_in_fours(&self, shape: &[Sz], guards: &mut Guards) -> bool {
        self.is_row_major(shape, guards) && guards.multiple_of(&self.offset, 4, FOURS)
    }

    /// `Layout::reads_in_aligned_fours`: rows of a multiple of four
    /// elements along the last dim, stride 1 along it, every other stride
    /// and the offset multiples of four.
    pub fn reads_in_aligned_fours(&self, shape: &[Sz], guards: &mut Guards) -> bool {
        let Some((last, others)) = shape.split_last() else {
            return false;
        };
        if !guards.multiple_of(last, 4, FOURS) {
            return false;
        }
        let unit = |s: &Sz, g: &mut Guards| g.equals(s, 1, FOURS);
        if !guards.at_most(last, 1, FOURS) && !self.strides.last().is_some_and(|s| unit(s, guards))
        {
            return false;
        }
        for (dim, stride) in others.iter().zip(&self.strides) {
            if !guards.at_most(dim, 1, FOURS) && !guards.multiple_of(stride, 4, FOURS) {
                return false;
            }
        }
        guards.multiple_of(&self.offset, 4, FOURS)
    }

    /// `Layout::steps_within`: how this layout (of a view of `shape`)
    /// steps through a row-major `inner_shape` it views, where no index
    /// carries across an inner dim; `None` where one would.
    pub fn steps_within(
        &self,
        shape: &[Sz],
        inner_shape: &[Sz],
        guards: &mut Guards,
    ) -> Option<SzSteps> {
        let inner_total = elements(inner_shape);
        if guards.equals(&elements(shape), 0, FOLDS)
            || guards.equals(&inner_total, 0, FOLDS)
            || guards.at_most_size(&inner_total, &self.offset, FOLDS)
        {
            return None;
        }
        let row_major = contiguous_strides(inner_shape);
        // The inner dim whose row-major range [stride, stride * size)
        // holds `step` (dims of one element hold none).
        let dim_of = |step: &Sz, g: &mut Guards| {
            (0..inner_shape.len()).find(|&d| {
                !g.at_most(&inner_shape[d], 1, FOLDS)
                    && g.at_most_size(&row_major[d], step, FOLDS)
                    && g.below_size(step, &row_major[d].mul(&inner_shape[d]), FOLDS)
            })
        };
        // Where the view's first element lies in each inner dim.
        let first: Vec<Sz> = (0..inner_shape.len())
            .map(|d| self.offset.div_by(&row_major[d]).rem_by(&inner_shape[d]))
            .collect();
        let mut reach = first.clone();
        let mut steps = vec![None; shape.len()];
        for (k, (size, step)) in shape.iter().zip(&self.strides).enumerate() {
            if guards.at_most(size, 1, FOLDS) || guards.equals(step, 0, FOLDS) {
                continue;
            }
            let d = dim_of(step, guards)?;
            if !guards.equals(&step.rem_by(&row_major[d]), 0, FOLDS) {
                return None;
            }
            let per = step.div_by(&row_major[d]);
            reach[d] = reach[d].add(&size.sub(&Sz::constant(1)).mul(&per));
            steps[k] = Some((d, per));
        }
        for (reached, size) in reach.iter().zip(inner_shape) {
            if !guards.below_size(reached, size, FOLDS) {
                return None;
            }
        }
        Some(SzSteps { first, steps })
    }

    /// `Layout::through`: this layout (of a view of `shape`) read through
    /// `inner`, the layout of what it views (of `inner_shape`), as one
    /// layout, where no index carries across an inner dim.
    pub fn through(
        &self,
        shape: &[Sz],
        (inner, inner_shape): (&SzLayout, &[Sz]),
        guards: &mut Guards,
    ) -> Option<SzLayout> {
        let steps = self.steps_within(shape, inner_shape, guards)?;
        let strides = (steps.steps.iter())
            .map(|s| match s {
                Some((d, per)) => per.mul(&inner.strides[*d]),
                None => Sz::constant(0),
            })
            .collect();
        let offset = (steps.first.iter().zip(&inner.strides))
            .fold(inner.offset.clone(), |acc, (c, s)| acc.add(&c.mul(s)));
        Some(SzLayout { strides, offset })
    }

    /// `Layout::reshape`: the layout of the same elements viewed with
    /// shape `new_shape`, where strides can express it. A row-major
    /// layout (or an empty shape) is row-major in any shape, from the
    /// same offset; any other is reshaped on its numbers, each pinned by
    /// a guard (a reshape of a strided layout is rare enough that its
    /// every size may take its own code).
    pub fn reshape(&self, shape: &[Sz], new_shape: &[Sz], guards: &mut Guards) -> Option<SzLayout> {
        let empty = guards.equals(&elements(shape), 0, "an empty reshape");
        if empty || self.is_row_major(shape, guards) {
            return Some(SzLayout {
                offset: self.offset.clone(),
                ..SzLayout::contiguous(new_shape)
            });
        }
        let pinned = |sizes: &[Sz], g: &mut Guards| -> Vec<usize> {
            (sizes.iter())
                .map(|s| g.value(s, "a reshape of a strided layout"))
                .collect()
        };
        let numbers = Layout {
            strides: pinned(&self.strides, guards),
            offset: self.offset.literal(),
        };
        let (shape, new_shape) = (pinned(shape, guards), pinned(new_shape, guards));
        let reshaped = numbers.reshape(&shape, &new_shape)?;
        Some(SzLayout {
            strides: reshaped.strides.into_iter().map(Sz::constant).collect(),
            offset: self.offset.clone(),
        })
    }

    /// `Layout::expand`: `shape` (of the same rank) broadcast to
    /// `target`, a dimension that grows stepping by zero.
    pub fn expand(&self, shape: &[Sz], target: &[Sz], guards: &mut Guards) -> SzLayout {
        let strides = (shape.iter().zip(target).zip(&self.strides))
            .map(
                |((from, to), s)| match guards.equals_size(from, to, "a broadcast dimension") {
                    true => s.clone(),
                    false => Sz::constant(0),
                },
            )
            .collect();
        SzLayout {
            strides,
            offset: self.offset.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::sizes::Leaf;
    use proptest::prelude::*;

    /// A view's shape and layout over a row-major inner shape, of ranks
    /// `ranks`: strides and offsets drawn small so that the decisions
    /// come out both ways.
    fn case_of((rank, inner_rank): (usize, usize)) -> impl Strategy<Value = Case> {
        (
            proptest::collection::vec(0usize..6, rank),
            proptest::collection::vec(0usize..13, rank),
            0usize..20,
            proptest::collection::vec(0usize..6, inner_rank),
        )
            .prop_map(|(shape, strides, offset, inner)| (shape, Layout { strides, offset }, inner))
    }

    /// A view's shape, its layout and the inner shape it views.
    type Case = (Vec<usize>, Layout, Vec<usize>);

    fn case() -> impl Strategy<Value = Case> {
        (1usize..4, 1usize..4).prop_flat_map(case_of)
    }

    /// Two cases of the same ranks, the second keeping each of the
    /// first's numbers or not at random (so that one's guards often hold
    /// at the other's numbers).
    fn two_cases() -> impl Strategy<Value = (Case, Case)> {
        let kept = proptest::collection::vec(any::<bool>(), 16);
        (1usize..4, 1usize..4)
            .prop_flat_map(move |ranks| (case_of(ranks), case_of(ranks), kept.clone()))
            .prop_map(|(a, b, kept)| {
                let mut keep = kept.into_iter().cycle();
                let mut mix = |x: usize, y: usize| if keep.next() == Some(true) { x } else { y };
                let shape = a.0.iter().zip(&b.0).map(|(&x, &y)| mix(x, y)).collect();
                let strides = (a.1.strides.iter().zip(&b.1.strides))
                    .map(|(&x, &y)| mix(x, y))
                    .collect();
                let offset = mix(a.1.offset, b.1.offset);
                let inner = a.2.iter().zip(&b.2).map(|(&x, &y)| mix(x, y)).collect();
                let other = (shape, Layout { strides, offset }, inner);
                (a, other)
            })
    }

    /// The view's numbers as symbols: node 1 is the view, node 0 what it
    /// views.
    fn symbols(shape: &[usize], layout: &Layout, inner: &[usize]) -> (Vec<Sz>, SzLayout, Vec<Sz>) {
        (
            Sz::shape(1, shape),
            SzLayout::of(1, layout),
            Sz::shape(0, inner),
        )
    }

    /// What folding a view into its inner layout decided: per view dim,
    /// the inner dim it steps along; and the folded layout's numbers.
    type Folded = Option<(Vec<Option<usize>>, Layout)>;

    /// Each decision, answered on symbols.
    fn decisions(
        (shape, layout, inner): (&[Sz], &SzLayout, &[Sz]),
        guards: &mut Guards,
    ) -> (bool, bool, Folded) {
        let inner_layout = SzLayout::contiguous(inner);
        let along = (layout.steps_within(shape, inner, &mut guards.clone())).map(|s| {
            s.steps
                .iter()
                .map(|s| s.as_ref().map(|(d, _)| *d))
                .collect()
        });
        let folded = layout.through(shape, (&inner_layout, inner), guards);
        (
            layout.is_row_major(shape, guards),
            layout.reads_in_aligned_fours(shape, guards),
            along.zip(folded.map(|l| l.numbers())),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Symbols answer as numbers do.
        #[test]
        fn layouts_decide_on_symbols_as_on_numbers((shape, layout, inner) in case()) {
            let (s, l, i) = symbols(&shape, &layout, &inner);
            let mut guards = Guards::default();
            let got = decisions((&s, &l, &i), &mut guards);
            let inner_layout = Layout::contiguous(&inner);
            let want = (
                layout.is_row_major(&shape),
                layout.reads_in_aligned_fours(&shape),
                layout.through(&shape, &inner_layout, &inner),
            );
            for new_shape in [vec![shape.iter().product::<usize>()], [shape.clone(), vec![1]].concat()] {
                let new = Sz::shape(2, &new_shape);
                let got = (l.reshape(&s, &new, &mut Guards::default())).map(|l| l.numbers());
                prop_assert_eq!(got, layout.reshape(&shape, &new_shape));
            }
            let along = (layout.steps_within(&shape, &inner))
                .map(|s| s.steps.iter().map(|s| s.map(|(d, _)| d)).collect::<Vec<_>>());
            prop_assert_eq!((got.0, got.1, got.2.clone().map(|f| f.1)), want);
            prop_assert_eq!(got.2.map(|f| f.0), along);
        }

        /// Wherever one layout's guards hold at another's numbers (of the
        /// same ranks), the other decides the same.
        #[test]
        fn a_layout_decides_the_same_wherever_its_guards_hold(
            ((shape, layout, inner), (other_shape, other_layout, other_inner)) in two_cases(),
        ) {
            let (s, l, i) = symbols(&shape, &layout, &inner);
            let mut guards = Guards::default();
            let here = decisions((&s, &l, &i), &mut guards);
            let at = |leaf: Leaf| match leaf {
                Leaf::Dim { node: 1, dim } => other_shape[dim],
                Leaf::Dim { node: 0, dim } => other_inner[dim],
                Leaf::Stride { dim, .. } => other_layout.strides[dim],
                Leaf::Offset { .. } => other_layout.offset,
                other => unreachable!("{other}"),
            };
            let hold = guards.list().iter().all(|g| g.holds_at(g.size.eval(&at)));
            let (s, l, i) = symbols(&other_shape, &other_layout, &other_inner);
            let there = decisions((&s, &l, &i), &mut Guards::default());
            // Folded layouts' numbers differ with the sizes; whether a
            // view folds, and along which dims, is the decision.
            if hold {
                let decided = |d: &(bool, bool, Folded)| (d.0, d.1, d.2.clone().map(|f| f.0));
                prop_assert_eq!(decided(&here), decided(&there));
            }
        }
    }
}
