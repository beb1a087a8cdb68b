//! Reading values back to the host: the only operations that wait for the
//! device.

use ndarray::{ArrayD, IxDyn};

use super::Tensor;
use crate::dtype::Element;
use crate::error::{Error, Result};

impl Tensor {
    fn check_dtype<T: Element>(&self, op: &'static str) -> Result<()> {
        if self.dtype() != T::DTYPE {
            return Err(Error::DTypeMismatch {
                op,
                actual: self.dtype(),
                requested: T::DTYPE,
            });
        }
        Ok(())
    }

    /// The elements in row-major order, computing what is needed first
    /// (only this tensor's graph runs; other pending tensors stay pending).
    /// `T` must be the tensor's element type.
    pub async fn to_vec_async<T: Element>(&self) -> Result<Vec<T>> {
        self.check_dtype::<T>("to_vec")?;
        let bits = self.device().read_bits(&self.node()).await?;
        Ok(bits.into_iter().map(T::from_bits).collect())
    }

    /// Blocking form of [`Tensor::to_vec_async`].
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        pollster::block_on(self.to_vec_async())
    }

    /// The elements of a float tensor (`f32`, `f16` or `bf16`) in row-major
    /// order, widened to `f32` (exact: every 16-bit float is an `f32`).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        let dtype = self.dtype();
        if !dtype.is_float() {
            return Err(Error::DTypeMismatch {
                op: "to_f32_vec",
                actual: dtype,
                requested: crate::DType::F32,
            });
        }
        let bits = pollster::block_on(self.device().read_bits(&self.node()))?;
        Ok(bits.into_iter().map(|b| dtype.float_from_bits(b)).collect())
    }

    /// The value as an ndarray array of the same shape.
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        let data = self.to_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(self.shape()), data).map_err(|e| Error::Device {
            during: "to_ndarray".into(),
            message: e.to_string(),
        })
    }

    /// The single element of a one-element tensor.
    pub async fn item_async<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::NotScalar(self.shape().to_vec()));
        }
        Ok(self.to_vec_async::<T>().await?[0])
    }

    /// Blocking form of [`Tensor::item_async`].
    pub fn item<T: Element>(&self) -> Result<T> {
        pollster::block_on(self.item_async())
    }
}
