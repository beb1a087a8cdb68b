//! Which numbers of a graph change between the sizes a trace site has
//! compiled: the symbols (`Leaf`s) that a site's kernels read from their
//! sizes binding, not as literals.
//!
//! A kernel lowered with provenance carries, on each literal that is a
//! size, the expression that computes it from the graph's numbers
//! (`Expr::Sized`). The literals whose expression reads a changing number
//! become reads of the kernel's dynamic sizes (`kernel::generic`); the
//! others stay literals, so that a dimension that never changes keeps the
//! static fast path (a division by a constant stays a multiplication).
//!
//! A number changes where its value differs from the site's last graph of
//! the same lowered structure, where it changed at an earlier size of the
//! site (the set only grows: a batch of 64, 50, then 64 again is generic
//! over the batch at 64 too), or where it is a multiple of a size the user
//! marked dynamic (`Tensor::mark_dynamic`: a batch `b`, its `784 * b`
//! elements and their stride `784 * b` across a split). Marks are read by
//! value, so a hidden width equal to a marked batch reads its sizes from
//! the binding too: that costs a uniform read where a literal would do,
//! never a value.

use rustc_hash::FxHashSet;

use super::sizes::Leaf;
use crate::graph::{GKind, GNode, GraphKey, op::Op};

/// The numbers of a graph that its kernels read as dynamic sizes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChangingSizes {
    leaves: FxHashSet<Leaf>,
}

impl ChangingSizes {
    /// None changes: every size is a literal (a site's first sizes).
    pub fn none() -> ChangingSizes {
        ChangingSizes::default()
    }

    /// Every number of `key` changes: the most generic kernels (tests of
    /// what a fully generic kernel prints).
    #[cfg(test)]
    pub fn all(key: &GraphKey) -> ChangingSizes {
        let mut all = ChangingSizes::none();
        for n in 0..key.nodes.len() {
            all.leaves.extend(leaves_of(key, n));
        }
        all
    }

    /// The numbers of `now` (a lowered graph, of `traced`'s nodes through
    /// `origin`) that change against the site's last graph of its
    /// structure (`before`: its traced and lowered keys, its lowered
    /// nodes' traced nodes, and what changed up to it), and those that
    /// are multiples of the `marked` sizes. Where the lowered graphs
    /// differ in structure (a reduction split at one length only), each
    /// node changes whole where the traced node it comes from changed its
    /// shape or had a number that changed before; where the traced graphs
    /// differ too, only the marks change.
    pub fn at(
        (traced, now, origin): (&GraphKey, &GraphKey, &[usize]),
        before: Option<Before<'_>>,
        marked: &[usize],
    ) -> ChangingSizes {
        let mut changing = ChangingSizes::none();
        let mut insert_if = |key: &GraphKey, n: usize, test: &dyn Fn(Leaf, usize) -> bool| {
            for leaf in leaves_of(key, n) {
                if test(leaf, number_of(key, leaf)) {
                    changing.leaves.insert(leaf);
                }
            }
        };
        if let Some(Before {
            traced: then_traced,
            lowered: then,
            origin: then_origin,
            changing: known,
        }) = before
        {
            if then.same_structure(now) {
                for n in 0..now.nodes.len() {
                    insert_if(now, n, &|leaf, value| {
                        known.leaves.contains(&leaf) || number_of(then, leaf) != value
                    });
                }
            } else if then_traced.same_structure(traced) {
                // The traced nodes whose lowered nodes had a number that
                // changed.
                let mut had_changed = vec![false; traced.nodes.len()];
                for leaf in &known.leaves {
                    if let Some(&t) = then_origin.get(leaf.node()) {
                        had_changed[t] = true;
                    }
                }
                for (n, &t) in origin.iter().enumerate() {
                    let (a, b) = (&then_traced.nodes[t], &traced.nodes[t]);
                    if had_changed[t] || a.shape != b.shape || a.layout() != b.layout() {
                        insert_if(now, n, &|_, _| true);
                    }
                }
            }
        }
        if marked.iter().any(|&m| m > 1) {
            for n in 0..now.nodes.len() {
                insert_if(now, n, &|_, value| multiple_of_marked(value, marked));
            }
        }
        changing
    }

    /// Whether `leaf` changes.
    pub fn contains(&self, leaf: Leaf) -> bool {
        self.leaves.contains(&leaf)
    }

    /// How many numbers change.
    pub fn len(&self) -> usize {
        self.leaves.len()
    }
}

/// The site's last graph of a structure, as `ChangingSizes::at` compares
/// a new one with it.
#[derive(Clone, Copy)]
pub(crate) struct Before<'a> {
    /// The graph as traced.
    pub traced: &'a GraphKey,
    /// The graph as lowered.
    pub lowered: &'a GraphKey,
    /// Per lowered node, the traced node it comes from.
    pub origin: &'a [usize],
    /// The numbers of `lowered` that had changed up to it.
    pub changing: &'a ChangingSizes,
}

/// Whether `value` is a multiple of a marked size (of 2 or more), as a
/// number that moves with it.
fn multiple_of_marked(value: usize, marked: &[usize]) -> bool {
    marked
        .iter()
        .any(|&m| m > 1 && value >= m && value.is_multiple_of(m))
}

/// Every number of node `n` of `key` that a size may read: its
/// dimensions, its extent, the elements its layout reaches (an input's),
/// its layout's strides and offset, its padding.
pub(crate) fn leaves_of(key: &GraphKey, n: usize) -> impl Iterator<Item = Leaf> + '_ {
    let node = &key.nodes[n];
    let rank = node.shape.len();
    let dims = (0..rank).map(move |dim| Leaf::Dim { node: n, dim });
    let reached = matches!(node.kind, GKind::Input { .. }).then_some(Leaf::Reached { node: n });
    let layout = node.layout().map(|l| l.strides.len());
    let strides = (0..layout.unwrap_or(0)).map(move |dim| Leaf::Stride { node: n, dim });
    let offset = layout.map(|_| Leaf::Offset { node: n });
    let pads = pads(node).map_or(0, <[(usize, usize)]>::len);
    let pad = (0..pads).flat_map(move |dim| {
        [false, true].map(|after| Leaf::Pad {
            node: n,
            dim,
            after,
        })
    });
    dims.chain([Leaf::Extent { node: n }])
        .chain(reached)
        .chain(strides)
        .chain(offset)
        .chain(pad)
}

/// The padding a pad node adds, per dimension `(before, after)`.
fn pads(node: &GNode) -> Option<&[(usize, usize)]> {
    match &node.kind {
        GKind::Op {
            op: Op::Pad(pads), ..
        } => Some(pads),
        _ => None,
    }
}

/// The value of `leaf` in `key`: what a size that reads it evaluates to
/// there. A leaf `leaves_of` does not list for its node (a stride of a
/// node without a layout) is 0.
pub(crate) fn number_of(key: &GraphKey, leaf: Leaf) -> usize {
    let node = &key.nodes[leaf.node()];
    match leaf {
        Leaf::Dim { dim, .. } => node.shape.get(dim).copied().unwrap_or(0),
        Leaf::Extent { .. } => node.extent(),
        Leaf::Reached { .. } => match &node.kind {
            GKind::Input { layout, .. } => layout.elements_reached(&node.shape),
            GKind::Op { .. } => crate::shape::numel(&node.shape),
        },
        Leaf::Stride { dim, .. } => node
            .layout()
            .and_then(|l| l.strides.get(dim).copied())
            .unwrap_or(0),
        Leaf::Offset { .. } => node.layout().map_or(0, |l| l.offset),
        Leaf::Pad { dim, after, .. } => pads(node)
            .and_then(|p| p.get(dim))
            .map_or(0, |&(b, a)| if after { a } else { b }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::graph::op::BinaryOp;
    use crate::shape::Layout;

    /// `x + x` of a `[rows, cols]` input read through a view of its
    /// columns from the second (rows `cols + 1` long in memory).
    fn graph(rows: usize, cols: usize) -> GraphKey {
        let mut layout = Layout::contiguous(&[rows, cols + 1]);
        layout.offset = 1;
        let nodes = vec![
            GNode {
                kind: GKind::Input { slot: 0, layout },
                shape: vec![rows, cols],
                dtype: DType::F32,
                inputs: vec![],
            },
            GNode {
                kind: GKind::Op {
                    op: Op::Binary(BinaryOp::Add),
                    param_base: 0,
                },
                shape: vec![rows, cols],
                dtype: DType::F32,
                inputs: vec![0, 0],
            },
        ];
        GraphKey {
            outputs: vec![1],
            nodes,
            fused: true,
            checked: false,
            donatable: vec![false],
            buffer_group: vec![0],
        }
    }

    /// `key` as the site's last graph, lowered as traced.
    fn before<'a>(
        key: &'a GraphKey,
        origin: &'a [usize],
        changing: &'a ChangingSizes,
    ) -> Option<Before<'a>> {
        Some(Before {
            traced: key,
            lowered: key,
            origin,
            changing,
        })
    }

    /// `graph(rows, cols)` lowered with a third node, `n1 + n1`, which
    /// comes from the traced graph's node 1.
    fn lowered_longer(rows: usize, cols: usize) -> GraphKey {
        let mut key = graph(rows, cols);
        let mut extra = key.nodes[1].clone();
        extra.inputs = vec![1, 1];
        key.nodes.push(extra);
        key.outputs = vec![2];
        key
    }

    #[test]
    fn where_the_lowered_graphs_differ_nodes_change_whole_by_their_traced_node() {
        let (then, identity) = (graph(64, 10), [0, 1]);
        let origin = [0, 1, 1];
        // The numbers that change at `rows` rows against `then`, whose
        // numbers `known` had changed, lowered with a third node.
        let listed_at = |rows: usize, known: &ChangingSizes| {
            let (traced, now) = (graph(rows, 10), lowered_longer(rows, 10));
            let before = before(&then, &identity, known);
            changing(
                &now,
                &ChangingSizes::at((&traced, &now, &origin), before, &[]),
            )
        };
        // The rows changed: every node changes whole.
        let listed = listed_at(50, &ChangingSizes::none());
        for leaf in ["n0[1]", "n2[0]", "n2[1]", "stride(n0)[0]"] {
            assert!(listed.contains(&leaf.to_string()), "{leaf}: {listed:?}");
        }
        // Nothing changed now, but node 0's rows had: the nodes from
        // traced node 0 change, those from node 1 do not.
        let mut rows = ChangingSizes::none();
        rows.leaves.insert(Leaf::Dim { node: 0, dim: 0 });
        let listed = listed_at(64, &rows);
        assert!(listed.contains(&"n0[1]".to_string()), "{listed:?}");
        assert!(
            !listed.iter().any(|l| l.contains("n1") || l.contains("n2")),
            "{listed:?}"
        );
        let now = lowered_longer(64, 10);
        // Another traced structure: only the marks.
        let set = ChangingSizes::at((&now, &now, &origin), before(&then, &identity, &rows), &[]);
        assert_eq!(set.len(), 0);
    }

    fn changing(key: &GraphKey, set: &ChangingSizes) -> Vec<String> {
        let mut out: Vec<String> = (0..key.nodes.len())
            .flat_map(|n| leaves_of(key, n))
            .filter(|&l| set.contains(l))
            .map(|l| l.to_string())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn numbers_that_differ_from_the_last_sizes_change_and_stay_changed() {
        let (a, b, c) = (graph(64, 10), graph(50, 10), graph(50, 12));
        assert_eq!(number_of(&a, Leaf::Stride { node: 0, dim: 0 }), 11);
        assert_eq!(number_of(&a, Leaf::Extent { node: 0 }), 64 * 11);
        let identity: Vec<usize> = (0..a.nodes.len()).collect();
        let none = ChangingSizes::none();
        let rows = ChangingSizes::at((&b, &b, &identity), before(&a, &identity, &none), &[]);
        let listed = changing(&b, &rows);
        assert!(listed.contains(&"n0[0]".to_string()), "{listed:?}");
        assert!(!listed.contains(&"n0[1]".to_string()), "{listed:?}");
        assert!(
            !listed.iter().any(|l| l.starts_with("stride")),
            "{listed:?}"
        );
        // The columns change next; the rows stay changed although 50 is 50.
        let both = ChangingSizes::at((&c, &c, &identity), before(&b, &identity, &rows), &[]);
        let listed = changing(&c, &both);
        for leaf in ["n0[0]", "n0[1]", "stride(n0)[0]"] {
            assert!(listed.contains(&leaf.to_string()), "{leaf}: {listed:?}");
        }
        // Every listed number has a value, and nothing changes against
        // itself.
        let same = ChangingSizes::at((&c, &c, &identity), before(&c, &identity, &none), &[]);
        assert_eq!(same.len(), 0);
    }

    #[test]
    fn multiples_of_a_marked_size_change_at_the_first_sizes() {
        let key = graph(64, 10);
        let identity: Vec<usize> = (0..key.nodes.len()).collect();
        let marked = ChangingSizes::at((&key, &key, &identity), None, &[64]);
        let listed = changing(&key, &marked);
        assert!(listed.contains(&"n0[0]".to_string()), "{listed:?}");
        assert!(
            listed.contains(&"extent(n0)".to_string()),
            "640: {listed:?}"
        );
        assert!(!listed.contains(&"n0[1]".to_string()), "{listed:?}");
        assert_eq!(
            ChangingSizes::at((&key, &key, &identity), None, &[1]).len(),
            0
        );
    }
}
