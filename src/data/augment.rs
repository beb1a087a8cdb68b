//! Augmentation of image batches on the device, from random draws made on
//! the host: random crops with zero padding, random horizontal flips and
//! per-channel normalisation, as torchvision's CIFAR recipes use them.
//!
//! The split is what makes runs reproducible outside Rust: the draws
//! (crop offsets, flip decisions) come from a [`SplitMix64`] seeded per
//! batch ([`Compose::rng`]) in a documented order, so a Python script can
//! make the same ones, and [`Compose::draws`] shows them; the pixel work
//! is tensor ops (pad, gather, flip, where) that run where the batch is.
//!
//! ```
//! use lazywgpu::data::augment::{Compose, Normalize, RandomCrop, RandomHorizontalFlip};
//! use lazywgpu::{Device, Tensor};
//! # fn main() -> lazywgpu::Result<()> {
//! let dev = Device::cpu();
//! let augment = Compose::new(42)
//!     .then(RandomCrop { size: 8, padding: 2 })
//!     .then(RandomHorizontalFlip { p: 0.5 })
//!     .then(Normalize { mean: vec![0.5; 3], std: vec![0.25; 3] });
//! let batch = Tensor::rand([4, 3, 8, 8], &dev);
//! let step = 0; // count batches across epochs, so every batch draws anew
//! let out = augment.apply(&batch, step)?;
//! assert_eq!(out.shape(), &[4, 3, 8, 8]);
//! // The draws that made it, for a replay elsewhere.
//! let draws = augment.draws(step, &[4, 3, 8, 8]);
//! assert_eq!(draws.len(), 3);
//! # Ok(()) }
//! ```

use super::sampler::SplitMix64;
use crate::error::Result;
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// Mixes the batch number into a [`Compose`]'s seed (wyhash's first
/// constant: odd, with well-spread bits).
const STEP_MIX: u64 = 0xa076_1d64_78bd_642f;

/// The random numbers one transform drew for one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Draws {
    /// The transform draws nothing (e.g. [`Normalize`]).
    None,
    /// Per image, the `(top, left)` corner of its crop in the padded
    /// image ([`RandomCrop`]).
    Crops(Vec<(usize, usize)>),
    /// Per image, whether it is flipped ([`RandomHorizontalFlip`]).
    Flips(Vec<bool>),
    /// Raw draws of a transform defined outside this module.
    Values(Vec<u64>),
}

/// A batch transform: draws its random numbers on the host, then applies
/// them to the batch with tensor ops on the batch's device.
pub trait Transform: Send + Sync {
    /// The random numbers for a batch of `shape`, taken from `rng` in an
    /// order a replay can follow ([`Draws::None`] for a transform that
    /// draws none).
    fn draw(&self, rng: &mut SplitMix64, shape: &[usize]) -> Draws;

    /// The transformed batch, for `draws` as [`Transform::draw`] made them.
    fn apply(&self, batch: &Tensor, draws: &Draws) -> Result<Tensor>;

    /// The shape of the output for an input of `shape` (the same unless
    /// the transform resizes).
    fn output_shape(&self, shape: &[usize]) -> Vec<usize> {
        shape.to_vec()
    }
}

/// The `[B, C, H, W]` dims of `shape`; panics naming `op` otherwise.
#[track_caller]
fn dims4(op: &str, shape: &[usize]) -> [usize; 4] {
    match *shape {
        [b, c, h, w] => [b, c, h, w],
        _ => panic!("{op}: expected a batch [B, C, H, W], got shape {shape:?}"),
    }
}

/// A uniform draw in `[0, 1)`: the top 53 bits of the next output
/// (Python: `(x >> 11) * 2.0**-53`).
fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Pads each image with `padding` zeros on every side, then cuts a
/// `size` x `size` window from it at a random place, as torchvision's
/// `RandomCrop(size, padding)` (CIFAR: `size: 32, padding: 4`).
///
/// Draws: per image in batch order, `top = next_u64() % (H + 2 padding -
/// size + 1)`, then `left` likewise over the width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomCrop {
    /// The side of the crop.
    pub size: usize,
    /// Zeros added on each side before cropping.
    pub padding: usize,
}

impl RandomCrop {
    /// The number of crop positions along a padded side of `side`.
    #[track_caller]
    fn positions(&self, side: usize) -> u64 {
        let padded = side + 2 * self.padding;
        assert!(
            self.size <= padded,
            "RandomCrop: a crop of {} does not fit a side of {side} padded by {} ({padded})",
            self.size,
            self.padding
        );
        (padded - self.size + 1) as u64
    }

    /// The crop windows of each image: row (or column) indices `start + i`
    /// for `i < size`, broadcast to `shape` along `axis`.
    fn window_index(
        &self,
        starts: Vec<i32>,
        axis: usize,
        shape: [usize; 4],
        dev: &Device,
    ) -> Result<Tensor> {
        let starts = Tensor::from_vec(starts, [shape[0], 1, 1, 1], dev)?;
        let mut along = [1; 4];
        along[axis] = self.size;
        let steps = Tensor::arange(0i32, self.size as i32, 1, dev).reshape(along);
        Ok((&starts + &steps).expand(shape))
    }
}

impl Transform for RandomCrop {
    #[track_caller]
    fn draw(&self, rng: &mut SplitMix64, shape: &[usize]) -> Draws {
        let [b, _, h, w] = dims4("RandomCrop::draw", shape);
        let (rows, cols) = (self.positions(h), self.positions(w));
        let corners = (0..b)
            .map(|_| {
                let top = rng.next_u64() % rows;
                let left = rng.next_u64() % cols;
                (top as usize, left as usize)
            })
            .collect();
        Draws::Crops(corners)
    }

    #[track_caller]
    fn apply(&self, batch: &Tensor, draws: &Draws) -> Result<Tensor> {
        let [b, c, h, w] = dims4("RandomCrop::apply", batch.shape());
        let Draws::Crops(corners) = draws else {
            panic!("RandomCrop::apply: expected Draws::Crops, got {draws:?}");
        };
        assert_eq!(
            corners.len(),
            b,
            "RandomCrop::apply: {} crops for a batch of {b}",
            corners.len()
        );
        let (rows, cols) = (self.positions(h), self.positions(w));
        assert!(
            corners
                .iter()
                .all(|&(t, l)| (t as u64) < rows && (l as u64) < cols),
            "RandomCrop::apply: a crop corner in {corners:?} lies outside {rows} x {cols} positions"
        );
        let p = self.padding;
        let padded = batch.pad(&[(p, p), (p, p)], 0.0f32);
        let dev = batch.device();
        let tops = corners.iter().map(|&(t, _)| t as i32).collect();
        let lefts = corners.iter().map(|&(_, l)| l as i32).collect();
        // Rows first (every padded column), then columns of those rows.
        let row_index = self.window_index(tops, 2, [b, c, self.size, w + 2 * p], dev)?;
        let col_index = self.window_index(lefts, 3, [b, c, self.size, self.size], dev)?;
        Ok(padded.gather(2, &row_index).gather(3, &col_index))
    }

    #[track_caller]
    fn output_shape(&self, shape: &[usize]) -> Vec<usize> {
        let [b, c, _, _] = dims4("RandomCrop::output_shape", shape);
        vec![b, c, self.size, self.size]
    }
}

/// Mirrors each image left to right with probability `p`, as
/// torchvision's `RandomHorizontalFlip(p)`.
///
/// Draws: per image in batch order, flip when `(next_u64() >> 11) *
/// 2^-53 < p`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomHorizontalFlip {
    /// The probability of a flip.
    pub p: f64,
}

impl Transform for RandomHorizontalFlip {
    #[track_caller]
    fn draw(&self, rng: &mut SplitMix64, shape: &[usize]) -> Draws {
        let [b, ..] = dims4("RandomHorizontalFlip::draw", shape);
        Draws::Flips((0..b).map(|_| unit(rng) < self.p).collect())
    }

    #[track_caller]
    fn apply(&self, batch: &Tensor, draws: &Draws) -> Result<Tensor> {
        let [b, ..] = dims4("RandomHorizontalFlip::apply", batch.shape());
        let Draws::Flips(flips) = draws else {
            panic!("RandomHorizontalFlip::apply: expected Draws::Flips, got {draws:?}");
        };
        assert_eq!(
            flips.len(),
            b,
            "RandomHorizontalFlip::apply: {} flips for a batch of {b}",
            flips.len()
        );
        let mask = Tensor::from_vec(flips.clone(), [b, 1, 1, 1], batch.device())?;
        Ok(mask.where_cond(batch.flip([3]), batch))
    }
}

/// `(x - mean[c]) / std[c]` for each channel `c`, as torchvision's
/// `Normalize(mean, std)`. Draws nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalize {
    /// Per-channel means.
    pub mean: Vec<f32>,
    /// Per-channel standard deviations (nonzero).
    pub std: Vec<f32>,
}

impl Transform for Normalize {
    fn draw(&self, _rng: &mut SplitMix64, _shape: &[usize]) -> Draws {
        Draws::None
    }

    #[track_caller]
    fn apply(&self, batch: &Tensor, _draws: &Draws) -> Result<Tensor> {
        let [_, c, _, _] = dims4("Normalize::apply", batch.shape());
        assert!(
            self.mean.len() == c && self.std.len() == c,
            "Normalize::apply: {} means and {} stds for {c} channels",
            self.mean.len(),
            self.std.len()
        );
        assert!(
            self.std.iter().all(|&s| s != 0.0),
            "Normalize::apply: a standard deviation is zero: {:?}",
            self.std
        );
        let dev = batch.device();
        let mean = Tensor::from_vec(self.mean.clone(), [1, c, 1, 1], dev)?;
        let std = Tensor::from_vec(self.std.clone(), [1, c, 1, 1], dev)?;
        Ok((batch - &mean) / &std)
    }
}

/// Transforms applied in order, drawing from one generator per batch.
///
/// Batch `step` (count batches across epochs) uses
/// `SplitMix64::new(seed ^ (step + 1) * 0xa0761d6478bd642f)` (wrapping
/// arithmetic), each transform drawing in turn from it, so the same seed
/// and step give the same augmentation anywhere.
pub struct Compose {
    seed: u64,
    transforms: Vec<Box<dyn Transform>>,
}

impl Compose {
    /// No transforms yet, drawing from `seed`.
    pub fn new(seed: u64) -> Compose {
        Compose {
            seed,
            transforms: Vec::new(),
        }
    }

    /// Adds `transform` after the others.
    pub fn then(mut self, transform: impl Transform + 'static) -> Compose {
        self.transforms.push(Box::new(transform));
        self
    }

    /// The generator of batch `step`.
    pub fn rng(&self, step: u64) -> SplitMix64 {
        SplitMix64::new(self.seed ^ step.wrapping_add(1).wrapping_mul(STEP_MIX))
    }

    /// Each transform's draws for batch `step` of a batch of `shape`, in
    /// order: what [`Compose::apply`] uses.
    #[track_caller]
    pub fn draws(&self, step: u64, shape: &[usize]) -> Vec<Draws> {
        let mut rng = self.rng(step);
        let mut shape = shape.to_vec();
        self.transforms
            .iter()
            .map(|t| {
                let draws = t.draw(&mut rng, &shape);
                shape = t.output_shape(&shape);
                draws
            })
            .collect()
    }

    /// `batch` transformed with the draws of batch `step`.
    #[track_caller]
    pub fn apply(&self, batch: &Tensor, step: u64) -> Result<Tensor> {
        let draws = self.draws(step, batch.shape());
        self.apply_drawn(batch, &draws)
    }

    /// `batch` transformed with given draws (one per transform, as
    /// [`Compose::draws`] makes them).
    #[track_caller]
    pub fn apply_drawn(&self, batch: &Tensor, draws: &[Draws]) -> Result<Tensor> {
        assert_eq!(
            draws.len(),
            self.transforms.len(),
            "Compose::apply_drawn: {} draws for {} transforms",
            draws.len(),
            self.transforms.len()
        );
        let mut out = batch.clone();
        for (t, d) in self.transforms.iter().zip(draws) {
            out = t.apply(&out, d)?;
        }
        Ok(out)
    }
}
