//! Datasets on the host, ready to be uploaded a batch at a time.

mod idx;

pub use idx::{IdxArray, Mnist, read_idx};
