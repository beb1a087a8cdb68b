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
        if b.dtype != n.dtype || b.inputs != n.inputs {
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
            (GKind::Op { op: ob, .. }, GKind::Op { op: on, .. })
                if std::mem::discriminant(ob) == std::mem::discriminant(on) => {}
            _ => return None,
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
