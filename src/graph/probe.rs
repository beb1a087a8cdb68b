//! A third size for a graph seen at two: the structure of `new`, each
//! size that differs from `before` moved on along the same line. Dynamic
//! sizes (`runtime::gpu::generalize`) compare a kernel's text at the two
//! sizes a site has seen to find which literals are sizes; a literal that
//! happens to be equal at both (two tiles of 32 rows for a batch of 64
//! and one of 50) would otherwise be found only at the size where it
//! first differs (17: one tile), and cost a compile there. Sizes are
//! affine in the dynamic ones (a batch `b`, `784 * b` elements, a stride
//! `10 * b`), so each moves by the same multiple of its own change: the
//! probe is what a batch three changes further would give.
//!
//! A size the user marked dynamic (`Tensor::mark_dynamic`) gets a probe
//! at its first compile (`marked_probe_key`), so that its kernels are
//! generic from the first size.
//!
//! The probe is never run: it only tells which literals may be sizes.
//! A literal wrongly thought dynamic costs a read of a uniform; a probe
//! whose kernels differ in structure is ignored kernel by kernel.

use super::collect::{GKind, GraphKey};
use super::op::Op;

/// How many changes further the probe goes, away from zero.
const STEPS: i64 = 3;

/// The probe for `new`, one size after `before` at the same site, or
/// `None` when the two differ in anything but sizes or a moved size
/// would not be positive.
pub(crate) fn probe_key(before: &GraphKey, new: &GraphKey) -> Option<GraphKey> {
    if before.nodes.len() != new.nodes.len() || before.outputs != new.outputs {
        return None;
    }
    // Whether the sizes grew, by the first that changed: the probe moves
    // each size the same way, to larger sizes.
    let grew = before
        .nodes
        .iter()
        .zip(&new.nodes)
        .flat_map(|(b, n)| b.shape.iter().zip(&n.shape))
        .find(|(b, n)| b != n)
        .map(|(b, n)| n > b)?;
    let factor = if grew { STEPS } else { -STEPS };
    let mut probe = new.clone();
    for ((b, n), p) in before.nodes.iter().zip(&new.nodes).zip(&mut probe.nodes) {
        if !b.same_but_sizes(n) {
            return None;
        }
        move_all(&b.shape, &mut p.shape, factor)?;
        match (&b.kind, &mut p.kind) {
            (GKind::Input { layout: lb, .. }, GKind::Input { layout: lp, .. })
            | (
                GKind::Op {
                    op: Op::AsStrided(lb),
                    ..
                },
                GKind::Op {
                    op: Op::AsStrided(lp),
                    ..
                },
            ) => {
                move_all(&lb.strides, &mut lp.strides, factor)?;
                lp.offset = moved(lb.offset, lp.offset, factor)?;
            }
            // Ops of one kind (`same_but_sizes`) and no view.
            _ => {}
        }
    }
    Some(probe)
}

/// Moves each of `new`'s values on from `before`'s (see `moved`).
fn move_all(before: &[usize], new: &mut [usize], factor: i64) -> Option<()> {
    if before.len() != new.len() {
        return None;
    }
    for (b, n) in before.iter().zip(new.iter_mut()) {
        *n = moved(*b, *n, factor)?;
    }
    Some(())
}

/// `new` moved `factor` of its changes since `before` further (itself
/// when it did not change); `None` where that is not a positive size (or
/// zero, for a value that was zero).
fn moved(before: usize, new: usize, factor: i64) -> Option<usize> {
    if before == new {
        return Some(new);
    }
    let change = new as i64 - before as i64;
    let value = new as i64 + factor * change;
    (value > 0).then_some(value as usize)
}

/// A probe for a graph whose sizes `marked` the user marked dynamic
/// (`Tensor::mark_dynamic`), at its first size: every size, stride and
/// offset of the graph that is a multiple of a marked size moves as that
/// size does in `probe`, so a batch of 64 gives a `Far` probe of 96 and
/// `64 * 784` elements become `96 * 784`. Numbers that are multiples by
/// coincidence (a hidden width equal to the batch) move too, which costs
/// a uniform read where a literal would do, or leaves a kernel whose
/// probe differs in structure concrete. `None` when nothing moves (no
/// number is a multiple of a size `probe` can move) or a moved number
/// would overflow.
pub(crate) fn marked_probe_key(
    key: &GraphKey,
    marked: &[usize],
    probe: MarkedProbe,
) -> Option<GraphKey> {
    // A size a probe cannot move (eight fewer than 9) stays where it is.
    let moved = |v: usize| -> Option<usize> {
        // Each factor of a marked size moves (a batch of 64 by a sequence
        // of 64, marked as one size, is 64 * 64 elements), taken a round
        // of the marked sizes at a time, so that `12 * 48 * 128` with 48
        // and 12 marked is read as both, not as 48 twice (`* 32`).
        let (mut rest, mut scale) = (v, 1usize);
        loop {
            let before = rest;
            for &b in marked {
                if b > 1 && rest >= b && rest % b == 0 {
                    rest /= b;
                    scale = scale.checked_mul(probe.moved(b).unwrap_or(b))?;
                }
            }
            if rest == before {
                return rest.checked_mul(scale);
            }
        }
    };
    let move_all = |values: &mut [usize]| -> Option<()> {
        for v in values {
            *v = moved(*v)?;
        }
        Some(())
    };
    let mut probed = key.clone();
    for node in &mut probed.nodes {
        move_all(&mut node.shape)?;
        match &mut node.kind {
            GKind::Input { layout, .. }
            | GKind::Op {
                op: Op::AsStrided(layout) | Op::StridedScatter(layout),
                ..
            } => {
                move_all(&mut layout.strides)?;
                layout.offset = moved(layout.offset)?;
            }
            GKind::Op { .. } => {}
        }
    }
    (probed != *key).then_some(probed)
}

/// Where a probe moves a marked size. Each moves it by a multiple of eight,
/// so that divisibility by two, four and eight (which picks `vec4` and
/// tile variants) stays; a small move crosses fewer of the thresholds
/// between strategies, a large one changes more of the quantities derived
/// from the size (tile counts, rounded loop lengths). A kernel is made
/// generic against the first probe it matches in structure, over every
/// literal in which the probes of that structure differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkedProbe {
    /// Eight more.
    Near,
    /// About half as much again.
    Far,
    /// Eight fewer, where that leaves at least two.
    Below,
    /// About half as much, where that leaves at least two.
    FarBelow,
}

impl MarkedProbe {
    /// Every probe, in the order kernels are matched against them.
    pub const ALL: [MarkedProbe; 4] = [
        MarkedProbe::Near,
        MarkedProbe::Far,
        MarkedProbe::Below,
        MarkedProbe::FarBelow,
    ];

    /// Where this probe moves `size`; `None` where it would not stay a
    /// size past one.
    fn moved(self, size: usize) -> Option<usize> {
        match self {
            MarkedProbe::Near => size.checked_add(8),
            MarkedProbe::Far => size.checked_add(8 * size.div_ceil(16)),
            MarkedProbe::Below => size.checked_sub(8).filter(|&s| s >= 2),
            MarkedProbe::FarBelow => Some(size - 8 * (size / 16)).filter(|&s| s >= 2 && s != size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::graph::collect::GNode;
    use crate::shape::Layout;

    fn mlp_input(batch: usize) -> GraphKey {
        let input = GNode {
            kind: GKind::Input {
                slot: 0,
                layout: Layout {
                    strides: vec![784, 1],
                    offset: 0,
                },
            },
            shape: vec![batch, 784],
            dtype: DType::F32,
            inputs: vec![],
        };
        let flat = GNode {
            kind: GKind::Op {
                op: Op::Reshape,
                param_base: 0,
            },
            shape: vec![batch * 784],
            dtype: DType::F32,
            inputs: vec![0],
        };
        GraphKey {
            nodes: vec![input, flat],
            outputs: vec![1],
            fused: true,
            checked: false,
            donatable: vec![false],
            buffer_group: vec![0],
        }
    }

    #[test]
    fn sizes_move_on_together() {
        // 64 then 50: the probe is a batch of 92 (50 + 3 * 14), and the
        // flattened length follows it.
        let probe = probe_key(&mlp_input(64), &mlp_input(50)).expect("same structure");
        assert_eq!(probe, mlp_input(92));
        // Growing sizes move further up.
        let probe = probe_key(&mlp_input(17), &mlp_input(64)).expect("same structure");
        assert_eq!(probe, mlp_input(64 + 3 * 47));
    }

    #[test]
    fn marked_sizes_move_with_their_multiples() {
        // A batch of 64 marked: the probe is a batch of 96, its flattened
        // length follows; the row stride 784 is no multiple and stays.
        let far = marked_probe_key(&mlp_input(64), &[64], MarkedProbe::Far);
        assert_eq!(far, Some(mlp_input(96)));
        let near = marked_probe_key(&mlp_input(64), &[64], MarkedProbe::Near);
        assert_eq!(near, Some(mlp_input(72)));
        let below = marked_probe_key(&mlp_input(64), &[64], MarkedProbe::Below);
        assert_eq!(below, Some(mlp_input(56)));
        let far_below = marked_probe_key(&mlp_input(64), &[64], MarkedProbe::FarBelow);
        assert_eq!(far_below, Some(mlp_input(32)));
        assert_eq!(
            marked_probe_key(&mlp_input(9), &[9], MarkedProbe::Below),
            None,
            "a batch of one is specialised"
        );
        // Two marked sizes (a batch of 12 and a sequence of 48): a product
        // of both moves by both.
        let mut key = mlp_input(12 * 48);
        key.nodes[0].shape = vec![12, 48];
        key.nodes[0].kind = GKind::Input {
            slot: 0,
            layout: Layout {
                strides: vec![48, 1],
                offset: 0,
            },
        };
        key.nodes[1].shape = vec![12 * 48 * 128];
        let probe = marked_probe_key(&key, &[48, 12], MarkedProbe::Far).expect("marked sizes");
        assert_eq!(probe.nodes[0].shape, vec![20, 72]);
        assert_eq!(probe.nodes[1].shape, vec![20 * 72 * 128]);
        // A size met twice in one number moves twice.
        let square =
            marked_probe_key(&mlp_input(64 * 64), &[64], MarkedProbe::Near).expect("moves");
        assert_eq!(square.nodes[1].shape, vec![72 * 72 * 784]);
        // Nothing to move: no probe.
        assert_eq!(
            marked_probe_key(&mlp_input(50), &[64], MarkedProbe::Near),
            None
        );
    }

    #[test]
    fn another_structure_has_no_probe() {
        let mut other = mlp_input(50);
        other.nodes[1].kind = GKind::Op {
            op: Op::Expand,
            param_base: 0,
        };
        assert_eq!(probe_key(&mlp_input(64), &other), None);
        assert_eq!(
            probe_key(&mlp_input(64), &mlp_input(64)),
            None,
            "no size changed"
        );
    }
}
