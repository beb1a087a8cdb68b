//! Per-device settings (`DeviceConfig`): each switch the environment can
//! set is a field, so one process can hold devices configured differently.
//! Oracles: f64 matmul loops (`common::check_matmul_shapes`), values
//! computed in the test, and the files a dump writes.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::gpu;
use lazywgpu::{Device, DeviceConfig, MatmulChoice, Tensor};

fn gpu_with(config: DeviceConfig) -> Option<Device> {
    // `gpu()` fails the test under LAZYWGPU_REQUIRE_GPU=1 when there is no
    // adapter; with one, the configured device shares its wgpu device.
    gpu()?;
    Some(Device::gpu_with(config).expect("a GPU device"))
}

/// A GPU device dumping what it compiles into a fresh directory of this
/// process named after `tag`, and that directory.
fn dumping(tag: &str) -> Option<(Device, std::path::PathBuf)> {
    let dir = std::env::temp_dir().join(format!("lazywgpu-{tag}-{}", std::process::id()));
    let config = DeviceConfig {
        dump_dir: Some(dir.clone()),
        ..DeviceConfig::default()
    };
    Some((gpu_with(config)?, dir))
}

/// Every matmul kernel, chosen per device in one process, over odd batched
/// shapes with a transposed operand and a fused bias-and-relu epilogue.
#[test]
fn every_matmul_kernel_matches_f64() {
    for (choice, what) in [
        (MatmulChoice::Tiled, "tiled matmul"),
        (MatmulChoice::Blocked, "blocked matmul"),
        (MatmulChoice::Lanes, "lane matmul"),
    ] {
        let config = DeviceConfig {
            matmul: Some(choice),
            ..DeviceConfig::default()
        };
        let Some(dev) = gpu_with(config) else { return };
        assert_eq!(dev.config().matmul, Some(choice));
        common::check_matmul_shapes(&dev, what);
    }
}

/// `eager`: every op runs as it is recorded.
#[test]
fn eager_devices_materialise_every_op() {
    let config = DeviceConfig {
        eager: true,
        ..DeviceConfig::default()
    };
    let mut devs = vec![Device::cpu_with(config.clone())];
    devs.extend(gpu_with(config));
    for dev in devs {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2], &dev).unwrap();
        let y = &x * 3.0;
        assert!(!y.is_pending(), "eager: computed at once");
        let z = y.exp() - 1.0;
        assert!(!z.is_pending());
        assert!(dev.metrics().counter("graphs_executed") >= 2);
        let v = z.to_vec::<f32>().unwrap();
        assert!((v[0] - (3.0f32.exp() - 1.0)).abs() < 1e-4);
    }
}

/// Devices made with the defaults stay lazy beside an eager one.
#[test]
fn a_default_device_stays_lazy() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let y = Tensor::from_vec(vec![1.0f32, 2.0], &[2], &dev).unwrap() * 3.0;
    assert!(y.is_pending());
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
}

/// `dump_dir`: each newly compiled graph's IR, DOT, WGSL (annotated with
/// the node and source line of each line) and kernel plans are written.
#[test]
fn dump_writes_ir_dot_and_wgsl() {
    let Some((dev, dir)) = dumping("dump") else {
        return;
    };
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
    assert!(
        ir.contains("exp") && ir.contains("tests/device_config.rs"),
        "{ir}"
    );
    assert!(find(".dot").starts_with("digraph"));
    // Every line computing or storing a node names it and its source line.
    let wgsl = find(".wgsl");
    assert!(wgsl.contains("@compute"));
    let here = "tests/device_config.rs:";
    for op in ["mul", "exp", "add"] {
        assert!(
            wgsl.lines()
                .any(|l| l.contains(&format!(" {op} {here}")) && l.contains("// n")),
            "no line names the {op} node and its source line:\n{wgsl}"
        );
    }
    for line in wgsl.lines().filter(|l| l.trim_start().starts_with("let v")) {
        assert!(
            line.contains("// n"),
            "unannotated value line {line:?}:\n{wgsl}"
        );
    }
    // The plan: what the kernel writes and binds, in binding order.
    let plan = find(".plan.txt");
    assert!(
        plan.contains("workgroups") && plan.contains("bindings:"),
        "{plan}"
    );
    assert!(
        plan.contains("write n") && plan.contains("read n"),
        "{plan}"
    );
    // What the scheduler planned: the one kernel reads the input (a node
    // named with the line that made it).
    let planned = plan
        .split("planned reads:\n")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("no planned reads:\n{plan}"));
    assert!(
        planned.starts_with("  n") && planned.contains(here),
        "{plan}"
    );
    // Beside it, the kernel IR the WGSL was printed from: SSA lets naming
    // their nodes, and the store.
    assert!(plan.contains("kernel IR:"), "{plan}");
    for op in ["Mul(", "Exp(", "Add(", "store out0"] {
        assert!(plan.contains(op), "no {op} in the kernel IR:\n{plan}");
    }
    assert!(
        plan.lines()
            .any(|l| l.contains(": f32") && l.contains("; n")),
        "{plan}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn tensors_and_devices_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tensor>();
    check::<Device>();
    check::<DeviceConfig>();
}

/// `dump_dir`: a matmul's plan lists every matmul kernel and whether it
/// can compute the product here; the cooperative-matrix kernel never can
/// for an f32 product (it computes f16 only).
#[test]
fn dump_lists_the_matmul_candidates() {
    let Some((dev, dir)) = dumping("dump-mm") else {
        return;
    };
    let a = Tensor::from_vec(vec![0.5f32; 6 * 8], [6, 8], &dev).unwrap();
    let b = Tensor::from_vec(vec![0.25f32; 8 * 5], [8, 5], &dev).unwrap();
    let got = a.matmul(&b).to_vec::<f32>().unwrap();
    assert!(got.iter().all(|&v| v == 1.0), "{got:?}");
    let plans = common::dumped_plans(&dir);
    let matmul = plans
        .iter()
        .find(|p| p.contains("strategy: Matmul"))
        .unwrap_or_else(|| panic!("no matmul plan in {plans:?}"));
    assert!(
        matmul.contains("candidates: tiled, blocked, lanes")
            && matmul.contains("coop (not valid here)"),
        "{matmul}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A dumped kernel that reads sizes from its sizes binding lists each:
/// its slot, the expression of the graph's numbers that gives it, and
/// its value at the dumped graph. Rows of 64 then 50: the second
/// graph's kernel reads its element count (the output's rows times its
/// columns, node 3) as `size[0]`.
#[test]
fn a_dump_lists_the_sizes_a_kernel_reads_and_their_expressions() {
    let Some((dev, dir)) = dumping("dump-sizes") else {
        return;
    };
    for rows in [64usize, 50] {
        let x = Tensor::from_vec(vec![1.0f32; rows * 7], [rows, 7], &dev).unwrap();
        let y = (&x * 2.0).exp();
        assert_eq!(y.to_vec::<f32>().unwrap().len(), rows * 7);
        dev.mark_step().unwrap();
    }
    let plans: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".plan.txt"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(plans.len(), 2, "one kernel for each of the two graphs");
    let generic: Vec<&String> = plans.iter().filter(|p| p.contains("size[0] = ")).collect();
    assert_eq!(generic.len(), 1, "only the second is generic: {plans:#?}");
    let line = (generic[0].lines())
        .find(|l| l.starts_with("size[0] = "))
        .unwrap_or_default();
    assert_eq!(line, "size[0] = n3[0] * n3[1] (350 here)", "{}", generic[0]);
    assert!(generic[0].contains("dynamic sizes (uniform, 1 vec4)"));
    let _ = std::fs::remove_dir_all(&dir);
}
