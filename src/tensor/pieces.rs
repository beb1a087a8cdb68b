//! Splitting and repeating (`split`, `chunk`, `repeat_interleave`) and
//! the constructors built on index arithmetic (`eye`, `linspace`,
//! `randint`).

use std::panic::Location;

use super::Tensor;
use super::dims::{IntoShape, resolve_axis};
use crate::dtype::DType;
use crate::runtime::device::Device;

impl Tensor {
    /// Views of `split_size` elements of `axis` each, the last one
    /// shorter when the size does not divide (PyTorch's `split(int)`).
    #[track_caller]
    pub fn split(&self, split_size: usize, axis: isize) -> Vec<Tensor> {
        let d = resolve_axis("split", axis, self.rank());
        let len = self.shape()[d];
        if split_size == 0 && len > 0 {
            panic!(
                "split: split_size must be positive for dim {d} of shape {:?} at {}",
                self.shape(),
                Location::caller()
            );
        }
        if len == 0 {
            return vec![self.clone()];
        }
        (0..len)
            .step_by(split_size)
            .map(|start| self.narrow(axis, start, split_size.min(len - start)))
            .collect()
    }

    /// Views of the listed sizes along `axis`, which must add up to its
    /// length (PyTorch's `split(list)`).
    #[track_caller]
    pub fn split_sizes(&self, sizes: &[usize], axis: isize) -> Vec<Tensor> {
        let d = resolve_axis("split", axis, self.rank());
        let total: usize = sizes.iter().sum();
        if total != self.shape()[d] {
            panic!(
                "split: sizes {sizes:?} add up to {total}, not dim {d} of shape {:?} at {}",
                self.shape(),
                Location::caller()
            );
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|&n| {
                let piece = self.narrow(axis, start, n);
                start += n;
                piece
            })
            .collect()
    }

    /// At most `chunks` views along `axis`, each of `ceil(len / chunks)`
    /// elements but the last (PyTorch's `chunk`, which may return fewer).
    #[track_caller]
    pub fn chunk(&self, chunks: usize, axis: isize) -> Vec<Tensor> {
        let d = resolve_axis("chunk", axis, self.rank());
        if chunks == 0 {
            panic!(
                "chunk: chunks must be positive (shape {:?}) at {}",
                self.shape(),
                Location::caller()
            );
        }
        let len = self.shape()[d];
        self.split(len.div_ceil(chunks).max(1), axis)
    }

    /// Each element repeated `repeats` times along `axis`, next to
    /// itself (PyTorch's `repeat_interleave(repeats, dim)`; `None`
    /// flattens first): a broadcast read, its gradient the sum over the
    /// copies.
    #[track_caller]
    pub fn repeat_interleave(&self, repeats: usize, axis: Option<isize>) -> Tensor {
        let _op = crate::graph::record_as("repeat_interleave");
        let (x, axis) = match axis {
            Some(a) => (self.clone(), a),
            None => (self.flatten(), 0),
        };
        let x = if x.rank() == 0 { x.reshape([1]) } else { x };
        let d = resolve_axis("repeat_interleave", axis, x.rank());
        let mut wide: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
        wide.insert(d + 1, repeats as isize);
        let mut out: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
        out[d] *= repeats as isize;
        x.unsqueeze(d as isize + 1).expand(wide).reshape(out)
    }

    /// The `n x m` matrix with ones on the diagonal (PyTorch's `eye(n,
    /// m)`), `f32`.
    #[track_caller]
    pub fn eye(n: usize, m: usize, dev: &Device) -> Tensor {
        let _op = crate::graph::record_as("eye");
        let rows = Tensor::arange(0, n as i32, 1, dev).unsqueeze(1);
        let cols = Tensor::arange(0, m as i32, 1, dev).unsqueeze(0);
        rows.eq(&cols).cast(DType::F32)
    }

    /// `steps` values from `start` to `end` inclusive, evenly spaced
    /// (PyTorch's `linspace`, with its arithmetic: the first half counted
    /// up from `start`, the second down from `end`, in f32), `f32`.
    #[track_caller]
    pub fn linspace(start: f32, end: f32, steps: usize, dev: &Device) -> Tensor {
        let step = if steps > 1 {
            (end - start) / (steps - 1) as f32
        } else {
            0.0
        };
        let half = steps / 2;
        let values: Vec<f32> = (0..steps)
            .map(|i| {
                if i < half || steps == 1 {
                    start + step * i as f32
                } else {
                    end - step * (steps - 1 - i) as f32
                }
            })
            .collect();
        Tensor::from_vec(values, [steps], dev).unwrap_or_else(|e| {
            panic!("linspace: {e} at {}", Location::caller());
        })
    }

    /// Integers drawn uniformly from `low..high` (`i64`), from the
    /// device's seeded generator (PyTorch's `randint`).
    #[track_caller]
    pub fn randint(low: i64, high: i64, shape: impl IntoShape, dev: &Device) -> Tensor {
        let _op = crate::graph::record_as("randint");
        let range = high - low;
        let fits = |v: i64| i32::try_from(v).is_ok();
        if range <= 0 || !fits(low) || !fits(high) || range > 1 << 24 {
            panic!(
                "randint: needs low < high within i32 and at most 2^24 values apart, got {low}..{high} at {}",
                Location::caller()
            );
        }
        // A uniform f32 in [0, 1) holds 24 bits, enough for ranges up
        // to 2^24; the product may round up to `range`, hence the clamp.
        let u = Tensor::rand(shape, dev);
        let k = (u * range as f32)
            .floor()
            .minimum((range - 1) as f32)
            .cast(DType::I64);
        k + low
    }
}
