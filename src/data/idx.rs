//! The IDX format of the MNIST files (gzipped or not): a big-endian magic
//! number `0x00 0x00 type ndim`, `ndim` big-endian u32 dims, then the
//! elements row-major. MNIST uses type `0x08` (unsigned bytes).

use std::io::Read;
use std::path::{Path, PathBuf};

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
        let find = |stem: &str| -> PathBuf {
            let gz = dir.join(format!("{stem}.gz"));
            if gz.exists() { gz } else { dir.join(stem) }
        };
        let m = Mnist {
            train_images: read_idx(find("train-images-idx3-ubyte"))?,
            train_labels: read_idx(find("train-labels-idx1-ubyte"))?,
            test_images: read_idx(find("t10k-images-idx3-ubyte"))?,
            test_labels: read_idx(find("t10k-labels-idx1-ubyte"))?,
        };
        for (images, labels, which) in [
            (&m.train_images, &m.train_labels, "train"),
            (&m.test_images, &m.test_labels, "t10k"),
        ] {
            if images.shape.len() != 3
                || labels.shape.len() != 1
                || images.shape[0] != labels.shape[0]
            {
                return Err(Error::Format {
                    op: "Mnist::load",
                    path: dir.display().to_string(),
                    message: format!(
                        "{which}: images {:?} and labels {:?} do not pair up",
                        images.shape, labels.shape
                    ),
                });
            }
        }
        Ok(m)
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
