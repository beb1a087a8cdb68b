//! Datasets on the host and their way to the device: the [`Dataset`]
//! trait (a length and an [`Example`] by index) with MNIST's IDX files
//! ([`Mnist`], [`MnistSplit`], [`read_idx`]; gzipped or not) and CIFAR-10's
//! binary files ([`Cifar10`]) behind it, a [`DataLoader`] that assembles
//! and uploads batches on a background thread ahead of the training step,
//! device-side augmentation from seeded host draws ([`augment`]), a
//! character-level text dataset ([`CharDataset`]), and seeded sampling
//! ([`SplitMix64`], [`shuffled_batches`]) whose numbers a Python script can
//! reproduce.
//!
//! Images through a loader, augmented on the device, CIFAR-style (with
//! `Cifar10::load(dir, true)?` in place of the synthetic dataset):
//!
//! ```
//! use lazywgpu::data::augment::{Compose, Normalize, RandomCrop, RandomHorizontalFlip};
//! use lazywgpu::data::{Cifar10, DataLoader, Dataset, Example};
//! use lazywgpu::Device;
//! # fn main() -> lazywgpu::Result<()> {
//! struct Noise;
//! impl Dataset for Noise {
//!     fn len(&self) -> usize { 6 }
//!     fn get(&self, i: usize) -> lazywgpu::Result<Example> {
//!         Ok(Example::u8(vec![(i * 40) as u8; 3 * 32 * 32], [3, 32, 32], i as i32))
//!     }
//! }
//! let dev = Device::cpu();
//! let loader = DataLoader::new(Noise, 4, &dev).shuffle(0);
//! let augment = Compose::new(1)
//!     .then(RandomCrop { size: 32, padding: 4 })
//!     .then(RandomHorizontalFlip { p: 0.5 })
//!     .then(Normalize { mean: Cifar10::MEAN.to_vec(), std: Cifar10::STD.to_vec() });
//! let mut step = 0;
//! for epoch in 0..2 {
//!     for batch in loader.epoch(epoch) {
//!         let (images, labels) = batch?; // already on the device
//!         let images = augment.apply(&images, step)?;
//!         step += 1;
//!         assert_eq!(images.shape()[1..], [3, 32, 32]);
//!         assert_eq!(labels.shape(), &images.shape()[..1]);
//!         dev.mark_step()?;
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! A character-level text dataset and seeded sampling:
//!
//! ```
//! use lazywgpu::data::{CharDataset, Split, SplitMix64, shuffled_batches};
//! use lazywgpu::{DType, Device};
//! # fn main() -> lazywgpu::Result<()> {
//! let dev = Device::cpu();
//! let text = "to be, or not to be, that is the question: ".repeat(20);
//! let data = CharDataset::from_text(&text); // vocabulary: sorted distinct characters
//! assert_eq!(data.decode(&data.encode("to be")), "to be");
//!
//! // Four sequences of 16 characters at random offsets of the training
//! // split (the first 90 %), and the same shifted by one as targets.
//! let mut rng = SplitMix64::new(1337);
//! let offsets = data.offsets(Split::Train, &mut rng, 4, 16);
//! let (x, y) = data.batch(Split::Train, &offsets, 16, &dev)?;
//! assert_eq!((x.shape(), x.dtype()), (&[4, 16][..], DType::I32));
//! assert_eq!(x.narrow(1, 1, 15).to_vec::<i32>()?, y.narrow(1, 0, 15).to_vec::<i32>()?);
//!
//! // An epoch's mini-batches over 10 examples: a seeded order per epoch.
//! let epoch_1 = shuffled_batches(10, 4, 0, 1, true);
//! assert_eq!(epoch_1.len(), 2); // the last, shorter batch dropped
//! assert_ne!(epoch_1, shuffled_batches(10, 4, 0, 2, true));
//! # Ok(()) }
//! ```

pub mod augment;
mod cifar;
mod dataset;
mod idx;
mod loader;
mod sampler;
mod text;

pub use cifar::Cifar10;
pub use dataset::{Dataset, Example, Pixels};
pub use idx::{IdxArray, Mnist, MnistSplit, read_idx};
pub use loader::{Batch, Batches, DataLoader, LOAD_TIMER, LoaderStats, WAIT_TIMER};
pub use sampler::{SplitMix64, shuffled_batches};
pub use text::{CharDataset, Split};
