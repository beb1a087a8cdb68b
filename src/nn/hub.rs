//! Checkpoints in Hugging Face's layout: one safetensors file, or shards
//! listed by a `model.safetensors.index.json` (`weight_map`: entry name ->
//! shard file), read entry by entry from disk; names mapped by a closure,
//! 16-bit and 32-bit floats converted on load, tied weights that the
//! files omit filled from the weight they are tied to; and the same
//! layout written back.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::Parameters;
use super::serialize::{TensorFile, state, write_entries};
use crate::autograd::no_grad;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The index file Hugging Face writes beside sharded weights.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// The single-file checkpoint's name.
pub const SINGLE_FILE: &str = "model.safetensors";

/// How [`load_pretrained`] matches a model to a checkpoint.
#[derive(Default)]
pub struct LoadOptions<'a> {
    /// The checkpoint's name for each of the model's names (`None`: the
    /// same name), for layouts that differ (`transformer.h.0.` for
    /// `model.layers.0.`, say).
    pub rename: Option<&'a dyn Fn(&str) -> String>,
    /// Entries to take from another checkpoint entry when absent (the
    /// model's name, then the entry it is tied to): an untied model
    /// loading a checkpoint saved with `tie_word_embeddings`, whose
    /// `lm_head.weight` the file omits, takes `model.embed_tokens.weight`.
    pub tied: &'a [(&'a str, &'a str)],
    /// Model entries that may be missing from the checkpoint (left as
    /// they are); every other must be present.
    pub optional: &'a [&'a str],
}

/// What [`load_pretrained`] did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LoadReport {
    /// Model entries loaded (their model names).
    pub loaded: Vec<String>,
    /// Entries converted on load: (model name, file dtype, model dtype).
    pub converted: Vec<(String, DType, DType)>,
    /// Model entries filled from the entry they are tied to.
    pub tied: Vec<String>,
    /// Optional model entries the checkpoint lacked.
    pub missing: Vec<String>,
    /// Checkpoint entries the model did not ask for.
    pub unused: Vec<String>,
}

/// A checkpoint's entries, by name, and the shard each lives in.
struct Checkpoint {
    shards: Vec<TensorFile>,
    where_is: HashMap<String, usize>,
}

impl Checkpoint {
    /// Opens `path`: a directory holding [`INDEX_FILE`] or
    /// [`SINGLE_FILE`], an index file, or one safetensors file.
    fn open(path: &Path) -> Result<Checkpoint> {
        const OP: &str = "load_pretrained";
        let index = if path.is_dir() {
            let index = path.join(INDEX_FILE);
            if !index.exists() {
                return Checkpoint::single(&path.join(SINGLE_FILE));
            }
            index
        } else if path.extension().is_some_and(|e| e == "json") {
            path.to_path_buf()
        } else {
            return Checkpoint::single(path);
        };
        let shown = index.display().to_string();
        let text = std::fs::read_to_string(&index).map_err(|source| Error::Io {
            op: OP,
            path: shown.clone(),
            source,
        })?;
        let bad = |message: String| Error::Format {
            op: OP,
            path: shown.clone(),
            message,
        };
        let parsed: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let map = parsed["weight_map"]
            .as_object()
            .ok_or_else(|| bad("no weight_map object".to_string()))?;
        let dir = index.parent().unwrap_or(Path::new("."));
        let mut files: BTreeMap<String, usize> = BTreeMap::new();
        let mut where_is = HashMap::new();
        for (name, file) in map {
            let file = file
                .as_str()
                .ok_or_else(|| bad(format!("{name}: the shard is not a string")))?;
            let next = files.len();
            let k = *files.entry(file.to_string()).or_insert(next);
            where_is.insert(name.clone(), k);
        }
        let mut order: Vec<(&String, &usize)> = files.iter().collect();
        order.sort_by_key(|&(_, &k)| k);
        let shards = order
            .into_iter()
            .map(|(file, _)| TensorFile::read(OP, &dir.join(file)))
            .collect::<Result<Vec<_>>>()?;
        for (name, &k) in &where_is {
            if shards[k].info(name).is_none() {
                return Err(bad(format!(
                    "{name}: listed in shard {:?}, which does not hold it",
                    files.iter().find(|&(_, &v)| v == k).map(|(f, _)| f)
                )));
            }
        }
        Ok(Checkpoint { shards, where_is })
    }

    fn single(path: &Path) -> Result<Checkpoint> {
        let file = TensorFile::read("load_pretrained", path)?;
        let where_is = file.names().into_iter().map(|n| (n, 0)).collect();
        Ok(Checkpoint {
            shards: vec![file],
            where_is,
        })
    }

    fn has(&self, name: &str) -> bool {
        self.where_is.contains_key(name)
    }

    /// Entry `name` for model tensor `like` (its shape checked, floats
    /// converted to its dtype), and the file's dtype when it differed.
    fn load(&self, name: &str, like: &Tensor) -> Result<(Tensor, Option<DType>)> {
        let shard = &self.shards[self.where_is[name]];
        let loaded = shard.tensor(name, None, like.device())?;
        if loaded.shape() != like.shape() {
            return Err(Error::Format {
                op: "load_pretrained",
                path: name.to_string(),
                message: format!(
                    "shape {:?} in the checkpoint, {:?} in the model",
                    loaded.shape(),
                    like.shape()
                ),
            });
        }
        let (from, to) = (loaded.dtype(), like.dtype());
        let convertible = (from.is_float() && to.is_float()) || (from.is_int() && to.is_int());
        match (from == to, convertible) {
            (true, _) => Ok((loaded, None)),
            (false, true) => Ok((loaded.cast(to), Some(from))),
            (false, false) => Err(Error::Format {
                op: "load_pretrained",
                path: name.to_string(),
                message: format!("dtype {from} in the checkpoint, {to} in the model"),
            }),
        }
    }
}

/// Loads `model`'s parameters and buffers from a Hugging Face checkpoint
/// at `path` (a directory, an index file or one safetensors file; see
/// [`LoadOptions`]), in place, reading one entry at a time. Floats of
/// another width are converted (bf16/f16 -> f32 and back).
pub fn load_pretrained(
    model: &(impl Parameters + ?Sized),
    path: impl AsRef<Path>,
    options: &LoadOptions<'_>,
) -> Result<LoadReport> {
    let ckpt = Checkpoint::open(path.as_ref())?;
    let mut report = LoadReport::default();
    let mut used = std::collections::HashSet::new();
    for (name, param) in state(model) {
        let source = options.rename.map_or_else(|| name.clone(), |f| f(&name));
        let source = if ckpt.has(&source) {
            source
        } else if let Some(&(_, tied)) = options.tied.iter().find(|(n, _)| *n == name) {
            report.tied.push(name.clone());
            options.rename.map_or_else(|| tied.to_string(), |f| f(tied))
        } else if options.optional.contains(&name.as_str()) {
            report.missing.push(name);
            continue;
        } else {
            return Err(Error::Format {
                op: "load_pretrained",
                path: path.as_ref().display().to_string(),
                message: format!("no entry {source:?} for the model's {name:?}"),
            });
        };
        if !ckpt.has(&source) {
            return Err(Error::Format {
                op: "load_pretrained",
                path: path.as_ref().display().to_string(),
                message: format!("no entry {source:?} (tied to {name:?})"),
            });
        }
        let (value, converted) = ckpt.load(&source, &param)?;
        no_grad(|| param.copy_(&value));
        if let Some(from) = converted {
            report.converted.push((name.clone(), from, param.dtype()));
        }
        used.insert(source);
        report.loaded.push(name);
    }
    let mut unused: Vec<String> = ckpt
        .where_is
        .keys()
        .filter(|n| !used.contains(*n))
        .cloned()
        .collect();
    unused.sort();
    report.unused = unused;
    Ok(report)
}

/// Writes `model`'s parameters and buffers to directory `dir` in Hugging
/// Face's sharded layout: `model-0000k-of-0000n.safetensors` files of at
/// most `max_shard_bytes` each (an entry larger than that gets a shard of
/// its own) and [`INDEX_FILE`] mapping each entry to its shard, floats
/// cast to `dtype` when given (bf16 for a half-size checkpoint). Tied
/// weights are written once, as Hugging Face writes them.
pub fn save_sharded(
    model: &(impl Parameters + ?Sized),
    dir: impl AsRef<Path>,
    max_shard_bytes: usize,
    dtype: Option<DType>,
) -> Result<()> {
    const OP: &str = "save_sharded";
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        op: OP,
        path: dir.display().to_string(),
        source,
    })?;
    let entries: Vec<(String, Tensor)> = state(model)
        .into_iter()
        .map(|(n, t)| match dtype {
            Some(d) if t.dtype().is_float() => (n, t.cast(d)),
            _ => (n, t),
        })
        .collect();
    let mut shards: Vec<Vec<(String, Tensor)>> = Vec::new();
    let mut size = 0usize;
    let mut total = 0usize;
    for (name, t) in entries {
        let bytes = t.numel() * t.dtype().size_in_bytes();
        total += bytes;
        if shards.is_empty() || (size + bytes > max_shard_bytes && size > 0) {
            shards.push(Vec::new());
            size = 0;
        }
        size += bytes;
        shards.last_mut().expect("a shard").push((name, t));
    }
    let n = shards.len();
    let mut weight_map = serde_json::Map::new();
    for (k, shard) in shards.iter().enumerate() {
        let file = format!("model-{:05}-of-{n:05}.safetensors", k + 1);
        let path: PathBuf = dir.join(&file);
        let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
        write_entries(OP, shard, Some(metadata), &path)?;
        for (name, _) in shard {
            weight_map.insert(name.clone(), serde_json::Value::String(file.clone()));
        }
    }
    let index = serde_json::json!({
        "metadata": { "total_size": total },
        "weight_map": weight_map,
    });
    let path = dir.join(INDEX_FILE);
    let text = serde_json::to_string_pretty(&index).map_err(|e| Error::Format {
        op: OP,
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    std::fs::write(&path, text).map_err(|source| Error::Io {
        op: OP,
        path: path.display().to_string(),
        source,
    })
}
