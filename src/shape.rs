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
}

#[cfg(test)]
mod tests {
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
