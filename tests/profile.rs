//! `LAZYWGPU_PROFILE=1`: every kernel of a graph is timed on the device.
//! One test in its own process: the switch is read when the GPU context is
//! created.

mod common;

use common::gpu;
use lazywgpu::Tensor;

#[test]
fn kernel_profile_lists_every_kernel_with_its_launches() {
    // SAFETY: set before any thread of this process creates the GPU context.
    unsafe { std::env::set_var("LAZYWGPU_PROFILE", "1") };
    let Some(dev) = gpu() else { return };
    let a = Tensor::rand([64, 32], &dev);
    let b = Tensor::rand([32, 16], &dev);
    dev.mark_step().unwrap();
    dev.reset_metrics();
    for _ in 0..3 {
        let y = (a.matmul(&b) + 1.0).relu().sum([0], false);
        let v: Vec<f32> = y.to_vec().unwrap();
        assert_eq!(v.len(), 16);
    }
    let Some(report) = dev.kernel_profile() else {
        // Only adapters without timestamp queries get here; lavapipe has them.
        assert!(
            !dev.name().contains("llvmpipe"),
            "lavapipe supports timestamp queries"
        );
        return;
    };
    let matmul = report
        .lines()
        .find(|l| l.starts_with("| matmul [64, 16]"))
        .unwrap_or_else(|| panic!("no matmul row in\n{report}"));
    let cells: Vec<&str> = matmul.split('|').map(str::trim).collect();
    assert_eq!(cells[2], "3", "launches: {matmul}");
    assert!(
        report.lines().any(|l| l.starts_with("| sum [16]")
            || l.starts_with("| reshape [16]")
            || l.starts_with("| sum [1, 16]")),
        "{report}"
    );
    dev.reset_metrics();
    assert_eq!(
        dev.kernel_profile().unwrap().lines().count(),
        2,
        "reset clears the table"
    );
}
