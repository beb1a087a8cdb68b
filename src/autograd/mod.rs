//! Reverse-mode automatic differentiation over lazy tensors.
//!
//! Every differentiable op that sees an input requiring a gradient records
//! a [`GradFn`]: the edges to its inputs' own grad functions (or to the
//! leaf handles that accumulate gradients) and a closure that maps the
//! output's gradient to its inputs' gradients. [`Tensor::backward`] walks
//! these in reverse topological order. The closures use ordinary tensor
//! ops, so gradients are lazy nodes like any other: forward, backward and
//! the optimiser's update land in one graph and fuse together.
//!
//! After `backward` the closures (and the tensors they saved) are dropped,
//! as PyTorch frees its saved tensors, so a kept `loss` handle does not keep
//! the forward activations alive across `mark_step`.

mod checkpoint;
pub(crate) mod conv;
mod grad_mode;
pub(crate) mod rules;

use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

pub use checkpoint::checkpoint;
pub use grad_mode::{NoGradGuard, is_grad_enabled, no_grad};

use crate::tensor::{Handle, Tensor};

/// A backward closure: the output's gradient to one gradient per input
/// (`None` where the input gets nothing, e.g. an index operand).
type BackwardFn = Box<dyn Fn(&Tensor) -> Vec<Option<Tensor>> + Send + Sync>;

/// The autograd record of one op's output.
pub(crate) struct GradFn {
    name: &'static str,
    /// The dtype of the op's output: the gradient passed in is cast to
    /// it (a gradient from an f32 consumer of an f16 value), as
    /// PyTorch's engine does.
    out_dtype: crate::DType,
    location: &'static Location<'static>,
    /// One edge per input, in the order the closure returns gradients.
    edges: Vec<Option<Edge>>,
    /// Dropped after the first `backward` that runs it.
    backward: Mutex<Option<BackwardFn>>,
}

impl Drop for GradFn {
    /// Drops the chain of grad functions behind this one without
    /// recursion: a trace of thousands of recorded ops would otherwise
    /// overflow the stack in `Arc<GradFn>`'s destructor.
    fn drop(&mut self) {
        let mut stack: Vec<Arc<GradFn>> = take_fn_edges(&mut self.edges);
        while let Some(f) = stack.pop() {
            if let Ok(mut inner) = Arc::try_unwrap(f) {
                stack.extend(take_fn_edges(&mut inner.edges));
                // `inner` drops here with no grad-function edges left.
            }
        }
    }
}

/// Moves the grad-function edges out of `edges` (leaf edges stay).
fn take_fn_edges(edges: &mut [Option<Edge>]) -> Vec<Arc<GradFn>> {
    edges
        .iter_mut()
        .filter_map(|e| match e.take() {
            Some(Edge::Fn(f)) => Some(f),
            other => {
                *e = other;
                None
            }
        })
        .collect()
}

/// Where an input's gradient goes.
enum Edge {
    /// Into another op's grad function.
    Fn(Arc<GradFn>),
    /// Accumulated into a leaf tensor's `.grad()`.
    Leaf(Arc<Handle>),
}

/// Per-handle autograd state.
#[derive(Default)]
pub(crate) struct GradState {
    /// The op that made this value (`None` for leaves).
    pub grad_fn: Option<Arc<GradFn>>,
    /// The accumulated gradient of a leaf that requires grad.
    pub grad: Option<Tensor>,
}

/// A value saved for backward: a fresh handle to the node `t` holds now.
/// The IR is functional, so a later in-place write to `t` rebinds `t` to a
/// new node and leaves this one as it was: the gradient uses the values of
/// the forward pass, and no "modified by an in-place operation" error is
/// needed. (A handle to the node, not to `t`, also keeps an op's output
/// from owning itself through its grad function.)
pub(crate) fn save(t: &Tensor) -> Tensor {
    Tensor::from_node(t.node(), t.device())
}

/// Whether an op on `inputs` must record a grad function.
pub(crate) fn wants(inputs: &[&Tensor]) -> bool {
    is_grad_enabled() && inputs.iter().any(|t| t.requires_grad())
}

/// Records `backward` as the grad function of `out` (unless `out` is not a
/// float). `backward` returns one gradient per input, in order. Callers
/// check [`wants`] first, before saving anything for the closure.
#[track_caller]
pub(crate) fn record(
    name: &'static str,
    out: &Tensor,
    inputs: &[&Tensor],
    backward: impl Fn(&Tensor) -> Vec<Option<Tensor>> + Send + Sync + 'static,
) {
    debug_assert!(
        wants(inputs),
        "record called without an input requiring grad"
    );
    if !out.dtype().is_float() {
        return;
    }
    let edges = inputs.iter().map(|t| edge_of(t)).collect();
    let f = Arc::new(GradFn {
        // A composite op's nodes carry its name (`graph::record_as`).
        name: out.node().user_op.unwrap_or(name),
        out_dtype: out.dtype(),
        location: Location::caller(),
        edges,
        backward: Mutex::new(Some(Box::new(backward))),
    });
    let h = &out.h;
    h.grad_state().grad_fn = Some(f);
    h.requires_grad.store(true, Ordering::Relaxed);
}

fn edge_of(t: &Tensor) -> Option<Edge> {
    if !t.requires_grad() {
        return None;
    }
    match &t.h.grad_state().grad_fn {
        Some(f) => Some(Edge::Fn(f.clone())),
        None => Some(Edge::Leaf(t.h.clone())),
    }
}

/// `a + b` where either may be absent.
fn accumulate(acc: Option<Tensor>, g: Tensor) -> Tensor {
    match acc {
        None => g,
        Some(a) => a + g,
    }
}

/// How many edges point at each grad function reached from `root_fn`,
/// by its address.
fn consumer_counts(root_fn: &Arc<GradFn>) -> HashMap<usize, usize> {
    let key = |f: &Arc<GradFn>| Arc::as_ptr(f) as usize;
    let mut pending: HashMap<usize, usize> = HashMap::new();
    let mut stack = vec![root_fn.clone()];
    while let Some(f) = stack.pop() {
        for e in f.edges.iter().flatten() {
            if let Edge::Fn(p) = e {
                let count = pending.entry(key(p)).or_insert(0);
                *count += 1;
                if *count == 1 {
                    stack.push(p.clone()); // first edge into it: visit once
                }
            }
        }
    }
    pending
}

/// Runs `f`'s backward rule on its output's gradient `g` (cast to the
/// output's dtype), freeing it unless `retain_graph`; the gradient's
/// nodes carry the forward op's source line and name.
fn apply(f: &GradFn, g: Tensor, retain_graph: bool) -> Vec<Option<Tensor>> {
    let mut slot = f.backward.lock().unwrap_or_else(|e| e.into_inner());
    let Some(closure) = slot.as_ref() else {
        panic!(
            "backward: the graph through {} (recorded at {}) was already freed by an earlier backward(); call backward_retain_graph() the first time to run it twice",
            f.name, f.location
        );
    };
    let _attributed = crate::graph::attribute_to(f.location);
    let _named = crate::graph::record_as(f.name);
    let g = if g.dtype() == f.out_dtype {
        g
    } else {
        g.cast(f.out_dtype)
    };
    let out = closure(&g);
    if !retain_graph {
        *slot = None;
    }
    out
}

/// Runs backward from `root` with `seed` as its gradient.
#[track_caller]
pub(crate) fn run_backward(root: &Tensor, seed: Tensor, retain_graph: bool) {
    let loc = Location::caller();
    let _guard = NoGradGuard::new();
    let root_fn = match edge_of(root) {
        None => panic!(
            "backward: the tensor of shape {:?} does not require grad (no input of the ops that made it requires grad, or it was made under no_grad) at {loc}",
            root.shape()
        ),
        Some(Edge::Leaf(h)) => {
            deposit(&h, seed);
            return;
        }
        Some(Edge::Fn(f)) => f,
    };
    let key = |f: &Arc<GradFn>| Arc::as_ptr(f) as usize;
    let mut pending = consumer_counts(&root_fn);
    // Kahn's order: a function runs once every consumer has sent its part.
    let mut grads: HashMap<usize, Tensor> = HashMap::new();
    grads.insert(key(&root_fn), seed);
    let mut ready = vec![root_fn];
    while let Some(f) = ready.pop() {
        let Some(g) = grads.remove(&key(&f)) else {
            continue;
        };
        let input_grads = apply(&f, g, retain_graph);
        assert_eq!(
            input_grads.len(),
            f.edges.len(),
            "backward rule of {} returned the wrong number of gradients",
            f.name
        );
        for (edge, ig) in f.edges.iter().zip(input_grads) {
            let Some(edge) = edge else { continue };
            match edge {
                Edge::Leaf(h) => {
                    if let Some(ig) = ig {
                        deposit(h, ig);
                    }
                }
                Edge::Fn(p) => {
                    let k = key(p);
                    if let Some(ig) = ig {
                        let acc = grads.remove(&k);
                        grads.insert(k, accumulate(acc, ig));
                    }
                    let left = pending.get_mut(&k).expect("counted above");
                    *left -= 1;
                    if *left == 0 {
                        ready.push(p.clone());
                    }
                }
            }
        }
    }
}

/// Adds `g` to a leaf's accumulated gradient.
fn deposit(h: &Arc<Handle>, g: Tensor) {
    let g = if g.dtype() == h.dtype() {
        g
    } else {
        g.cast(h.dtype())
    };
    let mut st = h.grad_state();
    let old = st.grad.take();
    st.grad = Some(accumulate(old, g));
}

impl Tensor {
    /// Whether gradients flow to this tensor: a leaf marked with
    /// [`Tensor::requires_grad_`], or the result of an op with such an input
    /// recorded while grad mode was on.
    pub fn requires_grad(&self) -> bool {
        self.h.requires_grad.load(Ordering::Relaxed)
    }

    /// Marks a leaf tensor as requiring a gradient (or not). Only float
    /// tensors can; a non-leaf (the result of a recorded op) panics, as in
    /// PyTorch: use [`Tensor::detach`] first. Returns `self`.
    #[track_caller]
    pub fn requires_grad_(&self, on: bool) -> &Tensor {
        let loc = Location::caller();
        if on && !self.dtype().is_float() {
            panic!(
                "requires_grad_: only float tensors can require gradients, got {} (shape {:?}) at {loc}",
                self.dtype(),
                self.shape()
            );
        }
        if self.h.grad_state().grad_fn.is_some() {
            panic!(
                "requires_grad_: the tensor of shape {:?} is the result of an op (not a leaf); use .detach() to make a leaf, at {loc}",
                self.shape()
            );
        }
        self.h.requires_grad.store(on, Ordering::Relaxed);
        self
    }

    /// The gradient accumulated into this leaf by [`Tensor::backward`], if
    /// any (a lazy tensor like any other).
    pub fn grad(&self) -> Option<Tensor> {
        self.h.grad_state().grad.clone()
    }

    /// Replaces the accumulated gradient (`None` clears it).
    pub fn set_grad(&self, grad: Option<Tensor>) {
        self.h.grad_state().grad = grad;
    }

    /// Clears the accumulated gradient, as PyTorch's
    /// `zero_grad(set_to_none=True)`: the next backward writes a fresh one
    /// instead of adding to zeros.
    pub fn zero_grad(&self) {
        self.set_grad(None);
    }

    /// Whether this tensor is a leaf of the autograd graph (no grad
    /// function: made by the user, or under `no_grad`, or detached).
    pub fn is_leaf(&self) -> bool {
        self.h.grad_state().grad_fn.is_none()
    }

    /// The name of the op whose backward rule produces this tensor's
    /// gradient (`None` for leaves), as PyTorch's `grad_fn`.
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.h.grad_state().grad_fn.as_ref().map(|f| f.name)
    }

    /// A handle to the same value (aliasing it, like a view) that is cut
    /// from the autograd graph.
    #[track_caller]
    pub fn detach(&self) -> Tensor {
        self.make_view(
            self.shape().to_vec(),
            self.layout_in_base(),
            Location::caller(),
        )
    }

    /// Computes the gradient of this scalar (one-element) tensor with
    /// respect to every leaf that requires grad, adding it to their
    /// [`Tensor::grad`]. The gradients are lazy: nothing runs until the
    /// next `mark_step` or read. The recorded graph is freed afterwards.
    #[track_caller]
    pub fn backward(&self) {
        self.backward_impl(None, false);
    }

    /// [`Tensor::backward`] that keeps the recorded graph, so that it can
    /// run again (PyTorch's `retain_graph=True`).
    #[track_caller]
    pub fn backward_retain_graph(&self) {
        self.backward_impl(None, true);
    }

    /// Backward from a non-scalar tensor with an explicit output gradient
    /// `grad` of the same shape (PyTorch's `backward(gradient)`).
    #[track_caller]
    pub fn backward_with(&self, grad: &Tensor) {
        self.backward_impl(Some(grad), false);
    }

    #[track_caller]
    fn backward_impl(&self, grad: Option<&Tensor>, retain_graph: bool) {
        let loc = Location::caller();
        let seed = match grad {
            Some(g) => {
                if g.shape() != self.shape() {
                    panic!(
                        "backward: gradient shape {:?} does not match the tensor's shape {:?} at {loc}",
                        g.shape(),
                        self.shape()
                    );
                }
                g.detach().cast(self.dtype())
            }
            None => {
                if self.numel() != 1 {
                    panic!(
                        "backward: needs a one-element tensor (or backward_with a gradient), got shape {:?} at {loc}",
                        self.shape()
                    );
                }
                Tensor::ones(self.shape().to_vec(), self.device()).cast(self.dtype())
            }
        };
        run_backward(self, seed, retain_graph);
    }
}

/// Panics if an in-place op would break the autograd graph: writing to a
/// tensor that requires grad, or writing a value that requires grad into
/// one, while grad mode is on (PyTorch raises for leaves; here in-place
/// ops are never differentiated, so this applies to every such write).
#[track_caller]
pub(crate) fn check_inplace(target: &Tensor, value_requires_grad: bool, op: &str) {
    if is_grad_enabled() && (target.requires_grad() || value_requires_grad) {
        panic!(
            "{op}: in-place ops are not differentiated, and the tensor of shape {:?} or the value written requires grad; update parameters inside lazywgpu::no_grad (optimisers do), or use the out-of-place op, at {}",
            target.shape(),
            Location::caller()
        );
    }
}
