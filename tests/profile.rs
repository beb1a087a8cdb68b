//! `LAZYWGPU_PROFILE=1`: every kernel of a graph is timed, by the
//! device's timestamps on a GPU and by the wall clock on a CPU adapter.
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
    // Operands of rows of 64 elements, which lavapipe's lane matmul packs
    // by copies (rows of 32 or 16 it packs by kernels).
    let (c, d) = (Tensor::rand([64, 64], &dev), Tensor::rand([64, 64], &dev));
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    dev.reset_metrics();
    let start = std::time::Instant::now();
    for _ in 0..3 {
        let y = (a.matmul(&b) + 1.0).relu().sum([0], false);
        let v: Vec<f32> = y.to_vec().unwrap();
        assert_eq!(v.len(), 16);
        let v: Vec<f32> = c.matmul(&d).to_vec().unwrap();
        assert_eq!(v.len(), 64 * 64);
    }
    let elapsed = start.elapsed();
    let report = dev
        .kernel_profile()
        .expect("profiling is on for every GPU adapter");
    // A CPU adapter's kernels are timed by the wall clock (its timestamps
    // do not time the shader's work), a GPU's by its timestamps where it
    // has timestamp queries.
    let clock = report.lines().next().unwrap_or_default();
    let cpu = dev.adapter().is_some_and(|a| a.device_type == "Cpu");
    let wall = clock.contains("wall time");
    assert!(wall || clock.contains("device timestamps"), "{report}");
    if cpu {
        assert!(wall, "{report}");
    }
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
    // By the wall clock, the lane matmul (lavapipe's) has its operands'
    // packing in rows of its own: kernels (`pack i of`) and copies
    // (`copy i of`).
    let lanes = dev
        .adapter()
        .is_some_and(|a| a.matmul_kernel.contains("lanes"));
    if wall && lanes {
        let launches = |prefix: &str| {
            let row = (report.lines().find(|l| l.starts_with(prefix)))
                .unwrap_or_else(|| panic!("no row {prefix} in\n{report}"));
            row.split('|')
                .map(str::trim)
                .nth(2)
                .unwrap_or("")
                .to_string()
        };
        assert_eq!(launches("| pack 1 of matmul [64, 16]"), "3", "{report}");
        assert_eq!(launches("| copy 1 of matmul [64, 64]"), "3", "{report}");
    }
    // Each kernel ran alone inside the loop: by the wall clock, their
    // times add up to no more than the loop's (lavapipe's timestamps of
    // threaded submits once summed past the step's wall time).
    if wall {
        let total_ms: f64 = (report.lines())
            .filter(|l| {
                l.starts_with("| ") && !l.starts_with("| kernel") && !l.starts_with("| ---")
            })
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                cells[3].trim_end_matches(" ms").parse::<f64>().unwrap()
            })
            .sum();
        assert!(total_ms > 0.0, "{report}");
        assert!(
            total_ms <= elapsed.as_secs_f64() * 1e3,
            "kernels {total_ms} ms in a loop of {elapsed:?}:\n{report}"
        );
    }
    dev.reset_metrics();
    assert_eq!(
        dev.kernel_profile().unwrap().lines().count(),
        4,
        "reset clears the table (its clock line, a blank line and the header stay)"
    );
}
