//! The IDX format of the MNIST files (gzipped or not): a big-endian magic
//! number `0x00 0x00 type ndim`, `ndim` big-endian u32 dims, then the
//! elements row-major. MNIST uses type `0x08` (unsigned bytes).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::dataset::{Dataset, Example, check_index};
use crate::error::{Error, Result};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// An unsigned-byte IDX array.
#[derive(Clone, Debug)]
pub struct IdxArray {
    /// The dims from the header.
    pub shape: Vec<usize>,
    /// The elements, row-major.
    pub data: Vec<u8>,
}

/// Reads an IDX file of unsigned bytes; a name ending in `.gz` (or a
/// gzip magic number) is decompressed first.
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let shown = path.display().to_string();
    let raw = std::fs::read(path).map_err(|source| Error::Io {
        op: "read_idx",
        path: shown.clone(),
        source,
    })?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(|source| Error::Io {
                op: "read_idx (gunzip)",
                path: shown.clone(),
                source,
            })?;
        out
    } else {
        raw
    };
    parse_idx(&bytes).map_err(|message| Error::Format {
        op: "read_idx",
        path: shown,
        message,
    })
}

fn parse_idx(bytes: &[u8]) -> std::result::Result<IdxArray, String> {
    if bytes.len() < 4 || bytes[0] != 0 || bytes[1] != 0 {
        return Err("not an IDX file (the magic number must start with two zero bytes)".into());
    }
    if bytes[2] != 0x08 {
        return Err(format!(
            "element type 0x{:02x} is not supported (only unsigned bytes, 0x08)",
            bytes[2]
        ));
    }
    let ndim = bytes[3] as usize;
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(format!(
            "{} bytes is too short for a header of {ndim} dims",
            bytes.len()
        ));
    }
    let shape: Vec<usize> = (0..ndim)
        .map(|i| {
            let b = &bytes[4 + 4 * i..8 + 4 * i];
            u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
        })
        .collect();
    let n: usize = shape.iter().product();
    let body = &bytes[header..];
    if body.len() != n {
        return Err(format!(
            "header says {shape:?} = {n} elements, the file holds {}",
            body.len()
        ));
    }
    Ok(IdxArray {
        shape,
        data: body.to_vec(),
    })
}

/// MNIST images and labels (train and test), as stored: `u8` pixels
/// `[N, 28, 28]` and `u8` labels `[N]`.
#[derive(Clone, Debug)]
pub struct Mnist {
    /// Training images.
    pub train_images: IdxArray,
    /// Training labels.
    pub train_labels: IdxArray,
    /// Test images.
    pub test_images: IdxArray,
    /// Test labels.
    pub test_labels: IdxArray,
}

impl Mnist {
    /// Reads the four standard files from `dir`
    /// (`train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
    /// `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`, each with or
    /// without `.gz`), checking that images and labels agree.
    pub fn load(dir: impl AsRef<Path>) -> Result<Mnist> {
        let dir = dir.as_ref();
        let train = Mnist::load_split(dir, true)?;
        let test = Mnist::load_split(dir, false)?;
        Ok(Mnist {
            train_images: train.images,
            train_labels: train.labels,
            test_images: test.images,
            test_labels: test.labels,
        })
    }

    /// Reads one split from `dir`: the training files (`train`) or the
    /// `t10k` test files, as [`Mnist::load`] names them.
    pub fn load_split(dir: impl AsRef<Path>, train: bool) -> Result<MnistSplit> {
        let dir = dir.as_ref();
        let find = |stem: &str| -> PathBuf {
            let gz = dir.join(format!("{stem}.gz"));
            if gz.exists() { gz } else { dir.join(stem) }
        };
        let prefix = if train { "train" } else { "t10k" };
        let images = read_idx(find(&format!("{prefix}-images-idx3-ubyte")))?;
        let labels = read_idx(find(&format!("{prefix}-labels-idx1-ubyte")))?;
        MnistSplit::new(images, labels).map_err(|e| match e {
            Error::Format { message, .. } => Error::Format {
                op: "Mnist::load",
                path: dir.display().to_string(),
                message: format!("{prefix}: {message}"),
            },
            other => other,
        })
    }

    /// The training split (`train`) or the test split, copied, as a
    /// [`Dataset`].
    pub fn split(&self, train: bool) -> MnistSplit {
        let (images, labels) = if train {
            (&self.train_images, &self.train_labels)
        } else {
            (&self.test_images, &self.test_labels)
        };
        MnistSplit {
            images: images.clone(),
            labels: labels.clone(),
        }
    }

    /// Images `start..start + n` as `f32` normalised as PyTorch's MNIST
    /// example does: `(x / 255 - 0.1307) / 0.3081`, flattened `[n * 784]`.
    pub fn normalized(images: &IdxArray, start: usize, n: usize) -> Vec<f32> {
        let per: usize = images.shape[1..].iter().product();
        images.data[start * per..(start + n) * per]
            .iter()
            .map(|&p| Mnist::normalize_pixel(p))
            .collect()
    }

    /// One pixel normalised as in [`Mnist::normalized`].
    fn normalize_pixel(p: u8) -> f32 {
        (p as f32 / 255.0 - 0.1307) / 0.3081
    }

    /// Images `start..start + n` of `images` as a normalised
    /// `[n, 1, H, W]` tensor (see [`Mnist::normalized`]) and the matching
    /// `labels` as `i32` `[n]`, on `dev`.
    pub fn batch(
        images: &IdxArray,
        labels: &IdxArray,
        start: usize,
        n: usize,
        dev: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let indices: Vec<usize> = (start..start + n).collect();
        Mnist::batch_at(images, labels, &indices, dev)
    }

    /// The examples at `indices` (a shuffled batch, e.g. from
    /// [`crate::data::shuffled_batches`]) as [`Mnist::batch`] makes them.
    pub fn batch_at(
        images: &IdxArray,
        labels: &IdxArray,
        indices: &[usize],
        dev: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let n = indices.len();
        let mut shape = vec![n, 1];
        shape.extend_from_slice(&images.shape[1..]);
        let per: usize = images.shape[1..].iter().product();
        let mut pixels = Vec::with_capacity(n * per);
        let mut ys = Vec::with_capacity(n);
        for &i in indices {
            let image = &images.data[i * per..(i + 1) * per];
            pixels.extend(image.iter().map(|&p| Mnist::normalize_pixel(p)));
            ys.push(labels.data[i] as i32);
        }
        Ok((
            Tensor::from_vec(pixels, shape, dev)?,
            Tensor::from_vec(ys, [n], dev)?,
        ))
    }

    /// Labels `start..start + n` as `i32`.
    pub fn labels(labels: &IdxArray, start: usize, n: usize) -> Vec<i32> {
        labels.data[start..start + n]
            .iter()
            .map(|&l| l as i32)
            .collect()
    }
}

/// One split of MNIST: images `[N, H, W]` and labels `[N]`, checked to
/// pair up. As a [`Dataset`] each example is `[1, H, W]` bytes (scaled to
/// `[0, 1]` when batched; PyTorch's MNIST example then normalises with
/// mean 0.1307 and std 0.3081, as [`Mnist::normalized`] does) with its
/// label.
#[derive(Clone, Debug)]
pub struct MnistSplit {
    /// The images, `[N, H, W]`.
    pub images: IdxArray,
    /// The labels, `[N]`.
    pub labels: IdxArray,
}

impl MnistSplit {
    /// Pairs `images` (`[N, H, W]`) with `labels` (`[N]`), or says why
    /// they do not pair up ([`Error::Format`]).
    pub fn new(images: IdxArray, labels: IdxArray) -> Result<MnistSplit> {
        if images.shape.len() != 3 || labels.shape.len() != 1 || images.shape[0] != labels.shape[0]
        {
            return Err(Error::Format {
                op: "MnistSplit::new",
                path: "(arrays in memory)".into(),
                message: format!(
                    "images {:?} and labels {:?} do not pair up",
                    images.shape, labels.shape
                ),
            });
        }
        Ok(MnistSplit { images, labels })
    }

    /// Pixels per image.
    fn per_image(&self) -> usize {
        self.images.shape[1..].iter().product()
    }
}

impl Dataset for MnistSplit {
    fn len(&self) -> usize {
        self.labels.shape[0]
    }

    #[track_caller]
    fn get(&self, index: usize) -> Result<Example> {
        check_index("MnistSplit::get", index, self.len());
        let per = self.per_image();
        let pixels = self.images.data[index * per..(index + 1) * per].to_vec();
        let shape = [1, self.images.shape[1], self.images.shape[2]];
        Ok(Example::u8(pixels, shape, self.labels.data[index] as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::parse_idx;

    #[test]
    fn parses_a_small_idx_and_rejects_bad_headers() {
        let mut b = vec![0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3];
        b.extend([1, 2, 3, 4, 5, 6]);
        let a = parse_idx(&b).unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data, vec![1, 2, 3, 4, 5, 6]);
        assert!(parse_idx(&b[..10]).is_err());
        assert!(
            parse_idx(&b[..b.len() - 1])
                .unwrap_err()
                .contains("6 elements")
        );
        let mut float = b.clone();
        float[2] = 0x0d;
        assert!(parse_idx(&float).unwrap_err().contains("0x0d"));
    }
}
