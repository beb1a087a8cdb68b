//! The tensors a program still holds: the front end's record of every
//! handle made on a device, so that a step computes exactly the values
//! that can still be read (everything else is fused away), and views are
//! re-derived from their stored bases afterwards. The runtime asks this
//! module what to compute; it never walks handles or views itself.

use std::sync::{Arc, Mutex, Weak};

use super::Handle;
use crate::graph::Node;

/// Weak references to every tensor handle made on a device: the tensors
/// the user can still see are exactly the ones that upgrade.
pub(crate) struct LiveTensors {
    inner: Mutex<LiveSet>,
}

struct LiveSet {
    handles: Vec<Weak<Handle>>,
    /// Length at which dead entries are next pruned (amortised: twice
    /// the live count after a prune).
    prune_at: usize,
}

impl LiveTensors {
    pub fn new() -> LiveTensors {
        LiveTensors {
            inner: Mutex::new(LiveSet {
                handles: Vec::new(),
                prune_at: 1024,
            }),
        }
    }

    fn set(&self) -> std::sync::MutexGuard<'_, LiveSet> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a new handle.
    pub fn register(&self, handle: &Arc<Handle>) {
        let mut live = self.set();
        live.handles.push(Arc::downgrade(handle));
        if live.handles.len() >= live.prune_at {
            live.handles.retain(|w| w.strong_count() > 0);
            live.prune_at = (live.handles.len() * 2).max(1024);
        }
    }

    /// The handles still alive.
    pub fn handles(&self) -> Vec<Arc<Handle>> {
        let mut live = self.set();
        live.handles.retain(|w| w.strong_count() > 0);
        live.prune_at = (live.handles.len() * 2).max(1024);
        live.handles.iter().filter_map(Weak::upgrade).collect()
    }

    /// What a step must compute: the pending values of the live bases.
    /// Views are windows on their bases, so only bases are computed; the
    /// returned handles are kept for `after_step`.
    pub fn pending_bases(&self) -> (Vec<Arc<Node>>, Vec<Arc<Handle>>) {
        let live = self.handles();
        let pending = live
            .iter()
            .filter(|h| h.is_base())
            .map(|h| h.node())
            .filter(|n| n.is_pending())
            .collect();
        (pending, live)
    }

    /// After a step: each live view re-derives itself as a window on its
    /// stored base, dropping the pending history it held.
    pub fn after_step(live: &[Arc<Handle>]) {
        for h in live.iter().filter(|h| !h.is_base()) {
            h.node();
        }
    }
}
