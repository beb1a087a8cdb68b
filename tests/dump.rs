//! `LAZYWGPU_DUMP=DIR` writes each newly compiled graph's IR, DOT and WGSL.
//! The variable is read when a device is made, so this binary sets it first.

mod common;

use lazywgpu::Tensor;

#[test]
fn dump_writes_ir_dot_and_wgsl() {
    let dir = std::env::temp_dir().join(format!("lazywgpu-dump-{}", std::process::id()));
    // SAFETY: the only test of this binary; set before any device exists.
    unsafe { std::env::set_var("LAZYWGPU_DUMP", &dir) };
    let Some(dev) = common::gpu() else { return };
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev).unwrap();
    let y = (&x * 2.0).exp().t() + 1.0;
    y.to_vec::<f32>().unwrap();
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let find = |suffix: &str| {
        let name = names
            .iter()
            .find(|n| n.ends_with(suffix))
            .unwrap_or_else(|| panic!("no *{suffix} in {names:?}"));
        std::fs::read_to_string(dir.join(name)).unwrap()
    };
    let ir = find(".ir.txt");
    assert!(ir.contains("exp") && ir.contains("tests/dump.rs"), "{ir}");
    assert!(find(".dot").starts_with("digraph"));
    assert!(find(".wgsl").contains("@compute"));
    std::fs::remove_dir_all(&dir).ok();
}
