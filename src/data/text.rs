//! A character-level text dataset: the vocabulary (sorted distinct
//! characters), the text as token ids, a train/validation split, and
//! batches of next-character prediction drawn at random offsets.

use std::io::Read;
use std::path::Path;

use super::sampler::SplitMix64;
use crate::error::{Error, Result};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// Which part of the text a batch comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// The first 90 %.
    Train,
    /// The last 10 %.
    Val,
}

/// A text as token ids over its sorted distinct characters.
pub struct CharDataset {
    /// The vocabulary: token `i` is `vocab[i]`.
    pub vocab: Vec<char>,
    /// The whole text as token ids.
    pub tokens: Vec<u32>,
    /// Tokens in the training split (the first 90 %, rounded down as
    /// Python's `int(0.9 * n)`).
    pub train_len: usize,
}

impl CharDataset {
    /// The dataset of `text` (vocabulary of the whole text, 90/10 split).
    pub fn from_text(text: &str) -> CharDataset {
        let mut vocab: Vec<char> = text.chars().collect();
        vocab.sort_unstable();
        vocab.dedup();
        let mut data = CharDataset {
            vocab,
            tokens: Vec::new(),
            train_len: 0,
        };
        data.tokens = data.encode(text);
        data.train_len = (0.9 * data.tokens.len() as f64) as usize;
        data
    }

    /// Reads a text file, gunzipping it when its name ends in `.gz`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<CharDataset> {
        let path = path.as_ref();
        let io = |source| Error::Io {
            op: "CharDataset::from_file",
            path: path.display().to_string(),
            source,
        };
        let raw = std::fs::read(path).map_err(io)?;
        let mut text = String::new();
        if path.extension().is_some_and(|e| e == "gz") {
            flate2::read::GzDecoder::new(raw.as_slice())
                .read_to_string(&mut text)
                .map_err(io)?;
        } else {
            text = String::from_utf8(raw).map_err(|e| Error::Format {
                op: "CharDataset::from_file",
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        }
        Ok(CharDataset::from_text(&text))
    }

    /// Number of distinct characters.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The tokens of `split`.
    pub fn split(&self, split: Split) -> &[u32] {
        match split {
            Split::Train => &self.tokens[..self.train_len],
            Split::Val => &self.tokens[self.train_len..],
        }
    }

    /// Token ids of `s` (characters outside the vocabulary become 0).
    pub fn encode(&self, s: &str) -> Vec<u32> {
        s.chars()
            .map(|c| self.vocab.binary_search(&c).map_or(0, |i| i as u32))
            .collect()
    }

    /// The text of token ids (ids outside the vocabulary are skipped).
    pub fn decode(&self, ids: &[u32]) -> String {
        ids.iter()
            .filter_map(|&i| self.vocab.get(i as usize))
            .collect()
    }

    /// `batch` random start offsets into `split` for sequences of `block`
    /// tokens plus the one after: `rng.next_u64() % (len - block)` each, in
    /// order.
    pub fn offsets(
        &self,
        split: Split,
        rng: &mut SplitMix64,
        batch: usize,
        block: usize,
    ) -> Vec<usize> {
        let len = self.split(split).len();
        assert!(
            len > block,
            "CharDataset::offsets: the {split:?} split ({len} tokens) is not longer than a block of {block}"
        );
        (0..batch)
            .map(|_| (rng.next_u64() % (len - block) as u64) as usize)
            .collect()
    }

    /// Inputs `x = data[o..o+block]` and targets `y = data[o+1..o+block+1]`
    /// for each offset, as `i32` tensors `[offsets.len(), block]`.
    pub fn batch(
        &self,
        split: Split,
        offsets: &[usize],
        block: usize,
        dev: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let data = self.split(split);
        let mut x = Vec::with_capacity(offsets.len() * block);
        let mut y = Vec::with_capacity(offsets.len() * block);
        for &o in offsets {
            x.extend(data[o..o + block].iter().map(|&t| t as i32));
            y.extend(data[o + 1..o + block + 1].iter().map(|&t| t as i32));
        }
        let shape = [offsets.len(), block];
        Ok((
            Tensor::from_vec(x, shape, dev)?,
            Tensor::from_vec(y, shape, dev)?,
        ))
    }
}
