//! Tuning winners kept on disk, one small text file per key under the
//! cache directory (`LAZYWGPU_CACHE_DIR`, as the pipeline cache), written
//! by atomic rename so that concurrent processes and interrupted writes
//! never leave a half file. A file that does not parse, or whose key is
//! not exactly the one asked for, is ignored (and rewritten by the next
//! tuning run): the key holds everything that could change a winner or
//! make it invalid, so a file copied from another machine or written by
//! another library version is never used.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::CandidateTiming;
use crate::runtime::gpu::GpuContext;

/// The first line of every tuning file (and its format's version).
const MAGIC: &str = "lazywgpu-autotune 1";

/// What a tuned choice depends on, as one line of text (also stored in
/// the file and compared whole on reading: a hash collision cannot
/// return another key's winner).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TuneKey {
    /// The kind of kernel (`matmul`): the file's name starts with it.
    kind: String,
    described: String,
}

impl TuneKey {
    /// The key of tuning `kind` over `candidates` on `shapes` on the
    /// adapter whose facts are `adapter` (see [`adapter_facts`]).
    pub fn new(kind: &str, adapter: &str, candidates: &[&str], shapes: &str) -> TuneKey {
        TuneKey {
            kind: kind.to_string(),
            described: format!(
                "kind={kind}; lazywgpu={}; {adapter}; candidates={}; shapes={shapes}",
                env!("CARGO_PKG_VERSION"),
                candidates.join(",")
            ),
        }
    }

    /// The kind of kernel tuned.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The key as text.
    pub fn described(&self) -> &str {
        &self.described
    }

    /// The file this key's record lives in under `dir`.
    pub fn path(&self, dir: &Path) -> PathBuf {
        dir.join(format!(
            "autotune-{}-{:016x}.txt",
            self.kind,
            fnv1a(&self.described)
        ))
    }
}

/// FNV-1a, 64 bits: stable across Rust releases and platforms (the
/// standard library's hasher is not), which file names must be.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The revision of the tuned kernels' code: raise it when a candidate's
/// generated code changes, so that winners timed on the old code are
/// timed again (the library version alone does not change between
/// development builds).
const KERNELS_REVISION: u32 = 1;

/// The adapter's facts that a winner depends on: its identity and
/// driver, the launch limits the candidates rely on (a winner must not
/// outlive a limit it was valid under), and for CPU adapters the CPU and
/// the thread and vector settings lavapipe reads.
pub(crate) fn adapter_facts(ctx: &GpuContext) -> String {
    let (info, limits) = (&ctx.info, &ctx.limits);
    let mut facts = format!(
        "adapter={} ({:?}, {:?}, {:04x}:{:04x}); driver={} {}; kernels={KERNELS_REVISION}; limits=buffer {} binding {} storage buffers {} workgroup storage {} invocations {} subgroups {}..{} texture {} layers {}; features={:?}",
        info.name,
        info.backend,
        info.device_type,
        info.vendor,
        info.device,
        info.driver,
        info.driver_info,
        limits.max_buffer_size,
        limits.max_storage_buffer_binding_size,
        limits.max_storage_buffers_per_shader_stage,
        limits.max_compute_workgroup_storage_size,
        limits.max_compute_invocations_per_workgroup,
        info.subgroup_min_size,
        info.subgroup_max_size,
        limits.max_texture_dimension_2d,
        limits.max_texture_array_layers,
        ctx.features,
    );
    if info.device_type == wgpu::DeviceType::Cpu {
        let threads = std::thread::available_parallelism().map_or(0, |n| n.get());
        facts.push_str(&format!("; cpu={}; threads={threads}", cpu_model()));
        for (var, v) in &crate::config::ProcessConfig::get().lavapipe {
            facts.push_str(&format!("; {var}={v}"));
        }
    }
    facts.replace('\n', " ")
}

/// The CPU's model name (Linux's `/proc/cpuinfo`; `unknown` elsewhere).
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// A tuning run's outcome as stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Record {
    pub winner: String,
    pub timings: Vec<CandidateTiming>,
}

/// The record for `key` in `dir`, if a well-formed one for exactly that
/// key is there and its winner is one of `candidates`.
pub(crate) fn read(dir: &Path, key: &TuneKey, candidates: &[&str]) -> Option<Record> {
    let text = std::fs::read_to_string(key.path(dir)).ok()?;
    parse(&text, key, candidates)
}

fn parse(text: &str, key: &TuneKey, candidates: &[&str]) -> Option<Record> {
    let mut lines = text.lines();
    if lines.next()? != MAGIC || lines.next()?.strip_prefix("key ")? != key.described {
        return None;
    }
    let winner = lines.next()?.strip_prefix("winner ")?.to_string();
    if !candidates.contains(&winner.as_str()) {
        return None;
    }
    let mut timings = Vec::new();
    for line in lines {
        let mut parts = line.splitn(4, ' ');
        if parts.next()? != "candidate" {
            return None;
        }
        let name = parts.next()?.to_string();
        let (relative, failure) = match parts.next()? {
            "failed" => (None, Some(parts.next().unwrap_or("").to_string())),
            r => (Some(r.parse::<f64>().ok()?), None),
        };
        timings.push(CandidateTiming {
            name,
            relative,
            failure,
        });
    }
    Some(Record { winner, timings })
}

/// The file's text for `record` under `key`.
fn render(key: &TuneKey, record: &Record) -> String {
    let mut text = format!("{MAGIC}\nkey {}\nwinner {}\n", key.described, record.winner);
    for t in &record.timings {
        match t.relative {
            Some(r) => text.push_str(&format!("candidate {} {r}\n", t.name)),
            None => text.push_str(&format!(
                "candidate {} failed {}\n",
                t.name,
                t.failure.as_deref().unwrap_or("").replace('\n', " ")
            )),
        }
    }
    text
}

/// Writes `record` for `key` into `dir`: to a file of this process's own,
/// then renamed over the key's file, so readers see the old file or the
/// new one, never part of either.
pub(crate) fn write(dir: &Path, key: &TuneKey, record: &Record) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = key.path(dir);
    // A name of this writer's own: processes by id, threads of one
    // process by a counter, and `create_new` refuses a clash.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let mut file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    file.write_all(render(key, record).as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, &path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> TuneKey {
        TuneKey::new("matmul", "adapter=test", &["tiled", "blocked"], "1024^3")
    }

    fn record() -> Record {
        Record {
            winner: "blocked".to_string(),
            timings: vec![
                CandidateTiming {
                    name: "tiled".to_string(),
                    relative: Some(1.0),
                    failure: None,
                },
                CandidateTiming {
                    name: "blocked".to_string(),
                    relative: Some(0.61),
                    failure: None,
                },
                CandidateTiming {
                    name: "lanes".to_string(),
                    relative: None,
                    failure: Some("wrong values\nat 3".to_string()),
                },
            ],
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lazywgpu-tune-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_written_record_reads_back() {
        let d = dir("roundtrip");
        write(&d, &key(), &record()).unwrap();
        let back = read(&d, &key(), &["tiled", "blocked"]).unwrap();
        assert_eq!(back.winner, "blocked");
        assert_eq!(back.timings[1].relative, Some(0.61));
        assert_eq!(
            back.timings[2].failure.as_deref(),
            Some("wrong values at 3")
        );
        // No temporary file is left beside it.
        let files: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
        assert_eq!(files.len(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn another_key_or_candidate_set_reads_nothing() {
        let d = dir("keys");
        write(&d, &key(), &record()).unwrap();
        let other = TuneKey::new("matmul", "adapter=other", &["tiled", "blocked"], "1024^3");
        assert_eq!(read(&d, &other, &["tiled", "blocked"]), None);
        let more = TuneKey::new(
            "matmul",
            "adapter=test",
            &["tiled", "blocked", "new"],
            "1024^3",
        );
        assert_eq!(read(&d, &more, &["tiled", "blocked", "new"]), None);
        // A winner that is no longer a candidate is not used.
        assert_eq!(read(&d, &key(), &["tiled"]), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_corrupt_file_is_ignored_and_rewritten() {
        let d = dir("corrupt");
        std::fs::create_dir_all(&d).unwrap();
        let good = render(&key(), &record());
        let corruptions = [
            String::new(),
            "garbage".to_string(),
            good.replace(MAGIC, "lazywgpu-autotune 0"),
            good.replace("0.61", "fast"),
            good[..good.len() / 2].replace("winner", "w"),
            good.replace("candidate blocked", "candidat blocked"),
        ];
        for bad in corruptions {
            std::fs::write(key().path(&d), &bad).unwrap();
            assert_eq!(read(&d, &key(), &["tiled", "blocked"]), None, "{bad:?}");
        }
        write(&d, &key(), &record()).unwrap();
        assert!(read(&d, &key(), &["tiled", "blocked"]).is_some());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn concurrent_writers_leave_one_whole_file() {
        let d = dir("concurrent");
        // Threads of one process writing the same key at once, each a
        // record of its own: the file read back is always one of them,
        // whole, and no temporary file is left.
        let records: Vec<Record> = (0..8)
            .map(|i| {
                let mut r = record();
                r.timings[1].relative = Some(0.5 + i as f64 / 100.0);
                // As read back: a failure's text on one line.
                r.timings[2].failure = Some("wrong values at 3".to_string());
                r.timings.truncate(2 + i % 2);
                r
            })
            .collect();
        let threads: Vec<_> = records
            .iter()
            .cloned()
            .map(|r| {
                let d = d.clone();
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        write(&d, &key(), &r).unwrap();
                    }
                })
            })
            .collect();
        for _ in 0..200 {
            if let Some(back) = read(&d, &key(), &["tiled", "blocked"]) {
                assert!(records.contains(&back), "{back:?}");
            }
        }
        for t in threads {
            t.join().unwrap();
        }
        let back = read(&d, &key(), &["tiled", "blocked"]).unwrap();
        assert!(records.contains(&back), "{back:?}");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn file_names_are_stable() {
        // FNV-1a's published test vector: the name must not change with
        // the Rust release.
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        assert!(
            key()
                .path(Path::new("/c"))
                .to_string_lossy()
                .starts_with("/c/autotune-matmul-")
        );
    }
}
