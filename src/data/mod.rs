//! Datasets on the host, ready to be uploaded a batch at a time: MNIST's
//! IDX files, a character-level text dataset, and seeded sampling.

mod idx;
mod sampler;
mod text;

pub use idx::{IdxArray, Mnist, read_idx};
pub use sampler::{SplitMix64, shuffled_batches};
pub use text::{CharDataset, Split};
