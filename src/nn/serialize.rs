//! Saving and loading parameters in the safetensors format (the format of
//! the Hugging Face ecosystem: a JSON header, then raw little-endian data).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, Metadata, SafeTensors, View};

use super::Parameters;
use super::params::state_of;
use crate::autograd::no_grad;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// Host copy of one tensor for the writer.
struct HostTensor {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &HostTensor {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn host_copy(t: &Tensor) -> Result<HostTensor> {
    let (dtype, bytes) = match t.dtype() {
        DType::F32 => (Dtype::F32, bytes_of(&t.to_vec::<f32>()?)),
        DType::F16 => (Dtype::F16, bytes_of(&t.to_vec::<half::f16>()?)),
        DType::BF16 => (Dtype::BF16, bytes_of(&t.to_vec::<half::bf16>()?)),
        DType::I32 => (Dtype::I32, bytes_of(&t.to_vec::<i32>()?)),
        DType::U32 => (Dtype::U32, bytes_of(&t.to_vec::<u32>()?)),
        DType::I64 => (Dtype::I64, bytes_of(&t.to_vec::<i64>()?)),
        DType::U8 => (Dtype::U8, t.to_vec::<u8>()?),
        DType::Bool => (
            Dtype::BOOL,
            t.to_vec::<bool>()?.into_iter().map(u8::from).collect(),
        ),
    };
    Ok(HostTensor {
        dtype,
        shape: t.shape().to_vec(),
        bytes,
    })
}

/// The little-endian elements of `data` (4 or 2 bytes each, as `T`'s
/// dtype stores them) as `T`s.
fn elements<T: Element>(data: &[u8]) -> Vec<T> {
    data.chunks_exact(T::DTYPE.size_in_bytes())
        .map(|c| T::from_bits(c.iter().rev().fold(0, |w, &b| (w << 8) | b as u32)))
        .collect()
}

fn bytes_of<T: bytemuck::Pod>(v: &[T]) -> Vec<u8> {
    // safetensors is little-endian, as every platform wgpu runs on.
    bytemuck::cast_slice(v).to_vec()
}

/// Writes `entries` (with `metadata`, safetensors' string map) to `path`;
/// `op` names the caller in errors.
pub(crate) fn write_entries(
    op: &'static str,
    entries: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
    path: &Path,
) -> Result<()> {
    let mut host = Vec::with_capacity(entries.len());
    for (name, t) in entries {
        host.push((name.clone(), host_copy(t)?));
    }
    let bytes = safetensors::serialize(host.iter().map(|(n, h)| (n.as_str(), h)), metadata)
        .map_err(|e| Error::Format {
            op,
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    std::fs::write(path, bytes).map_err(|source| Error::Io {
        op,
        path: path.display().to_string(),
        source,
    })
}

/// A safetensors file read into memory, its header parsed once.
pub(crate) struct TensorFile {
    op: &'static str,
    path: String,
    bytes: Vec<u8>,
    /// The header: each entry's dtype, shape and byte range.
    header: Metadata,
    /// Where the data (which the byte ranges index) starts.
    data_start: usize,
}

impl TensorFile {
    /// Reads `path` and parses its header; `op` names the caller in errors.
    pub fn read(op: &'static str, path: &Path) -> Result<TensorFile> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            op,
            path: shown.clone(),
            source,
        })?;
        let (header_len, header) =
            SafeTensors::read_metadata(&bytes).map_err(|e| Error::Format {
                op,
                path: shown.clone(),
                message: e.to_string(),
            })?;
        Ok(TensorFile {
            op,
            path: shown,
            bytes,
            header,
            data_start: 8 + header_len,
        })
    }

    /// The little-endian i64 values of entry `name`'s `data`, each checked
    /// to fit in the 32 bits an `I64` tensor is stored in.
    fn wide_ints(&self, name: &str, data: &[u8]) -> Result<Vec<i64>> {
        data.chunks_exact(8)
            .map(|c| {
                let mut word = [0u8; 8];
                word.copy_from_slice(c);
                let v = i64::from_le_bytes(word);
                if i32::try_from(v).is_ok() {
                    Ok(v)
                } else {
                    Err(self.bad(format!(
                        "{name}: i64 value {v} in the file is outside the i32 range that i64 tensors are stored in"
                    )))
                }
            })
            .collect()
    }

    fn bad(&self, message: String) -> Error {
        Error::Format {
            op: self.op,
            path: self.path.clone(),
            message,
        }
    }

    /// The names of the entries.
    pub fn names(&self) -> Vec<String> {
        self.header.offset_keys()
    }

    /// The string metadata (empty if none).
    pub fn metadata(&self) -> HashMap<String, String> {
        self.header.metadata().clone().unwrap_or_default()
    }

    /// Entry `name` as a new tensor on `dev`, checked against `expect`
    /// (shape and dtype) when given.
    pub fn tensor(&self, name: &str, expect: Option<&Tensor>, dev: &Device) -> Result<Tensor> {
        let info = self
            .header
            .info(name)
            .ok_or_else(|| self.bad(format!("no tensor named {name:?}")))?;
        if let Some(p) = expect {
            if info.shape != p.shape() {
                return Err(self.bad(format!(
                    "{name}: shape {:?} in the file, {:?} in the model",
                    info.shape,
                    p.shape()
                )));
            }
        }
        let (begin, end) = info.data_offsets;
        let data = self
            .bytes
            .get(self.data_start + begin..self.data_start + end)
            .ok_or_else(|| self.bad(format!("{name}: data past the end of the file")))?;
        let shape = info.shape.as_slice();
        let t = match (info.dtype, expect.map(Tensor::dtype)) {
            (Dtype::F32, None | Some(DType::F32)) => {
                Tensor::from_vec(elements::<f32>(data), shape, dev)?
            }
            (Dtype::F16, None | Some(DType::F16)) => {
                Tensor::from_vec(elements::<half::f16>(data), shape, dev)?
            }
            (Dtype::BF16, None | Some(DType::BF16)) => {
                Tensor::from_vec(elements::<half::bf16>(data), shape, dev)?
            }
            (Dtype::I32, None | Some(DType::I32)) => {
                Tensor::from_vec(elements::<i32>(data), shape, dev)?
            }
            (Dtype::U8, None | Some(DType::U8)) => Tensor::from_vec(data.to_vec(), shape, dev)?,
            (Dtype::I64, None | Some(DType::I64)) => {
                let values = self.wide_ints(name, data)?;
                Tensor::from_vec(values, shape, dev)?
            }
            (Dtype::I64, Some(DType::I32)) => {
                // PyTorch's integers (a BatchNorm's `num_batches_tracked`)
                // are i64; they load into an i32 while they fit.
                let values: Vec<i32> = self
                    .wide_ints(name, data)?
                    .into_iter()
                    .map(|v| v as i32)
                    .collect();
                Tensor::from_vec(values, shape, dev)?
            }
            (file_dt, model_dt) => {
                return Err(self.bad(format!(
                    "{name}: dtype {file_dt:?} in the file, {model_dt:?} expected"
                )));
            }
        };
        Ok(t)
    }
}

/// Writes `model`'s parameters and buffers to `path` under their dotted
/// names (PyTorch's `state_dict` names; reads them back from the device).
pub fn save_safetensors(model: &(impl Parameters + ?Sized), path: impl AsRef<Path>) -> Result<()> {
    write_entries("save_safetensors", &state(model), None, path.as_ref())
}

/// Parameters and buffers of `model` under their names.
pub(crate) fn state(model: &(impl Parameters + ?Sized)) -> Vec<(String, Tensor)> {
    state_of(model)
        .into_iter()
        .map(|(n, t, _)| (n, t))
        .collect()
}

/// Reads `path` and copies each of `model`'s parameters and buffers from
/// the entry of the same name, in place (the parameter handles, and an
/// optimiser that holds them, stay valid). Every parameter and buffer
/// must be present with its shape and dtype (an i64 entry loads into an
/// i32 buffer while its values fit); extra entries in the file are
/// ignored. A state dict that PyTorch saved with
/// `safetensors.torch.save_file(model.state_dict(), path)` loads into a
/// model whose names follow PyTorch's.
pub fn load_safetensors(model: &(impl Parameters + ?Sized), path: impl AsRef<Path>) -> Result<()> {
    let file = TensorFile::read("load_safetensors", path.as_ref())?;
    load_params(&file, model)
}

/// Copies each of `model`'s parameters and buffers from `file`, in place.
pub(crate) fn load_params(file: &TensorFile, model: &(impl Parameters + ?Sized)) -> Result<()> {
    for (name, param) in state(model) {
        let value = file.tensor(&name, Some(&param), param.device())?;
        no_grad(|| param.copy_(&value));
    }
    Ok(())
}
