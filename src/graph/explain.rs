//! Why a graph was compiled again: what differs from the last graph
//! compiled for the same trace site, in words, and the node (with its
//! source line) where it does, for the recompile warning and
//! `Error::RecompileBudget`.

use std::collections::HashSet;

use super::{GKind, GraphKey};
use crate::dtype::DType;

/// What a recompilation changed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Recompile {
    /// Not counted as a recompile: the site's second graph without a
    /// value of a new shape or dtype (the first step stored what the
    /// second reads: a model's initial parameters, replaced by their first
    /// update; an optimiser's zero moments), values that were computations
    /// last time stored now (the graph lost nodes and gained inputs), or
    /// a mode of the device switched (fusion, anomaly checks).
    pub warm_up: bool,
    /// The node where the change shows, if one does.
    pub node: Option<usize>,
    /// The change, in words.
    pub change: String,
}

impl GraphKey {
    /// Explains why `self` needed a compile when `before` was the last
    /// graph of the same trace site. A value of a shape or dtype that
    /// `before` never had (a new batch size) is named first, since the
    /// first structural difference is often only that initial values were
    /// stored in between. `first_recompile`: the site compiled one graph
    /// so far, so this is its second step, where values made in the first
    /// are stored (see `Recompile::warm_up`).
    pub fn explain_recompile(&self, before: &GraphKey, first_recompile: bool) -> Recompile {
        if self.fused != before.fused || self.checked != before.checked {
            let (node, change) = self.first_difference(before);
            return Recompile {
                warm_up: true,
                node,
                change,
            };
        }
        let seen: HashSet<(&[usize], DType)> = before
            .nodes
            .iter()
            .map(|n| (n.shape.as_slice(), n.dtype))
            .collect();
        let new_value = self
            .nodes
            .iter()
            .position(|n| !seen.contains(&(n.shape.as_slice(), n.dtype)));
        if let Some(i) = new_value {
            let node = &self.nodes[i];
            let had = before.nodes.get(i).map_or(String::new(), |b| {
                format!(
                    " (node {i} of the last graph had {:?} {})",
                    b.shape, b.dtype
                )
            });
            return Recompile {
                warm_up: false,
                node: Some(i),
                change: format!(
                    "{}: a value of shape {:?} {} that the last graph did not have{had}",
                    describe(self, i),
                    node.shape,
                    node.dtype
                ),
            };
        }
        let (node, change) = self.first_difference(before);
        let inputs = |k: &GraphKey| {
            k.nodes
                .iter()
                .filter(|n| matches!(n.kind, GKind::Input { .. }))
                .count()
        };
        // The second graph of a site without a new value differs from the
        // first only in what the first step stored (parameters replaced by
        // their first update, an optimiser's zero moments stored one by
        // one): once a site, never again, so a structure that keeps
        // changing is still warned about and counted.
        let stored_since = self.nodes.len() < before.nodes.len() && inputs(self) > inputs(before);
        Recompile {
            warm_up: first_recompile || stored_since,
            node,
            change,
        }
    }

    /// The first way `self` differs from `before`, in words, and the node
    /// where it does (if one does), for the warning that explains a
    /// recompilation.
    fn first_difference(&self, before: &GraphKey) -> (Option<usize>, String) {
        let (node, what) = self.first_node_difference(before);
        let prefix = self.nodes.len().min(before.nodes.len());
        if self.nodes.len() == before.nodes.len() || node.is_none_or(|n| n >= prefix) {
            // The counts are the difference itself, already said.
            return (node, what);
        }
        let sizes = format!(
            "{} nodes instead of {}",
            self.nodes.len(),
            before.nodes.len()
        );
        (node, format!("{sizes}; first difference: {what}"))
    }

    /// `first_difference`, without the node counts.
    fn first_node_difference(&self, before: &GraphKey) -> (Option<usize>, String) {
        let switched = |on: bool| if on { "on" } else { "off" };
        if self.checked != before.checked {
            return (
                None,
                format!("anomaly checks switched {}", switched(self.checked)),
            );
        }
        if self.fused != before.fused {
            return (None, format!("fusion switched {}", switched(self.fused)));
        }
        for i in 0..self.nodes.len().min(before.nodes.len()) {
            if let Some(what) = self.node_difference(before, i) {
                return (Some(i), what);
            }
        }
        if self.nodes.len() != before.nodes.len() {
            // The first node past the shorter graph is where it grew.
            let first_new = (self.nodes.len() > before.nodes.len()).then_some(before.nodes.len());
            return (
                first_new,
                format!(
                    "{} nodes instead of {}",
                    self.nodes.len(),
                    before.nodes.len()
                ),
            );
        }
        if self.outputs != before.outputs {
            return (
                None,
                format!("outputs {:?} instead of {:?}", self.outputs, before.outputs),
            );
        }
        let donation = (&self.donatable, &self.buffer_group);
        let donation_before = (&before.donatable, &before.buffer_group);
        if donation != donation_before {
            return (
                None,
                format!(
                    "inputs whose buffer can be donated (and the inputs on each buffer) changed: {donation_before:?} -> {donation:?}"
                ),
            );
        }
        (None, "no structural difference".to_string())
    }

    /// How node `i` differs from the same node of `before`, if it does.
    fn node_difference(&self, before: &GraphKey, i: usize) -> Option<String> {
        let (a, b) = (&self.nodes[i], &before.nodes[i]);
        // Named only where it differs: most nodes do not.
        let what = || describe(self, i);
        if a.shape != b.shape {
            return Some(format!("{}: shape {:?} -> {:?}", what(), b.shape, a.shape));
        }
        if a.dtype != b.dtype {
            return Some(format!("{}: dtype {} -> {}", what(), b.dtype, a.dtype));
        }
        match (&a.kind, &b.kind) {
            (GKind::Input { layout: la, .. }, GKind::Input { layout: lb, .. }) if la != lb => {
                return Some(format!("{}: layout {lb:?} -> {la:?}", what()));
            }
            (GKind::Op { op: oa, .. }, GKind::Op { op: ob, .. }) if oa != ob => {
                return Some(format!("node {i}: op {} -> {}", ob.name(), oa.name()));
            }
            (GKind::Input { .. }, GKind::Op { .. }) | (GKind::Op { .. }, GKind::Input { .. }) => {
                return Some(format!(
                    "node {i}: stored data and a computation swapped places"
                ));
            }
            _ => {}
        }
        (a.inputs != b.inputs).then(|| {
            format!(
                "{}: reads nodes {:?} instead of {:?}",
                what(),
                a.inputs,
                b.inputs
            )
        })
    }
}

/// `input 3 (node 5)` or `node 5 (matmul)`.
fn describe(key: &GraphKey, i: usize) -> String {
    match &key.nodes[i].kind {
        GKind::Input { slot, .. } => format!("input {slot} (node {i})"),
        GKind::Op { op, .. } => format!("node {i} ({})", op.name()),
    }
}
