//! Warm start: the process's pipeline cache is saved under
//! `LAZYWGPU_CACHE_DIR`, in a file named by the adapter. The directory is
//! read when the process's wgpu device is created, so each case runs in a
//! process of its own: the test binary runs its ignored `child` test with
//! the directory set.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use lazywgpu::Tensor;

/// Where wgpu's cache header keeps the adapter's vendor id (after the
/// 8-byte magic, two u32 versions, the backend byte and three padding
/// bytes of the adapter key): wgpu-core's `PipelineCacheHeader`.
const VENDOR_BYTES: std::ops::Range<usize> = 20..24;

/// Compiles and runs a kernel; run only as a child process of the tests
/// below, with `LAZYWGPU_CACHE_DIR` set by them.
#[test]
#[ignore = "run as a child process by the tests of this file"]
fn child() {
    let Some(dev) = common::gpu() else { return };
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev).unwrap();
    let got = (&x * 2.0).exp().to_vec::<f32>().unwrap();
    let want: Vec<f32> = [2.0f32, 4.0, 6.0].iter().map(|v| v.exp()).collect();
    common::assert_close(&got, &want, 1e-6, 0.0, "exp(2x)");
}

/// Runs `child` in a new process with the cache in `dir`; panics with its
/// output if it fails.
fn run_child(dir: &Path) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child", "--nocapture"])
        .env("LAZYWGPU_CACHE_DIR", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child process failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh cache directory for `case`.
fn cache_dir(case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lazywgpu-cache-{case}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    dir
}

/// The pipeline cache's files in `dir` (the tuning cache's winners,
/// `autotune-*`, live in the same directory: GPUs tune by default).
fn files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|f| {
            !f.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("autotune-")
        })
        .collect()
}

#[test]
fn compiled_pipelines_are_saved_under_the_cache_directory() {
    let Some(dev) = common::gpu() else { return };
    let dir = cache_dir("saved");
    run_child(&dir);
    let files = files(&dir);
    // Vulkan adapters with pipeline caches (lavapipe among them) save one
    // file named by vendor and device; other backends have no cache.
    if dev.name().contains("Vulkan") {
        assert_eq!(files.len(), 1, "{files:?}");
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("wgpu_pipeline_cache_vulkan_"), "{name}");
        assert!(std::fs::metadata(&files[0]).unwrap().len() > 0);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A cache file written for another adapter (here: its header's vendor id
/// changed, as a file copied from another machine) is ignored and
/// rewritten: kernels compile and run, and the file saved afterwards is
/// this adapter's again.
#[test]
fn a_cache_written_for_another_adapter_is_ignored_and_rewritten() {
    let Some(dev) = common::gpu() else { return };
    if !dev.name().contains("Vulkan") {
        return; // Only Vulkan keeps a pipeline cache.
    }
    let dir = cache_dir("foreign");
    run_child(&dir);
    let file = files(&dir).pop().expect("a cache file");
    let good = std::fs::read(&file).unwrap();
    let mut foreign = good.clone();
    for b in &mut foreign[VENDOR_BYTES] {
        *b ^= 0x5a;
    }
    std::fs::write(&file, &foreign).unwrap();
    run_child(&dir);
    let rewritten = std::fs::read(&file).unwrap();
    assert_eq!(
        rewritten[VENDOR_BYTES], good[VENDOR_BYTES],
        "the foreign cache was not replaced"
    );
    std::fs::remove_dir_all(&dir).ok();
}
