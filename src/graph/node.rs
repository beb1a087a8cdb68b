//! Lazy nodes: what a tensor handle points at.

use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::op::Op;
use crate::dtype::DType;
use crate::runtime::storage::Storage;

static NEXT_NODE_ID: AtomicU64 = AtomicU64::new(1);

/// One value in the trace: either a pending computation or stored data.
///
/// Shape and dtype are fixed at trace time. When the node is computed its
/// state becomes `Ready`, which drops the inputs: history is cut, so a graph
/// never grows from one step to the next.
pub(crate) struct Node {
    pub id: u64,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Where the user's code recorded this node (for errors and dumps).
    pub location: &'static Location<'static>,
    /// The op the user called, where it recorded this node as part of
    /// another (`index_select` records a gather; see `record_as`).
    pub user_op: Option<&'static str>,
    /// Whether `dynamic_sizes` holds any (read without its lock on every
    /// node a graph collects).
    marked: AtomicBool,
    /// Sizes the user marked as changing between steps
    /// (`Tensor::mark_dynamic`) on this node, or on the stored node it is
    /// a view of (a view of a stored value is an input of its own).
    dynamic_sizes: Mutex<Vec<usize>>,
    state: Mutex<NodeState>,
}

/// What a node currently holds.
pub(crate) enum NodeState {
    /// Not computed yet.
    Pending(Pending),
    /// Stored on a device.
    Ready(Storage),
}

/// A recorded computation.
pub(crate) struct Pending {
    pub op: Op,
    pub inputs: Vec<Arc<Node>>,
    /// Runtime values of leaf ops, as 32-bit patterns: a scalar's value,
    /// arange's start and step, rand's seed and counter. They are never part
    /// of the cache key.
    pub params: Vec<u32>,
}

/// What the nodes made on a thread are attributed to, besides their own
/// op and line: while a backward rule runs, the source line of the
/// forward op it differentiates (so that recompile explanations, dumps
/// and anomaly errors name the user's line, not the rule's); while a
/// composite op (or the backward rule of an op) records its nodes, the
/// name of the op the user called (so they name it, not the primitive
/// recorded).
#[derive(Clone, Copy, Default)]
struct Attribution {
    location: Option<&'static Location<'static>>,
    op: Option<&'static str>,
}

thread_local! {
    /// The thread's attribution (one cell: every node made reads it).
    static ATTRIBUTION: std::cell::Cell<Attribution> =
        const { std::cell::Cell::new(Attribution { location: None, op: None }) };
}

/// Changes the thread's attribution with `change` until the returned
/// guard is dropped.
fn attribute(change: impl FnOnce(&mut Attribution)) -> AttributionGuard {
    AttributionGuard(ATTRIBUTION.with(|cell| {
        let before = cell.get();
        let mut now = before;
        change(&mut now);
        cell.set(now);
        before
    }))
}

/// Names `op` as the user-facing op of every node made on this thread
/// until the returned guard is dropped; an op already named by an outer
/// call keeps its name (the op the user called is the outermost).
pub(crate) fn record_as(op: &'static str) -> AttributionGuard {
    attribute(|a| a.op = a.op.or(Some(op)))
}

/// Records `location` on every node made on this thread until the
/// returned guard is dropped (see `Attribution`).
pub(crate) fn attribute_to(location: &'static Location<'static>) -> AttributionGuard {
    attribute(|a| a.location = Some(location))
}

/// Restores the previous attribution when dropped.
pub(crate) struct AttributionGuard(Attribution);

impl Drop for AttributionGuard {
    fn drop(&mut self) {
        ATTRIBUTION.with(|cell| cell.set(self.0));
    }
}

impl Node {
    pub fn pending(
        op: Op,
        inputs: Vec<Arc<Node>>,
        params: Vec<u32>,
        shape: Vec<usize>,
        dtype: DType,
        location: &'static Location<'static>,
    ) -> Arc<Node> {
        let state = NodeState::Pending(Pending { op, inputs, params });
        Node::new(state, shape, dtype, location)
    }

    pub fn ready(
        storage: Storage,
        shape: Vec<usize>,
        dtype: DType,
        location: &'static Location<'static>,
    ) -> Arc<Node> {
        Node::new(NodeState::Ready(storage), shape, dtype, location)
    }

    /// A node in `state`, attributed to `location` unless a gradient is
    /// being recorded for a forward op's line (`attribute_to`).
    fn new(
        state: NodeState,
        shape: Vec<usize>,
        dtype: DType,
        location: &'static Location<'static>,
    ) -> Arc<Node> {
        let attribution = ATTRIBUTION.with(|cell| cell.get());
        Arc::new(Node {
            id: NEXT_NODE_ID.fetch_add(1, Ordering::Relaxed),
            shape,
            dtype,
            location: attribution.location.unwrap_or(location),
            user_op: attribution.op,
            marked: AtomicBool::new(false),
            dynamic_sizes: Mutex::new(Vec::new()),
            state: Mutex::new(state),
        })
    }

    /// Marks `size` as a size that changes between steps (see
    /// `Tensor::mark_dynamic`); sizes 0 and 1 stay specialised.
    pub fn mark_dynamic(&self, size: usize) {
        if size <= 1 {
            return;
        }
        let mut sizes = self.dynamic_sizes.lock().unwrap_or_else(|e| e.into_inner());
        if !sizes.contains(&size) {
            sizes.push(size);
        }
        self.marked.store(true, Ordering::Relaxed);
    }

    /// The sizes marked dynamic on this node (see `mark_dynamic`).
    pub fn dynamic_sizes(&self) -> Vec<usize> {
        if !self.marked.load(Ordering::Relaxed) {
            return Vec::new();
        }
        self.dynamic_sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Gives this node (a view of `base`'s stored value) `base`'s marks.
    pub fn inherit_marks(&self, base: &Node) {
        for size in base.dynamic_sizes() {
            self.mark_dynamic(size);
        }
    }

    pub fn state(&self) -> MutexGuard<'_, NodeState> {
        // A panic while holding this lock cannot leave the state half
        // written (every write is a single assignment), so a poisoned lock
        // is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of a pending scalar node (as its 32-bit pattern), which
    /// is the same at every index of whatever shape it is given.
    pub fn pending_scalar(&self) -> Option<u32> {
        match &*self.state() {
            NodeState::Pending(p) if p.op == Op::Scalar => p.params.first().copied(),
            _ => None,
        }
    }

    /// The stored data, if computed.
    pub fn storage(&self) -> Option<Storage> {
        match &*self.state() {
            NodeState::Ready(s) => Some(s.clone()),
            NodeState::Pending(_) => None,
        }
    }

    pub fn is_pending(&self) -> bool {
        matches!(&*self.state(), NodeState::Pending(_))
    }

    /// Replace the computation by its result, dropping the inputs.
    pub fn set_ready(&self, storage: Storage) {
        let old = std::mem::replace(&mut *self.state(), NodeState::Ready(storage));
        drop_iteratively(old);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let state = std::mem::replace(
            self.state.get_mut().unwrap_or_else(|e| e.into_inner()),
            NodeState::Pending(Pending {
                op: Op::Scalar,
                inputs: Vec::new(),
                params: Vec::new(),
            }),
        );
        drop_iteratively(state);
    }
}

/// Drops a chain of inputs without recursion: a trace of a million chained
/// ops would otherwise overflow the stack in `Arc<Node>`'s destructor.
fn drop_iteratively(state: NodeState) {
    let NodeState::Pending(p) = state else {
        return;
    };
    let mut stack = p.inputs;
    while let Some(node) = stack.pop() {
        if let Ok(mut node) = Arc::try_unwrap(node) {
            if let NodeState::Pending(p) = node.state.get_mut().unwrap_or_else(|e| e.into_inner()) {
                stack.append(&mut p.inputs);
            }
        }
    }
}
