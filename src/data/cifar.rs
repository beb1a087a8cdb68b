//! CIFAR-10 in its binary format: files of records of 1 label byte and
//! 3,072 pixel bytes (a 32x32 image, channel-major: the red plane, then
//! green, then blue, each row-major).

use std::path::{Path, PathBuf};

use super::dataset::{Dataset, Example, check_index};
use crate::error::{Error, Result};

/// Image side in pixels.
const SIDE: usize = 32;
/// Pixel bytes of one image (3 channels of 32x32).
const IMAGE_BYTES: usize = 3 * SIDE * SIDE;

/// One split of CIFAR-10 (training or test), as stored: `u8` pixels
/// `[N, 3, 32, 32]` and `u8` labels `[N]`.
///
/// As a [`Dataset`] each example is `[3, 32, 32]` bytes (scaled to
/// `[0, 1]` when batched) with its label.
#[derive(Clone, Debug)]
pub struct Cifar10 {
    /// The images, `[N, 3, 32, 32]` row-major.
    pub images: Vec<u8>,
    /// The labels, each in `0..10` (see [`Cifar10::CLASSES`]).
    pub labels: Vec<u8>,
}

impl Cifar10 {
    /// Bytes per record: the label, then the image.
    pub const RECORD_BYTES: usize = 1 + IMAGE_BYTES;

    /// The class names, by label.
    pub const CLASSES: [&'static str; 10] = [
        "airplane",
        "automobile",
        "bird",
        "cat",
        "deer",
        "dog",
        "frog",
        "horse",
        "ship",
        "truck",
    ];

    /// Per-channel mean of the training images scaled to `[0, 1]` (R, G,
    /// B), as CIFAR training recipes normalise with.
    pub const MEAN: [f32; 3] = [0.4914, 0.4822, 0.4465];

    /// Per-channel standard deviation matching [`Cifar10::MEAN`].
    pub const STD: [f32; 3] = [0.2470, 0.2435, 0.2616];

    /// The files of a split in `dir` (the `cifar-10-batches-bin` folder):
    /// `data_batch_1.bin` to `data_batch_5.bin` for training, else
    /// `test_batch.bin`.
    pub fn files(dir: impl AsRef<Path>, train: bool) -> Vec<PathBuf> {
        let dir = dir.as_ref();
        if train {
            (1..=5)
                .map(|i| dir.join(format!("data_batch_{i}.bin")))
                .collect()
        } else {
            vec![dir.join("test_batch.bin")]
        }
    }

    /// Reads the training split (`train`) or the test split from `dir`
    /// (see [`Cifar10::files`]). A missing file is [`Error::Io`]; a file
    /// that is not whole records, or holds none, or a label past 9, is
    /// [`Error::Format`] naming the file and its record count.
    pub fn load(dir: impl AsRef<Path>, train: bool) -> Result<Cifar10> {
        Cifar10::from_files(&Cifar10::files(dir, train))
    }

    /// Reads and concatenates the records of `paths`, in order.
    pub fn from_files(paths: &[PathBuf]) -> Result<Cifar10> {
        let mut data = Cifar10 {
            images: Vec::new(),
            labels: Vec::new(),
        };
        for path in paths {
            let bytes = std::fs::read(path).map_err(|source| Error::Io {
                op: "Cifar10::load",
                path: path.display().to_string(),
                source,
            })?;
            data.append(&bytes).map_err(|message| Error::Format {
                op: "Cifar10::load",
                path: path.display().to_string(),
                message,
            })?;
        }
        Ok(data)
    }

    /// Appends the records of one file's bytes, or says why they are not
    /// CIFAR-10 records.
    fn append(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let records = bytes.len() / Cifar10::RECORD_BYTES;
        let extra = bytes.len() % Cifar10::RECORD_BYTES;
        if extra != 0 {
            return Err(format!(
                "truncated: {} bytes are {records} whole records of {} bytes (1 label + {IMAGE_BYTES} pixels) and {extra} bytes of another",
                bytes.len(),
                Cifar10::RECORD_BYTES
            ));
        }
        if records == 0 {
            return Err("the file holds no records".into());
        }
        for (r, record) in bytes.chunks_exact(Cifar10::RECORD_BYTES).enumerate() {
            if record[0] >= 10 {
                return Err(format!(
                    "record {r} of {records} has label {} (CIFAR-10 labels are 0 to 9)",
                    record[0]
                ));
            }
            self.labels.push(record[0]);
            self.images.extend_from_slice(&record[1..]);
        }
        Ok(())
    }

    /// The pixels of image `index`, `[3, 32, 32]` row-major.
    #[track_caller]
    pub fn image(&self, index: usize) -> &[u8] {
        check_index("Cifar10::image", index, self.labels.len());
        &self.images[index * IMAGE_BYTES..(index + 1) * IMAGE_BYTES]
    }
}

impl Dataset for Cifar10 {
    fn len(&self) -> usize {
        self.labels.len()
    }

    #[track_caller]
    fn get(&self, index: usize) -> Result<Example> {
        check_index("Cifar10::get", index, self.labels.len());
        Ok(Example::u8(
            self.image(index).to_vec(),
            [3, SIDE, SIDE],
            self.labels[index] as i32,
        ))
    }
}
