//! Saving and loading parameters in the safetensors format (the format of
//! the Hugging Face ecosystem: a JSON header, then raw little-endian data).

use std::borrow::Cow;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, View};

use super::Module;
use crate::autograd::no_grad;
use crate::dtype::DType;
use crate::error::{Error, Result};
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
        DType::I32 => (Dtype::I32, bytes_of(&t.to_vec::<i32>()?)),
        DType::U32 => (Dtype::U32, bytes_of(&t.to_vec::<u32>()?)),
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

fn bytes_of<T: bytemuck::Pod>(v: &[T]) -> Vec<u8> {
    // safetensors is little-endian, as every platform wgpu runs on.
    bytemuck::cast_slice(v).to_vec()
}

/// Writes `model`'s parameters to `path` under their
/// [`Module::named_parameters`] names (reads them back from the device).
pub fn save_safetensors(model: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let named = model.named_parameters();
    let mut host = Vec::with_capacity(named.len());
    for (name, t) in &named {
        host.push((name.clone(), host_copy(t)?));
    }
    let bytes =
        safetensors::serialize(host.iter().map(|(n, h)| (n.as_str(), h)), None).map_err(|e| {
            Error::Format {
                op: "save_safetensors",
                path: path.display().to_string(),
                message: e.to_string(),
            }
        })?;
    std::fs::write(path, bytes).map_err(|source| Error::Io {
        op: "save_safetensors",
        path: path.display().to_string(),
        source,
    })
}

/// Reads `path` and copies each of `model`'s parameters from the entry of
/// the same name, in place (the parameter handles, and an optimiser that
/// holds them, stay valid). Every parameter must be present with its
/// shape and dtype; extra entries in the file are ignored.
pub fn load_safetensors(model: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        op: "load_safetensors",
        path: shown.clone(),
        source,
    })?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| Error::Format {
        op: "load_safetensors",
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let bad = |message: String| Error::Format {
        op: "load_safetensors",
        path: shown.clone(),
        message,
    };
    for (name, param) in model.named_parameters() {
        let view = file
            .tensor(&name)
            .map_err(|_| bad(format!("no tensor named {name:?}")))?;
        if view.shape() != param.shape() {
            return Err(bad(format!(
                "{name}: shape {:?} in the file, {:?} in the model",
                view.shape(),
                param.shape()
            )));
        }
        let data = view.data();
        let value = match (view.dtype(), param.dtype()) {
            (Dtype::F32, DType::F32) => {
                let v: Vec<f32> = data
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                Tensor::from_vec(v, param.shape(), param.device())?
            }
            (Dtype::I32, DType::I32) => {
                let v: Vec<i32> = data
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                Tensor::from_vec(v, param.shape(), param.device())?
            }
            (file_dt, model_dt) => {
                return Err(bad(format!(
                    "{name}: dtype {file_dt:?} in the file, {model_dt} in the model"
                )));
            }
        };
        no_grad(|| param.copy_(&value));
    }
    Ok(())
}
