//! Datasets on the host, ready to be uploaded a batch at a time: MNIST's
//! IDX files ([`Mnist`], [`read_idx`]; gzipped or not), a character-level
//! text dataset ([`CharDataset`]), and seeded sampling ([`SplitMix64`],
//! [`shuffled_batches`]) whose numbers a Python script can reproduce.
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

mod idx;
mod sampler;
mod text;

pub use idx::{IdxArray, Mnist, read_idx};
pub use sampler::{SplitMix64, shuffled_batches};
pub use text::{CharDataset, Split};
