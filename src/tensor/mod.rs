//! `Tensor`: a cheap handle to a lazy node, with constructors, ops grouped
//! by family, operator overloads and readback.

mod activation;
mod attention;
mod creation;
mod dims;
mod display;
mod elementwise;
mod indexing;
mod inplace;
mod live;
mod logical;
mod masks;
mod movement;
mod norm;
mod overloads;
mod pieces;
mod readback;
mod reduce;
mod sampling;
mod scan;
mod sort;
mod spatial;

use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use attention::FUSED_ATTENTION_MAX_EV;
pub use dims::{IntoDims, IntoShape};
pub(crate) use elementwise::convert_scalar;
pub use elementwise::{IntoOperand, Operand};
pub(crate) use live::LiveTensors;
pub use spatial::InterpolateMode;

use crate::autograd::GradState;
use crate::dtype::DType;
use crate::graph::Node;
use crate::graph::op::Op;
use crate::runtime::device::Device;
use crate::runtime::storage::Storage;
use crate::shape::Layout;
use crate::shape::numel;

/// A lazy n-dimensional array.
///
/// Ops record nodes and return at once; values are computed at
/// [`Device::mark_step`] or when read ([`Tensor::to_vec`]). `Tensor` is
/// `Send + Sync`.
///
/// ## Aliasing and in-place ops
/// A `Tensor` is a handle, like a Python variable holding a `torch.Tensor`:
/// `Clone` gives a second handle to the *same* tensor (cheap, and an
/// in-place op through either is seen through both). Views (`slice`,
/// `select`, `transpose`, `reshape`, ...) alias their base as in PyTorch:
/// writing through a view changes the base and every other view of it, also
/// across [`Device::mark_step`]. In-place ops therefore take `&self`
/// (interior mutability): Rust's `&mut` cannot express that a view and its
/// base are the same memory, and a `&mut` requirement would forbid the
/// aliasing that PyTorch programs rely on. For an independent copy, use
/// [`Tensor::deep_clone`].
///
/// ```
/// use lazywgpu::{DType, Device, Tensor};
/// # fn main() -> lazywgpu::Result<()> {
/// let dev = Device::cpu(); // or Device::default(): the GPU where there is one
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &dev)?;
/// let bias = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], [3], &dev)?;
/// // Broadcasting as in NumPy and PyTorch; nothing runs until a read.
/// let y = (&x + &bias).relu();
/// assert_eq!(y.sum([1], false).to_vec::<f32>()?, vec![66.0, 75.0]);
/// assert_eq!(x.matmul(&x.t()).shape(), &[2, 2]);
///
/// // A view aliases its base: writing through it changes `x`.
/// let second_row = x.select(0, 1);
/// second_row.mul_(10.0);
/// assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 40.0, 50.0, 60.0]);
///
/// // `clone` is a second handle on the same tensor, `deep_clone` a copy.
/// let handle = x.clone();
/// let copy = x.deep_clone();
/// x.fill_(0.0f32);
/// assert_eq!(handle.max_all().item::<f32>()?, 0.0);
/// assert_eq!(copy.max_all().item::<f32>()?, 60.0);
///
/// // Integer tensors are i32 (PyTorch's int64 has no WGSL type).
/// let ids = Tensor::arange(0, 3, 1, &dev);
/// assert_eq!(ids.dtype(), DType::I32);
/// assert_eq!(ids.cast(DType::F32).mean_all().item::<f32>()?, 1.0);
/// # Ok(()) }
/// ```
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
    /// The dtype's index (`DType::index`): a base changes it when a
    /// module is converted as a whole (`Tensor::set_dtype_`).
    dtype: AtomicU8,
    /// Whether this handle is a base or a view of one.
    pub alias: Alias,
    /// For a base: its current value and version (bumped by every in-place
    /// write). For a view: the value last derived from the base, and the
    /// base version it was derived at.
    state: Mutex<Value>,
    /// Whether gradients flow to this value (a leaf marked by the user, or
    /// an op's result with a grad function). Atomic so that every op can
    /// check its inputs without taking a lock.
    pub requires_grad: AtomicBool,
    /// Grad function or accumulated leaf gradient.
    grad: Mutex<GradState>,
}

/// A handle's place in an aliasing family.
pub(crate) enum Alias {
    /// Owns its value.
    Base,
    /// Reads (and writes through to) a strided window of a base's
    /// row-major elements.
    View {
        base: Arc<Handle>,
        layout: Layout,
        /// False for views with broadcast (stride-0) dims, as in PyTorch.
        writable: bool,
    },
}

#[derive(Clone)]
struct Value {
    node: Arc<Node>,
    version: u64,
}

impl Handle {
    /// The handle's dtype.
    pub(crate) fn dtype(&self) -> DType {
        DType::from_index(self.dtype.load(Ordering::Relaxed))
    }

    fn value(&self) -> std::sync::MutexGuard<'_, Value> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The autograd state (grad function, leaf gradient).
    pub(crate) fn grad_state(&self) -> std::sync::MutexGuard<'_, GradState> {
        self.grad.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node holding the current value. A view re-derives itself from
    /// its base when the base has been written since (functionalization),
    /// or when the base has been computed since, so that the view becomes
    /// a window on the stored data instead of a pending gather.
    pub fn node(&self) -> Arc<Node> {
        match &self.alias {
            Alias::Base => self.value().node.clone(),
            Alias::View { base, layout, .. } => {
                let (bnode, bversion) = {
                    let b = base.value();
                    (b.node.clone(), b.version)
                };
                if bnode.dtype != self.dtype() {
                    panic!(
                        "a view of shape {:?} ({}) was taken before its base became {} (set_dtype_, to_dtype): take the view again",
                        self.shape,
                        self.dtype(),
                        bnode.dtype
                    );
                }
                let mut v = self.value();
                let stale = v.version != bversion || (v.node.is_pending() && !bnode.is_pending());
                if stale {
                    let fresh = as_strided_node(&bnode, &self.shape, layout, bnode.location);
                    // A size marked dynamic on the view stays marked.
                    fresh.inherit_marks(&v.node);
                    v.node = fresh;
                    v.version = bversion;
                }
                v.node.clone()
            }
        }
    }

    /// The base's version counter (bumped by every in-place write to the
    /// base or any of its views).
    pub fn version(&self) -> u64 {
        match &self.alias {
            Alias::Base => self.value().version,
            Alias::View { base, .. } => base.version(),
        }
    }

    /// Whether this handle owns its value (a base, not a view).
    pub fn is_base(&self) -> bool {
        matches!(self.alias, Alias::Base)
    }

    /// For a view of a base: the base's node and the view's window on
    /// its row-major elements; `None` for a base. Reading the base and
    /// gathering the window on the host reads the value without making
    /// its layout a value of its own on the device.
    pub fn base_window(&self) -> Option<(Arc<Node>, Layout)> {
        match &self.alias {
            Alias::View { base, layout, .. } if base.is_base() => {
                Some((base.node(), layout.clone()))
            }
            _ => None,
        }
    }

    /// Binds the handle to a new value (an in-place op). A view writes the
    /// new values into its base as a scatter node, so the base, and every
    /// other view of it, sees them.
    #[track_caller]
    pub fn assign(&self, new: Arc<Node>, op: &str) {
        match &self.alias {
            Alias::Base => {
                let mut v = self.value();
                // A size marked dynamic stays marked across in-place ops.
                new.inherit_marks(&v.node);
                v.node = new;
                v.version += 1;
            }
            Alias::View {
                base,
                layout,
                writable,
            } => {
                if !writable {
                    panic!(
                        "{op}: cannot write through an expanded (broadcast) view of shape {:?} ({}) at {}",
                        self.shape,
                        DType::from_index(self.dtype.load(Ordering::Relaxed)),
                        Location::caller()
                    );
                }
                let bnode = base.value().node.clone();
                let scattered = Node::pending(
                    Op::StridedScatter(layout.clone()),
                    vec![bnode.clone(), new.clone()],
                    Vec::new(),
                    bnode.shape.clone(),
                    bnode.dtype,
                    Location::caller(),
                );
                base.assign(scattered, op);
                let mut v = self.value();
                new.inherit_marks(&v.node);
                v.node = new;
                v.version = base.version();
            }
        }
    }
}

/// The node of a strided window (`shape`, `layout`) of `base`'s row-major
/// elements: `base` itself for the identity, a window on stored data when
/// `base` is stored row-major, else a pending `AsStrided` node.
pub(crate) fn as_strided_node(
    base: &Arc<Node>,
    shape: &[usize],
    layout: &Layout,
    loc: &'static Location<'static>,
) -> Arc<Node> {
    if layout.is_contiguous(shape) && numel(shape) == numel(&base.shape) {
        // The same elements in the same order: a reshape (index-preserving,
        // so it fuses as an epilogue too).
        return movement::reshape_node(base, shape, loc);
    }
    if let Some(storage) = base.storage() {
        if storage.layout.is_row_major(&base.shape) {
            let s = Storage {
                buffer: storage.buffer,
                layout: Layout {
                    strides: layout.strides.clone(),
                    offset: storage.layout.offset + layout.offset,
                },
            };
            let view = Node::ready(s, shape.to_vec(), base.dtype, loc);
            view.inherit_marks(base);
            return view;
        }
    }
    Node::pending(
        Op::AsStrided(layout.clone()),
        vec![base.clone()],
        Vec::new(),
        shape.to_vec(),
        base.dtype,
        loc,
    )
}

impl Tensor {
    /// Whether `self` and `other` are handles to the same tensor (one was
    /// cloned from the other), like Python's `a is b`. Views of one base
    /// are different tensors.
    pub fn ptr_eq(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.h, &other.h)
    }

    /// An identity of the handle, equal exactly for handles that are
    /// [`Tensor::ptr_eq`] while both live (for hashing).
    pub(crate) fn handle_id(&self) -> usize {
        Arc::as_ptr(&self.h) as usize
    }

    /// Wraps `node` in a new base handle registered with `dev`.
    pub(crate) fn from_node(node: Arc<Node>, dev: &Device) -> Tensor {
        let h = Arc::new(Handle {
            dev: dev.clone(),
            shape: node.shape.clone(),
            dtype: AtomicU8::new(node.dtype.index()),
            alias: Alias::Base,
            state: Mutex::new(Value { node, version: 0 }),
            requires_grad: AtomicBool::new(false),
            grad: Mutex::new(GradState::default()),
        });
        Tensor::register(h)
    }

    /// A view of `self`'s base: `layout` is relative to the base's
    /// row-major elements.
    pub(crate) fn make_view(
        &self,
        shape: Vec<usize>,
        layout: Layout,
        loc: &'static Location<'static>,
    ) -> Tensor {
        let base = match &self.h.alias {
            Alias::Base => self.h.clone(),
            Alias::View { base, .. } => base.clone(),
        };
        let writable = shape
            .iter()
            .zip(&layout.strides)
            .all(|(&d, &s)| d <= 1 || s != 0);
        let (bnode, bversion) = {
            let b = base.value();
            (b.node.clone(), b.version)
        };
        let node = as_strided_node(&bnode, &shape, &layout, loc);
        let h = Arc::new(Handle {
            dev: self.h.dev.clone(),
            dtype: AtomicU8::new(self.dtype().index()),
            alias: Alias::View {
                base,
                layout,
                writable,
            },
            state: Mutex::new(Value {
                node,
                version: bversion,
            }),
            requires_grad: AtomicBool::new(false),
            grad: Mutex::new(GradState::default()),
            shape,
        });
        Tensor::register(h)
    }

    /// Where `self`'s elements sit within its base's row-major elements.
    pub(crate) fn layout_in_base(&self) -> Layout {
        match &self.h.alias {
            Alias::Base => Layout::contiguous(&self.h.shape),
            Alias::View { layout, .. } => layout.clone(),
        }
    }

    fn register(h: Arc<Handle>) -> Tensor {
        let dev = h.dev.clone();
        dev.register(&h);
        let t = Tensor { h };
        if dev.config().eager && t.node().is_pending() {
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

    /// Marks dimension `dim` as a size that changes from step to step (a
    /// batch, a sequence length), as `torch._dynamo.mark_dynamic` does:
    /// the graphs that read this value compile their kernels generic over
    /// that size at its first value, so that later sizes bind new values
    /// instead of compiling (without a mark, a trace site does this from
    /// the second size it sees). Sizes 0 and 1 stay specialised. Values
    /// are the same either way; a size that crosses a kernel's threshold
    /// (a strategy valid only below some length) still compiles. The mark
    /// acts at the first compile of a graph's structure at its trace site
    /// (later sizes of a structure compiled unmarked are made generic
    /// from their second size, as without a mark); it stays on the tensor
    /// through in-place ops and on the views taken of it afterwards.
    /// Sizes in the graph that are multiples of the marked size (a width
    /// of 256 beside a batch of 64) are taken for sizes too: their kernels
    /// read them from a uniform where a literal would do. Returns a handle
    /// on the same tensor.
    ///
    /// ```
    /// # use lazywgpu::{Device, Tensor};
    /// let dev = Device::cpu();
    /// let x = Tensor::zeros([64, 784], &dev).mark_dynamic(0);
    /// assert_eq!(x.shape(), &[64, 784]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is not a dimension of the tensor.
    #[track_caller]
    pub fn mark_dynamic(&self, dim: usize) -> Tensor {
        if dim >= self.rank() {
            panic!(
                "mark_dynamic: dim {dim} is out of range for a tensor of shape {:?} ({})",
                self.shape(),
                self.dtype()
            );
        }
        self.node().mark_dynamic(self.shape()[dim]);
        self.clone()
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
        DType::from_index(self.h.dtype.load(Ordering::Relaxed))
    }

    /// Converts the tensor to `dtype` in place, keeping the handle (as
    /// PyTorch's `param.data = param.data.to(dtype)`, which `module.to(dtype)`
    /// does to every floating parameter and buffer): holders of the handle
    /// (a module, an optimiser) see the new dtype. Its gradient, of the
    /// old dtype, is dropped. Views of it taken before keep the old dtype:
    /// take them again. Panics on a view.
    #[track_caller]
    pub fn set_dtype_(&self, dtype: DType) {
        if !self.h.is_base() {
            panic!(
                "set_dtype_: cannot change the dtype of a view (shape {:?}, {}) at {}",
                self.shape(),
                self.dtype(),
                Location::caller()
            );
        }
        if self.dtype() == dtype {
            return;
        }
        let node = elementwise::cast_node(&self.node(), dtype, Location::caller());
        {
            let mut v = self.h.value();
            v.node = node;
            v.version += 1;
        }
        self.h.dtype.store(dtype.index(), Ordering::Relaxed);
        self.set_grad(None);
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
