//! The examples' `--dtype` option.

use lazywgpu::DType;

/// The autocast dtype `--dtype NAME` asks for: `None` for `f32` (no
/// autocast), `Some` for `f16` or `bf16`.
pub fn autocast_dtype(name: &str) -> Result<Option<DType>, String> {
    match name.parse::<DType>()? {
        DType::F32 => Ok(None),
        d if d.is_half() => Ok(Some(d)),
        d => Err(format!("--dtype must be f32, f16 or bf16, got {d}")),
    }
}
