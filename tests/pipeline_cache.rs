//! Warm start: the process's pipeline cache is saved under
//! `LAZYWGPU_CACHE_DIR`, in a file named by the adapter (its own binary:
//! the directory is read when the process's wgpu device is created).

mod common;

use lazywgpu::Tensor;

#[test]
fn compiled_pipelines_are_saved_under_the_cache_directory() {
    let dir = std::env::temp_dir().join(format!("lazywgpu-cache-{}", std::process::id()));
    // SAFETY: set before any thread of this test binary reads the
    // environment (the only test here, before the first device).
    unsafe { std::env::set_var("LAZYWGPU_CACHE_DIR", &dir) };
    let Some(dev) = common::gpu() else { return };
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev).unwrap();
    assert_eq!((&x * 2.0).exp().to_vec::<f32>().unwrap().len(), 3);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
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
