//! The `Dataset` trait: a length and an example by index, as host data.
//! MNIST, CIFAR-10 and a user's own data implement it alike, so one
//! [`DataLoader`](super::DataLoader) batches and uploads any of them.

use std::sync::Arc;

use crate::error::{Error, Result};

/// The pixels (or features) of one example, as the dataset stores them.
#[derive(Clone, Debug, PartialEq)]
pub enum Pixels {
    /// Bytes, scaled to `[0, 1]` (divided by 255) when batched, as
    /// torchvision's `ToTensor` does.
    U8(Vec<u8>),
    /// Values batched as they are.
    F32(Vec<f32>),
}

impl Pixels {
    /// How many values there are.
    pub fn len(&self) -> usize {
        match self {
            Pixels::U8(v) => v.len(),
            Pixels::F32(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the values to `out` as `f32` (bytes divided by 255).
    pub fn extend_f32(&self, out: &mut Vec<f32>) {
        match self {
            Pixels::U8(v) => out.extend(v.iter().map(|&p| p as f32 / 255.0)),
            Pixels::F32(v) => out.extend_from_slice(v),
        }
    }
}

/// One example: its pixels in row-major order of `shape` (`[C, H, W]`
/// for an image) and an integer label.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    /// The values, row-major.
    pub pixels: Pixels,
    /// Their shape, without the batch dim (`[C, H, W]` for an image).
    pub shape: Vec<usize>,
    /// The class (or any integer target).
    pub label: i32,
}

impl Example {
    /// An example of bytes (scaled to `[0, 1]` when batched).
    pub fn u8(pixels: Vec<u8>, shape: impl Into<Vec<usize>>, label: i32) -> Example {
        Example {
            pixels: Pixels::U8(pixels),
            shape: shape.into(),
            label,
        }
    }

    /// An example of `f32` values (batched as they are).
    pub fn f32(pixels: Vec<f32>, shape: impl Into<Vec<usize>>, label: i32) -> Example {
        Example {
            pixels: Pixels::F32(pixels),
            shape: shape.into(),
            label,
        }
    }

    /// Checks that the pixels fill the shape exactly; `index` names the
    /// example in the error.
    pub fn check(&self, index: usize) -> Result<()> {
        let expected: usize = self.shape.iter().product();
        if self.pixels.len() == expected {
            return Ok(());
        }
        Err(Error::Data {
            op: "Dataset::get",
            message: format!(
                "example {index} has {} values for its shape {:?} ({expected} values)",
                self.pixels.len(),
                self.shape
            ),
        })
    }
}

/// A collection of examples with an index, like PyTorch's map-style
/// `torch.utils.data.Dataset`.
///
/// `get` runs on a [`DataLoader`](super::DataLoader)'s background thread,
/// hence `Send + Sync`. Return an error (for instance
/// [`Error::Io`](crate::Error::Io) naming a file) rather than panicking;
/// a panic still reaches the loader's caller as [`Error::Data`].
///
/// ```
/// use lazywgpu::data::{Dataset, Example};
///
/// /// Two-pixel "images" whose label is the sign of their sum.
/// struct Pairs(Vec<[f32; 2]>);
///
/// impl Dataset for Pairs {
///     fn len(&self) -> usize {
///         self.0.len()
///     }
///     fn get(&self, index: usize) -> lazywgpu::Result<Example> {
///         let [a, b] = self.0[index];
///         Ok(Example::f32(vec![a, b], [1, 1, 2], (a + b > 0.0) as i32))
///     }
/// }
///
/// let data = Pairs(vec![[1.0, 2.0], [-3.0, 1.0]]);
/// assert_eq!(data.len(), 2);
/// assert_eq!(data.get(1).unwrap().label, 0);
/// ```
pub trait Dataset: Send + Sync {
    /// The number of examples; indices run over `0..len()`.
    fn len(&self) -> usize;

    /// The example at `index` (`index < len()`).
    fn get(&self, index: usize) -> Result<Example>;

    /// Whether there are no examples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Panics naming `op` when `index` is not below `len` (a misuse: the
/// loader only asks for indices below the dataset's length).
#[track_caller]
pub(crate) fn check_index(op: &str, index: usize, len: usize) {
    assert!(
        index < len,
        "{op}: index {index} is out of range for a dataset of {len} examples"
    );
}

/// A shared dataset is a dataset: pass an `Arc` to the loader and keep a
/// clone to read examples yourself.
impl<D: Dataset + ?Sized> Dataset for Arc<D> {
    fn len(&self) -> usize {
        (**self).len()
    }

    fn get(&self, index: usize) -> Result<Example> {
        (**self).get(index)
    }
}
