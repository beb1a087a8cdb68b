//! `Tensor`: a cheap handle to a lazy node, with constructors, ops grouped
//! by family, operator overloads and readback.

mod creation;
mod dims;
mod display;
mod elementwise;
mod movement;
mod overloads;
mod readback;

use std::panic::Location;
use std::sync::{Arc, RwLock};

pub use dims::{IntoDims, IntoShape};
pub use elementwise::{IntoOperand, Operand};

use crate::dtype::DType;
use crate::graph::Node;
use crate::runtime::device::Device;
use crate::shape::numel;

/// A lazy n-dimensional array.
///
/// Cloning is cheap and shares the value. Ops record nodes and return at
/// once; values are computed at [`Device::mark_step`] or when read
/// ([`Tensor::to_vec`]). `Tensor` is `Send + Sync`.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) h: Arc<Handle>,
}

/// What a user's tensor variable refers to. The device keeps a weak
/// reference to every handle, so the handles still alive at a step are
/// exactly the values the program can still read: those are computed and
/// stored, everything else is fused away.
pub(crate) struct Handle {
    pub dev: Device,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// The node holding the value. Behind a lock so that later in-place
    /// ops can rebind the handle to a new node.
    node: RwLock<Arc<Node>>,
}

impl Handle {
    pub fn node(&self) -> Arc<Node> {
        self.node.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Tensor {
    /// Wraps `node` in a new handle registered with `dev`.
    pub(crate) fn from_node(node: Arc<Node>, dev: &Device) -> Tensor {
        let h = Arc::new(Handle {
            dev: dev.clone(),
            shape: node.shape.clone(),
            dtype: node.dtype,
            node: RwLock::new(node),
        });
        dev.register(&h);
        let t = Tensor { h };
        if dev.inner.eager && t.node().is_pending() {
            if let Err(e) = dev.realize(&[t.node()]) {
                panic!(
                    "LAZYWGPU_EAGER: op recorded at {} failed: {e}",
                    t.node().location
                );
            }
        }
        t
    }

    pub(crate) fn node(&self) -> Arc<Node> {
        self.h.node()
    }

    /// The sizes of the dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.h.shape
    }

    /// Alias of [`Tensor::shape`], as in PyTorch.
    pub fn size(&self) -> &[usize] {
        self.shape()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.h.shape.len()
    }

    /// Alias of [`Tensor::rank`].
    pub fn ndim(&self) -> usize {
        self.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.h.shape)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.h.dtype
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> &Device {
        &self.h.dev
    }

    /// Whether the value is still a pending computation (not computed yet).
    pub fn is_pending(&self) -> bool {
        self.node().is_pending()
    }

    /// Where the op that made this value was recorded.
    pub fn location(&self) -> &'static Location<'static> {
        self.node().location
    }
}
