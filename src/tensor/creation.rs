//! Constructors: from host data, constants, ranges and random numbers.
//! Constants, ranges and random numbers are lazy leaves computed on the
//! device: `zeros` uploads nothing and costs nothing unless it is stored.

use std::panic::Location;

use ndarray::{ArrayBase, Data, Dimension};

use super::elementwise::checked_bits;
use super::{IntoShape, Tensor};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::graph::Node;
use crate::graph::op::Op;
use crate::runtime::device::Device;
use crate::runtime::storage::Storage;
use crate::shape::{Layout, numel};

/// Element types `arange` can count in.
pub trait ArangeElement: Element + PartialOrd {
    /// Number of values in `start, start + step, ..` below `end` (above, for a negative step).
    fn arange_len(start: Self, end: Self, step: Self) -> usize;
}

impl ArangeElement for f32 {
    fn arange_len(start: f32, end: f32, step: f32) -> usize {
        (((end as f64 - start as f64) / step as f64).ceil()).max(0.0) as usize
    }
}

impl ArangeElement for i32 {
    fn arange_len(start: i32, end: i32, step: i32) -> usize {
        let span = end as i64 - start as i64;
        let step = step as i64;
        ((span + step - step.signum()) / step).max(0) as usize
    }
}

impl ArangeElement for u32 {
    fn arange_len(start: u32, end: u32, step: u32) -> usize {
        (end.saturating_sub(start) as usize).div_ceil(step as usize)
    }
}

/// A rank-0 leaf node holding `bits` as a runtime parameter.
pub(crate) fn scalar_node(
    bits: u32,
    dtype: DType,
    loc: &'static Location<'static>,
) -> std::sync::Arc<Node> {
    Node::pending(Op::Scalar, Vec::new(), vec![bits], Vec::new(), dtype, loc)
}

impl Tensor {
    /// A tensor holding `data` (row-major) with shape `shape`.
    ///
    /// Returns [`Error::DataLength`] if `data.len()` is not the product of
    /// `shape`.
    #[track_caller]
    pub fn from_vec<T: Element>(
        data: Vec<T>,
        shape: impl IntoShape,
        dev: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into_shape();
        check_fits(&data, "from_vec")?;
        Tensor::from_bits(
            data.into_iter().map(T::to_bits).collect(),
            shape,
            T::DTYPE,
            "from_vec",
            dev,
        )
    }

    /// A tensor copying a host slice, with shape `shape`.
    #[track_caller]
    pub fn from_slice<T: Element>(
        data: &[T],
        shape: impl IntoShape,
        dev: &Device,
    ) -> Result<Tensor> {
        let shape = shape.into_shape();
        check_fits(data, "from_slice")?;
        Tensor::from_bits(
            data.iter().map(|v| v.to_bits()).collect(),
            shape,
            T::DTYPE,
            "from_slice",
            dev,
        )
    }

    /// A tensor copying an ndarray array (any layout; elements are taken in
    /// logical row-major order).
    #[track_caller]
    pub fn from_ndarray<T: Element, S: Data<Elem = T>, D: Dimension>(
        array: &ArrayBase<S, D>,
        dev: &Device,
    ) -> Result<Tensor> {
        let shape = array.shape().to_vec();
        Tensor::from_bits(
            array.iter().map(|v| v.to_bits()).collect(),
            shape,
            T::DTYPE,
            "from_ndarray",
            dev,
        )
    }

    /// Zeros shaped and typed like `like`, as stored data (uploaded now,
    /// not computed in the next graph): optimiser state, so that the
    /// first step's graph is the same as every later one's.
    #[track_caller]
    pub(crate) fn stored_zeros_like(like: &Tensor) -> Tensor {
        let shape = like.shape().to_vec();
        let bits = vec![0; numel(&shape)];
        Tensor::from_bits(bits, shape, like.dtype(), "optimizer state", like.device())
            .unwrap_or_else(|e| panic!("optimizer state like {:?}: {e}", like.shape()))
    }

    #[track_caller]
    pub(crate) fn from_bits(
        bits: Vec<u32>,
        shape: Vec<usize>,
        dtype: DType,
        op: &'static str,
        dev: &Device,
    ) -> Result<Tensor> {
        let expected = numel(&shape);
        if bits.len() != expected {
            return Err(Error::DataLength {
                op,
                shape,
                expected,
                got: bits.len(),
            });
        }
        let buffer = dev.upload(dtype, bits)?;
        let layout = Layout::contiguous(&shape);
        let node = Node::ready(Storage { buffer, layout }, shape, dtype, Location::caller());
        Ok(Tensor::from_node(node, dev))
    }

    /// A rank-0 tensor holding `value` (a runtime parameter: changing it
    /// between steps does not recompile anything).
    #[track_caller]
    pub fn scalar<T: Element>(value: T, dev: &Device) -> Tensor {
        Tensor::from_node(
            scalar_node(checked_bits(value), T::DTYPE, Location::caller()),
            dev,
        )
    }

    /// A tensor of `shape` filled with `value`; the dtype is `value`'s.
    #[track_caller]
    pub fn full<T: Element>(shape: impl IntoShape, value: T, dev: &Device) -> Tensor {
        let shape = shape.into_shape();
        let loc = Location::caller();
        let node = super::movement::expand_node(
            &scalar_node(checked_bits(value), T::DTYPE, loc),
            &shape,
            loc,
        );
        Tensor::from_node(node, dev)
    }

    /// An `f32` tensor of zeros.
    #[track_caller]
    pub fn zeros(shape: impl IntoShape, dev: &Device) -> Tensor {
        Tensor::full(shape, 0.0f32, dev)
    }

    /// An `f32` tensor of ones.
    #[track_caller]
    pub fn ones(shape: impl IntoShape, dev: &Device) -> Tensor {
        Tensor::full(shape, 1.0f32, dev)
    }

    /// A tensor of zeros of any dtype.
    #[track_caller]
    pub fn zeros_dtype(shape: impl IntoShape, dtype: DType, dev: &Device) -> Tensor {
        Tensor::zeros(shape, dev).cast(dtype)
    }

    /// A tensor of zeros with `self`'s shape, dtype and device.
    #[track_caller]
    pub fn zeros_like(&self) -> Tensor {
        Tensor::zeros_dtype(self.shape(), self.dtype(), self.device())
    }

    /// A tensor of ones with `self`'s shape, dtype and device.
    #[track_caller]
    pub fn ones_like(&self) -> Tensor {
        Tensor::ones(self.shape(), self.device()).cast(self.dtype())
    }

    /// `start, start + step, ..` up to but excluding `end`, as a 1-D tensor
    /// of `T`'s dtype (`arange(0, 5, 1)` is `i32`, `arange(0.0, 1.0, 0.25)` is `f32`).
    #[track_caller]
    pub fn arange<T: ArangeElement>(start: T, end: T, step: T, dev: &Device) -> Tensor {
        let zero = T::from_bits(0);
        assert!(
            step != zero,
            "arange: step must be nonzero (at {})",
            Location::caller()
        );
        let len = T::arange_len(start, end, step);
        let node = Node::pending(
            Op::Arange,
            Vec::new(),
            vec![start.to_bits(), step.to_bits()],
            vec![len],
            T::DTYPE,
            Location::caller(),
        );
        Tensor::from_node(node, dev)
    }

    /// Uniform random `f32` in [0, 1), from the device's seeded generator
    /// (see [`Device::manual_seed`]).
    #[track_caller]
    pub fn rand(shape: impl IntoShape, dev: &Device) -> Tensor {
        Tensor::random(shape.into_shape(), false, dev)
    }

    /// Standard normal random `f32`, from the device's seeded generator.
    #[track_caller]
    pub fn randn(shape: impl IntoShape, dev: &Device) -> Tensor {
        Tensor::random(shape.into_shape(), true, dev)
    }

    #[track_caller]
    fn random(shape: Vec<usize>, normal: bool, dev: &Device) -> Tensor {
        let params = dev.next_rng(numel(&shape)).to_vec();
        let node = Node::pending(
            Op::Rand { normal },
            Vec::new(),
            params,
            shape,
            DType::F32,
            Location::caller(),
        );
        Tensor::from_node(node, dev)
    }
}

/// An error naming the first element of `data` that its 32-bit storage
/// cannot hold (an `i64` outside `i32`'s range).
fn check_fits<T: Element>(data: &[T], op: &'static str) -> Result<()> {
    match data.iter().position(|v| !v.fits()) {
        None => Ok(()),
        Some(index) => Err(crate::error::Error::OutOfRange {
            op,
            dtype: T::DTYPE,
            index,
            value: format!("{:?}", data[index]),
        }),
    }
}
