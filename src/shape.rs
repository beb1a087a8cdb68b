//! Shapes, broadcasting and strided layouts of stored data.
//!
//! Shapes are plain `Vec<usize>`; a rank-0 tensor has shape `[]` and one
//! element. Strides are in elements, not bytes.

/// Number of elements of a shape (1 for rank 0).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major strides of a contiguous tensor of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1;
    for (stride, &dim) in strides.iter_mut().zip(shape).rev() {
        *stride = acc;
        acc *= dim.max(1);
    }
    strides
}

/// The NumPy/PyTorch broadcast of two shapes, or `None` if they do not broadcast.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for (i, slot) in out.iter_mut().enumerate() {
        let da = dim_from_right(a, rank - 1 - i);
        let db = dim_from_right(b, rank - 1 - i);
        *slot = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

fn dim_from_right(shape: &[usize], from_right: usize) -> usize {
    if from_right < shape.len() {
        shape[shape.len() - 1 - from_right]
    } else {
        1
    }
}

/// Where the elements of stored data live inside its buffer: element
/// `(i0, i1, ..)` is at `offset + Σ ik * strides[k]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Element stride per dimension (0 for a broadcast dimension).
    pub strides: Vec<usize>,
    /// Element offset of the first element.
    pub offset: usize,
}

impl Layout {
    /// The layout of freshly written, row-major data.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    /// Whether the data is row-major and starts at offset 0, so the buffer
    /// can be copied out as is.
    pub fn is_contiguous(&self, shape: &[usize]) -> bool {
        self.offset == 0 && self.is_row_major(shape)
    }

    /// Whether the strides are row-major (size-1 dims may have any stride).
    pub fn is_row_major(&self, shape: &[usize]) -> bool {
        let expected = contiguous_strides(shape);
        shape
            .iter()
            .zip(self.strides.iter().zip(&expected))
            .all(|(&dim, (&s, &e))| dim <= 1 || s == e)
    }

    /// Whether `shape` read through this layout can be read four elements
    /// a load in row-major groups of four, each group one aligned `vec4`
    /// of the buffer: rows along the last dim of a multiple of four
    /// elements, stride 1 along it, every other stride (broadcast ones
    /// are 0) and the offset multiples of four. A bias broadcast over
    /// rows is such a layout, as is a window of whole rows.
    pub fn reads_in_aligned_fours(&self, shape: &[usize]) -> bool {
        let Some((&last, others)) = shape.split_last() else {
            return false;
        };
        let stride_ok = |(&d, &s): (&usize, &usize)| d <= 1 || s.is_multiple_of(4);
        last.is_multiple_of(4)
            && (last <= 1 || self.strides.last() == Some(&1))
            && others.iter().zip(&self.strides).all(stride_ok)
            && self.offset.is_multiple_of(4)
    }

    /// Elements of its buffer that `shape` read through this layout
    /// reaches at most, from its first: no more than the shape holds, and
    /// fewer where strides repeat elements (a broadcast bias reaches its
    /// own length).
    pub fn elements_reached(&self, shape: &[usize]) -> usize {
        let last: usize = (shape.iter().zip(&self.strides))
            .map(|(&d, &s)| d.saturating_sub(1) * s)
            .sum();
        shape.iter().product::<usize>().min(last.saturating_add(1))
    }

    /// Buffer position of the element at row-major linear index `linear`.
    pub fn position(&self, shape: &[usize], mut linear: usize) -> usize {
        let mut pos = self.offset;
        for (&dim, &stride) in shape.iter().zip(&self.strides).rev() {
            if dim == 0 {
                return pos;
            }
            pos += (linear % dim) * stride;
            linear /= dim;
        }
        pos
    }

    /// The layout after permuting dimensions (`perm[k]` is the source dim of
    /// output dim `k`).
    pub fn permute(&self, perm: &[usize]) -> Layout {
        Layout {
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// The layout after broadcasting `shape` (same rank) to `target`.
    pub fn expand(&self, shape: &[usize], target: &[usize]) -> Layout {
        Layout {
            strides: shape
                .iter()
                .zip(target)
                .zip(&self.strides)
                .map(|((&from, &to), &s)| if from == to { s } else { 0 })
                .collect(),
            offset: self.offset,
        }
    }

    /// The layout of the same elements viewed with shape `new_shape`, if
    /// strides can express it (as `torch.Tensor.view` decides); `None` when
    /// the reshape would need a copy.
    pub fn reshape(&self, shape: &[usize], new_shape: &[usize]) -> Option<Layout> {
        if numel(shape) == 0 || self.is_row_major(shape) {
            let mut layout = Layout::contiguous(new_shape);
            layout.offset = self.offset;
            return Some(layout);
        }
        // Walk groups of old dims that are contiguous with each other and
        // match them against runs of new dims with the same element count.
        let old: Vec<(usize, usize)> = shape
            .iter()
            .zip(&self.strides)
            .filter(|(d, _)| **d != 1)
            .map(|(&d, &s)| (d, s))
            .collect();
        let mut new_strides = vec![0; new_shape.len()];
        let mut oi = 0;
        let mut ni = 0;
        while oi < old.len() {
            // One chunk of old dims, mergeable because stride[k] = stride[k+1]*dim[k+1].
            let mut chunk = old[oi].0;
            let mut oj = oi;
            while oj + 1 < old.len() && old[oj].1 == old[oj + 1].1 * old[oj + 1].0 {
                oj += 1;
                chunk *= old[oj].0;
            }
            let inner_stride = old[oj].1;
            // New dims covering exactly `chunk` elements, assigned innermost last.
            let start = ni;
            let mut covered = 1;
            while ni < new_shape.len() && (covered < chunk || new_shape[ni] == 1) {
                if covered == chunk && new_shape[ni] == 1 {
                    break;
                }
                covered *= new_shape[ni];
                ni += 1;
            }
            if covered != chunk {
                return None;
            }
            let mut acc = inner_stride;
            for k in (start..ni).rev() {
                new_strides[k] = acc;
                acc *= new_shape[k];
            }
            oi = oj + 1;
        }
        // Remaining new dims must all be 1.
        if new_shape[ni..].iter().any(|&d| d != 1) {
            return None;
        }
        Some(Layout {
            strides: new_strides,
            offset: self.offset,
        })
    }

    /// This layout (of a view of `shape`) read through `inner`, the
    /// layout of what it views (of `inner_shape`, read row-major by this
    /// one): one layout from the view's elements straight to `inner`'s
    /// storage, where one exists. It does where no element's index
    /// carries across a dim of `inner`: each of this view's dims steps
    /// within one dim of `inner`, and their steps together stay inside
    /// it, so the row-major decomposition of an inner index is the sum
    /// of the dims' own. A convolution's windows (a view of a view of the
    /// input) then cost one index decomposition, not two. `None` where an
    /// index would carry (a step across two inner dims, or past one).
    /// Lowering decides on sizes (`kernel::layouts::SzLayout::through`,
    /// which records its tests as guards); this plain version is what a
    /// property test holds that one to.
    #[cfg(test)]
    pub(crate) fn through(
        &self,
        shape: &[usize],
        inner: &Layout,
        inner_shape: &[usize],
    ) -> Option<Layout> {
        let steps = self.steps_within(shape, inner_shape)?;
        let strides = (steps.steps.iter())
            .map(|s| s.map_or(0, |(d, per)| per * inner.strides[d]))
            .collect();
        let offset = inner.offset
            + (steps.first.iter().zip(&inner.strides))
                .map(|(c, s)| c * s)
                .sum::<usize>();
        Some(Layout { strides, offset })
    }

    /// How this layout (of a view of `shape`) steps through a row-major
    /// `inner_shape` it views, dim by dim, where no index carries across
    /// an inner dim (see `through`); `None` where one would.
    #[cfg(test)]
    pub(crate) fn steps_within(&self, shape: &[usize], inner_shape: &[usize]) -> Option<DimSteps> {
        let inner_total = numel(inner_shape);
        if numel(shape) == 0 || inner_total == 0 || self.offset >= inner_total {
            return None;
        }
        let row_major = contiguous_strides(inner_shape);
        // The inner dim whose row-major range [stride, stride * size)
        // holds `step` (dims of one element hold none).
        let dim_of = |step: usize| {
            (0..inner_shape.len()).find(|&d| {
                inner_shape[d] > 1 && row_major[d] <= step && step < row_major[d] * inner_shape[d]
            })
        };
        // Where the view's first element lies in each inner dim.
        let first: Vec<usize> = (0..inner_shape.len())
            .map(|d| self.offset / row_major[d] % inner_shape[d])
            .collect();
        let mut reach = first.clone();
        let mut steps = vec![None; shape.len()];
        for (k, (&size, &step)) in shape.iter().zip(&self.strides).enumerate() {
            if size <= 1 || step == 0 {
                continue;
            }
            let d = dim_of(step)?;
            if !step.is_multiple_of(row_major[d]) {
                return None;
            }
            let per = step / row_major[d];
            reach[d] += (size - 1) * per;
            steps[k] = Some((d, per));
        }
        if (0..inner_shape.len()).any(|d| reach[d] >= inner_shape[d]) {
            return None;
        }
        Some(DimSteps { first, steps })
    }
}

/// How a view steps through a row-major shape it views without carries
/// (`Layout::steps_within`): the coordinates of its first element, and
/// per dim of the view the inner dim it steps along and by how much
/// (`None`: it does not move).
#[cfg(test)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DimSteps {
    pub first: Vec<usize>,
    pub steps: Vec<Option<(usize, usize)>>,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// Which layouts read in aligned groups of four: a bias broadcast
    /// over rows and a window of whole rows do; a row of six, a column
    /// window, an offset of two and a transposed matrix do not. Each
    /// accepted layout's groups checked against positions one by one.
    #[test]
    fn layouts_read_in_aligned_fours() {
        use super::Layout;
        let layout = |strides: &[usize], offset| Layout {
            strides: strides.to_vec(),
            offset,
        };
        let cases = [
            (vec![5, 8], layout(&[0, 1], 0), true),
            (vec![3, 8], layout(&[12, 1], 4), true),
            (vec![1, 8], layout(&[0, 1], 8), true),
            (vec![3, 6], layout(&[6, 1], 0), false),
            (vec![3, 4], layout(&[6, 1], 0), false),
            (vec![3, 8], layout(&[8, 1], 2), false),
            (vec![8, 8], layout(&[1, 8], 0), false),
        ];
        for (shape, layout, want) in cases {
            assert_eq!(
                layout.reads_in_aligned_fours(&shape),
                want,
                "{shape:?} {layout:?}"
            );
            if want {
                for g in 0..super::numel(&shape) / 4 {
                    let first = layout.position(&shape, 4 * g);
                    assert_eq!(first % 4, 0);
                    for q in 1..4 {
                        assert_eq!(layout.position(&shape, 4 * g + q), first + q);
                    }
                }
            }
        }
    }

    /// The storage position of `shape`'s element at `linear` through
    /// `outer` then `inner`, by two decompositions (the oracle).
    fn twice(
        shape: &[usize],
        outer: &Layout,
        inner_shape: &[usize],
        inner: &Layout,
        linear: usize,
    ) -> usize {
        inner.position(inner_shape, outer.position(shape, linear))
    }

    #[test]
    fn a_convolutions_windows_read_through_one_layout() {
        // Windows of a [2, 3, 6, 6] input for 3x3 kernels: [2, 3, 4, 4, 3, 3]
        // over the input's storage, then permuted to [2, 3, 3, 3, 4, 4] and
        // read row-major as a [2, 27, 16] matrix by a matmul.
        let windows_shape = [2usize, 3, 4, 4, 3, 3];
        let windows = Layout {
            strides: vec![108, 36, 6, 1, 6, 1],
            offset: 0,
        };
        let rows_shape = [2usize, 3, 3, 3, 4, 4];
        let permuted = Layout::contiguous(&windows_shape).permute(&[0, 1, 4, 5, 2, 3]);
        let merged = permuted
            .through(&rows_shape, &windows, &windows_shape)
            .expect("no index carries");
        assert_eq!(merged.strides, vec![108, 36, 6, 1, 6, 1]);
        for linear in 0..numel(&rows_shape) {
            assert_eq!(
                merged.position(&rows_shape, linear),
                twice(&rows_shape, &permuted, &windows_shape, &windows, linear)
            );
        }
    }

    #[test]
    fn a_step_across_inner_dims_has_no_single_layout() {
        // Every third element of a transposed [4, 6]: index 3 carries
        // from one inner row into the next.
        let inner_shape = [4usize, 6];
        let inner = Layout::contiguous(&[6, 4]).permute(&[1, 0]);
        let every_third = Layout {
            strides: vec![3],
            offset: 0,
        };
        assert_eq!(every_third.through(&[8], &inner, &inner_shape), None);
        // Past a dim: elements 4 and 5 of rows of 6, then 6 and 7 carry.
        let tail = Layout {
            strides: vec![1],
            offset: 4,
        };
        assert_eq!(tail.through(&[4], &inner, &inner_shape), None);
        assert!(tail.through(&[2], &inner, &inner_shape).is_some());
    }

    proptest! {
        /// Wherever a single layout is found, it places every element
        /// where reading through both layouts does.
        #[test]
        fn one_layout_places_elements_as_two_do(
            inner_shape in prop::collection::vec(1usize..6, 2..5),
            inner_strides in prop::collection::vec(0usize..40, 4),
            inner_offset in 0usize..20,
            shape in prop::collection::vec(1usize..4, 1..4),
            picks in prop::collection::vec((0usize..4, 0usize..3), 3),
            offset in 0usize..4,
        ) {
            let inner = Layout {
                strides: inner_strides[..inner_shape.len()].to_vec(),
                offset: inner_offset,
            };
            // Steps of the inner's own row-major strides (some of them
            // twice over, some zero), as views of views take.
            let row_major = contiguous_strides(&inner_shape);
            let strides: Vec<usize> = picks[..shape.len()]
                .iter()
                .map(|&(d, times)| row_major[d.min(inner_shape.len() - 1)] * times)
                .collect();
            let outer = Layout { strides, offset };
            // Only views that stay inside what they view.
            let max: usize = offset + shape.iter().zip(&outer.strides).map(|(&n, &s)| (n - 1) * s).sum::<usize>();
            prop_assume!(max < numel(&inner_shape));
            if let Some(merged) = outer.through(&shape, &inner, &inner_shape) {
                for linear in 0..numel(&shape) {
                    prop_assert_eq!(
                        merged.position(&shape, linear),
                        twice(&shape, &outer, &inner_shape, &inner, linear)
                    );
                }
            }
        }
    }

    use super::*;

    #[test]
    fn broadcast_follows_numpy() {
        assert_eq!(broadcast_shapes(&[2, 1, 3], &[4, 1]), Some(vec![2, 4, 3]));
        assert_eq!(broadcast_shapes(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[0, 1], &[1, 3]), Some(vec![0, 3]));
        assert_eq!(broadcast_shapes(&[2, 3], &[4]), None);
    }

    #[test]
    fn reshape_of_transposed_view() {
        // A [2,3] tensor transposed to [3,2]: strides [1,3].
        let t = Layout {
            strides: vec![1, 3],
            offset: 0,
        };
        // Splitting a dim keeps it a view.
        let split = t.reshape(&[3, 2], &[3, 1, 2]).expect("view");
        assert_eq!(split.strides[0], 1);
        assert_eq!(split.strides[2], 3);
        // Merging non-mergeable dims needs a copy.
        assert_eq!(t.reshape(&[3, 2], &[6]), None);
    }

    #[test]
    fn position_matches_strides() {
        let l = Layout {
            strides: vec![1, 3],
            offset: 2,
        };
        // element (1, 1) of a [3, 2] view: 2 + 1 + 3.
        assert_eq!(l.position(&[3, 2], 3), 6);
    }
}
