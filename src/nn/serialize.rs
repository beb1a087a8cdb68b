//! Saving and loading parameters in the safetensors format (the format of
//! the Hugging Face ecosystem: a JSON header, then raw little-endian data).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Mutex;

use safetensors::tensor::{Dtype, View};

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

/// A safetensors file whose header is parsed once and whose entries are
/// read from disk one at a time as they are asked for (a checkpoint of
/// many gigabytes never sits whole in host memory).
pub(crate) struct TensorFile {
    op: &'static str,
    path: String,
    file: Mutex<File>,
    /// Each entry's dtype, shape and byte range within the data.
    entries: HashMap<String, EntryInfo>,
    /// The string metadata.
    metadata: HashMap<String, String>,
    /// Where the data (which the byte ranges index) starts.
    data_start: u64,
}

/// One entry of a safetensors header.
#[derive(Clone, Debug)]
pub(crate) struct EntryInfo {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    begin: u64,
    end: u64,
}

/// Headers larger than this are refused (safetensors' own limit).
const MAX_HEADER: u64 = 100_000_000;

impl TensorFile {
    /// Opens `path` and parses its header; `op` names the caller in
    /// errors. The data is read later, entry by entry.
    pub fn read(op: &'static str, path: &Path) -> Result<TensorFile> {
        let shown = path.display().to_string();
        let io = |source| Error::Io {
            op,
            path: shown.clone(),
            source,
        };
        let bad = |message: String| Error::Format {
            op,
            path: shown.clone(),
            message,
        };
        let mut file = File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut word = [0u8; 8];
        file.read_exact(&mut word)
            .map_err(|e| bad(format!("no header length: {e}")))?;
        let header_len = u64::from_le_bytes(word);
        if header_len > MAX_HEADER || 8 + header_len > file_len {
            return Err(bad(format!(
                "header length {header_len} does not fit the file's {file_len} bytes"
            )));
        }
        let mut header = vec![0u8; header_len as usize];
        file.read_exact(&mut header).map_err(io)?;
        let fields: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&header).map_err(|e| bad(format!("header: {e}")))?;
        let data_start = 8 + header_len;
        let mut entries = HashMap::new();
        let mut metadata = HashMap::new();
        for (name, value) in fields {
            if name == "__metadata__" {
                metadata =
                    serde_json::from_value(value).map_err(|e| bad(format!("metadata: {e}")))?;
                continue;
            }
            let info = parse_entry(&value).map_err(|e| bad(format!("{name}: {e}")))?;
            if info.end > file_len - data_start {
                return Err(bad(format!("{name}: data past the end of the file")));
            }
            entries.insert(name, info);
        }
        Ok(TensorFile {
            op,
            path: shown,
            file: Mutex::new(file),
            entries,
            metadata,
            data_start,
        })
    }

    /// Entry `name`'s header record.
    pub fn info(&self, name: &str) -> Option<&EntryInfo> {
        self.entries.get(name)
    }

    /// Entry `name`'s bytes, read from disk.
    fn data(&self, name: &str, info: &EntryInfo) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; (info.end - info.begin) as usize];
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.seek(SeekFrom::Start(self.data_start + info.begin))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|e| self.bad(format!("{name}: reading its data: {e}")))?;
        Ok(bytes)
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

    /// The names of the entries, in the order of their data.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<(&String, u64)> =
            self.entries.iter().map(|(n, i)| (n, i.begin)).collect();
        names.sort_by_key(|&(n, begin)| (begin, n.clone()));
        names.into_iter().map(|(n, _)| n.clone()).collect()
    }

    /// The string metadata (empty if none).
    pub fn metadata(&self) -> HashMap<String, String> {
        self.metadata.clone()
    }

    /// Entry `name` as a new tensor on `dev`, checked against `expect`
    /// (shape and dtype) when given.
    pub fn tensor(&self, name: &str, expect: Option<&Tensor>, dev: &Device) -> Result<Tensor> {
        let info = self
            .entries
            .get(name)
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
        let bytes = self.data(name, info)?;
        let data = bytes.as_slice();
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

/// One header record: `{"dtype": .., "shape": [..], "data_offsets": [b, e]}`.
fn parse_entry(value: &serde_json::Value) -> std::result::Result<EntryInfo, String> {
    let dtype: Dtype = serde_json::from_value(value["dtype"].clone())
        .map_err(|e| format!("dtype {}: {e}", value["dtype"]))?;
    let shape: Vec<usize> =
        serde_json::from_value(value["shape"].clone()).map_err(|e| format!("shape: {e}"))?;
    let offsets: [u64; 2] = serde_json::from_value(value["data_offsets"].clone())
        .map_err(|e| format!("data_offsets: {e}"))?;
    if offsets[1] < offsets[0] {
        return Err(format!("data_offsets {offsets:?} run backwards"));
    }
    Ok(EntryInfo {
        dtype,
        shape,
        begin: offsets[0],
        end: offsets[1],
    })
}
