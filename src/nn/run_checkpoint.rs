//! Checkpoints: a model's parameters, its optimiser's state and a few
//! strings (the iteration, a sampler's state) in one safetensors file, so
//! a run stopped after a save and resumed from it continues exactly as an
//! uninterrupted run.

use std::collections::HashMap;
use std::path::Path;

use super::Parameters;
use super::serialize::{TensorFile, load_params, state, write_entries};
use crate::error::Result;
use crate::optim::Optimizer;

/// Prefix of the optimiser's entries in a checkpoint.
const OPTIM_PREFIX: &str = "optim.";

/// Writes `model`'s parameters and buffers (under their names), `opt`'s state (under
/// `optim.<name>`) and `metadata` to `path`.
pub fn save_checkpoint(
    path: impl AsRef<Path>,
    model: &(impl Parameters + ?Sized),
    opt: &dyn Optimizer,
    metadata: &HashMap<String, String>,
) -> Result<()> {
    let mut entries = state(model);
    entries.extend(
        opt.state()
            .into_iter()
            .map(|(n, t)| (format!("{OPTIM_PREFIX}{n}"), t)),
    );
    write_entries(
        "save_checkpoint",
        &entries,
        Some(metadata.clone()),
        path.as_ref(),
    )
}

/// Restores a checkpoint written by [`save_checkpoint`]: `model`'s
/// parameters and `opt`'s state are copied in place, and the metadata is
/// returned.
pub fn load_checkpoint(
    path: impl AsRef<Path>,
    model: &(impl Parameters + ?Sized),
    opt: &mut dyn Optimizer,
) -> Result<HashMap<String, String>> {
    let file = TensorFile::read("load_checkpoint", path.as_ref())?;
    load_params(&file, model)?;
    let dev = match model.params().first() {
        Some(p) => p.device().clone(),
        None => return Ok(file.metadata()),
    };
    let mut state = Vec::new();
    for name in file.names() {
        if let Some(short) = name.strip_prefix(OPTIM_PREFIX) {
            state.push((short.to_string(), file.tensor(&name, None, &dev)?));
        }
    }
    opt.load_state(&state)?;
    Ok(file.metadata())
}
