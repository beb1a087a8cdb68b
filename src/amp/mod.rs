//! Automatic mixed precision: an [`autocast`] scope in which matrix
//! products (`matmul`, the layers and convolutions built on it, attention)
//! run in `f16` or `bf16` from `f32` tensors, and a [`GradScaler`] that
//! keeps small `f16` gradients from flushing to zero, as PyTorch's
//! `torch.autocast` and `torch.amp.GradScaler`.
//!
//! Parameters stay `f32` (the master weights): inside the scope a matmul
//! casts its `f32` operands to the scope's dtype, so its product is
//! computed from 16-bit operands with an `f32` accumulator and stored in
//! 16 bits; the cast's gradient brings the weights' gradients back to
//! `f32`. Softmax, log-softmax, layer norm and `logsumexp` of a 16-bit
//! value run in `f32` inside the scope (PyTorch's "float32 list"), and
//! an op mixing 16-bit and `f32` operands promotes to `f32`.
//!
//! ```
//! use lazywgpu::amp::{GradScaler, autocast};
//! use lazywgpu::nn::{self, Module, functional as F};
//! use lazywgpu::optim::{Optimizer, Sgd};
//! use lazywgpu::{DType, Device, Tensor};
//! # fn main() -> lazywgpu::Result<()> {
//! let dev = Device::cpu();
//! let model = nn::Linear::new(16, 4, &dev);
//! let x = Tensor::randn([8, 16], &dev);
//! let labels = Tensor::from_vec(vec![0i32, 1, 2, 3, 0, 1, 2, 3], [8], &dev)?;
//! let mut opt = Sgd::new(model.parameters(), 0.1);
//! let mut scaler = GradScaler::new(); // f16 only: bf16 has f32's range
//!
//! let w = Tensor::randn([16, 4], &dev);
//! assert_eq!(autocast(DType::F16, || x.matmul(&w)).dtype(), DType::F16);
//! // The layer's product runs in f16; adding its f32 bias promotes to f32.
//! let logits = autocast(DType::F16, || model.forward(&x));
//! assert_eq!(logits.dtype(), DType::F32);
//! let loss = F::cross_entropy(&logits, &labels);
//! assert_eq!(loss.dtype(), DType::F32);
//! scaler.scale(&loss).backward();
//! scaler.step(&mut opt)?; // skipped, and the scale halved, if a gradient overflowed
//! scaler.update();
//! opt.zero_grad();
//! dev.mark_step()?;
//! assert_eq!(model.parameters()[0].dtype(), DType::F32); // master weights stay f32
//! assert_eq!(scaler.skipped_steps(), 0);
//! # Ok(()) }
//! ```

mod scaler;

pub use scaler::GradScaler;

use std::cell::Cell;

use crate::dtype::DType;

thread_local! {
    static AUTOCAST: Cell<Option<DType>> = const { Cell::new(None) };
}

/// The dtype matrix products are cast to on this thread now, if inside an
/// [`autocast`] scope.
pub fn autocast_dtype() -> Option<DType> {
    AUTOCAST.with(Cell::get)
}

/// Makes matrix products on this thread run in `dtype` until dropped
/// (then restores what was there before). `None` turns autocast off
/// inside an outer scope.
pub struct AutocastGuard {
    previous: Option<DType>,
}

impl AutocastGuard {
    /// Enters autocast to `dtype` (`F16` or `BF16`; `None`: off).
    ///
    /// # Panics
    /// If `dtype` is not a 16-bit float.
    #[track_caller]
    pub fn new(dtype: Option<DType>) -> AutocastGuard {
        if let Some(d) = dtype
            && !d.is_half()
        {
            panic!(
                "autocast: casts to f16 or bf16, got {d} at {}",
                std::panic::Location::caller()
            );
        }
        let previous = AUTOCAST.with(|a| a.replace(dtype));
        AutocastGuard { previous }
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        AUTOCAST.with(|a| a.set(self.previous));
    }
}

/// Runs `f` with matrix products in `dtype` (`F16` or `BF16`); see the
/// module documentation for what else changes inside.
#[track_caller]
pub fn autocast<T>(dtype: DType, f: impl FnOnce() -> T) -> T {
    let _guard = AutocastGuard::new(Some(dtype));
    f()
}

/// The dtype of the result of an `f32`-list op (softmax, layer norm,
/// reductions computed in f32) on a value of `dtype`: `dtype` itself for
/// a float, except a 16-bit one inside an autocast scope; `f32` for
/// integers and booleans.
pub(crate) fn float32_list(dtype: DType) -> DType {
    if !dtype.is_float() || (autocast_dtype().is_some() && dtype.is_half()) {
        DType::F32
    } else {
        dtype
    }
}

/// The dtype a matmul of float operands `a` and `b` runs in inside an
/// autocast scope (`None` outside one, or for non-float operands).
pub(crate) fn matmul_dtype(a: DType, b: DType) -> Option<DType> {
    autocast_dtype().filter(|_| a.is_float() && b.is_float())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore() {
        assert_eq!(autocast_dtype(), None);
        autocast(DType::F16, || {
            assert_eq!(matmul_dtype(DType::F32, DType::F32), Some(DType::F16));
            assert_eq!(matmul_dtype(DType::I32, DType::F32), None);
            assert_eq!(float32_list(DType::F16), DType::F32);
            assert_eq!(float32_list(DType::I32), DType::F32);
            autocast(DType::BF16, || {
                assert_eq!(autocast_dtype(), Some(DType::BF16))
            });
            {
                let _off = AutocastGuard::new(None);
                assert_eq!(autocast_dtype(), None);
                assert_eq!(float32_list(DType::F16), DType::F16);
            }
            assert_eq!(autocast_dtype(), Some(DType::F16));
        });
        assert_eq!(autocast_dtype(), None);
    }

    #[test]
    #[should_panic(expected = "autocast: casts to f16 or bf16, got f32")]
    fn autocast_to_f32_is_refused() {
        autocast(DType::F32, || ());
    }
}
