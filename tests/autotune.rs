//! Autotuning on the adapter the tests run on: the first device with
//! tuning on times the matmul candidates and the reduction rules, writes
//! the winners to the tuning cache and reports them; a second device
//! reads them back without timing; the chosen kernels compute right. One test in its own binary:
//! it points the cache directory at a fresh folder through the
//! environment before any device exists.

mod common;

use lazywgpu::{Autotune, Device, DeviceConfig, Tensor};

#[test]
fn the_first_device_tunes_and_the_next_reads_the_winner() {
    let dir = std::env::temp_dir().join(format!("lazywgpu-autotune-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: the only test of this binary, run before any thread of the
    // library exists; nothing else reads the environment concurrently.
    unsafe { std::env::set_var("LAZYWGPU_CACHE_DIR", &dir) };
    // Whether there is an adapter, asked of a device that does not tune.
    let off = DeviceConfig {
        autotune: Some(Autotune::Off),
        ..DeviceConfig::default()
    };
    if Device::gpu_with(off).is_err() {
        assert!(
            std::env::var_os("LAZYWGPU_REQUIRE_GPU").is_none(),
            "LAZYWGPU_REQUIRE_GPU is set but there is no adapter"
        );
        return;
    }
    let config = DeviceConfig {
        autotune: Some(Autotune::Fast),
        ..DeviceConfig::default()
    };
    let first = Device::gpu_with(config.clone()).unwrap();
    let report = first.adapter().unwrap();
    let tuning = report.tuning.clone().expect("tuning ran");
    assert!(!tuning.from_cache && tuning.seconds > 0.0, "{tuning}");
    assert_eq!(tuning.timings[0].name, tuning.builtin);
    assert_eq!(tuning.timings[0].relative, Some(1.0));
    assert!(tuning.timings.iter().any(|t| t.name == tuning.winner));
    assert!(report.matmul_kernel.starts_with(&tuning.winner), "{report}");
    assert!(first.metrics().timer("autotune").is_some());
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for kind in ["matmul", "reduce"] {
        let prefix = format!("autotune-{kind}-");
        let n = files.iter().filter(|f| f.starts_with(&prefix)).count();
        assert_eq!(n, 1, "{kind}: {files:?}");
    }
    assert!(
        report.matmul_class_tunings.is_empty(),
        "no matmul compiled yet"
    );
    // The reduction rule: six candidates timed, the adapter kind's
    // built-in first, the winner the rule the device's reductions follow.
    let reduce = report.reduce_tuning.clone().expect("reductions tuned");
    assert!(!reduce.from_cache && reduce.seconds > 0.0, "{reduce}");
    let builtin = if common::gpu_schedules(&first) {
        "tree-from-256"
    } else {
        "tree-from-4096"
    };
    assert_eq!(reduce.builtin, builtin);
    assert_eq!(reduce.timings.len(), 6, "{reduce}");
    assert!(
        reduce.timings.iter().all(|t| t.relative.is_some()),
        "{reduce}"
    );
    assert_eq!(report.reduce_rule, reduce.winner, "{report}");

    let second = Device::gpu_with(config.clone()).unwrap();
    let second_report = second.adapter().unwrap();
    let again = second_report.tuning.clone().unwrap();
    assert!(again.from_cache && again.seconds == 0.0, "{again}");
    assert_eq!(again.winner, tuning.winner);
    assert_eq!(again.timings, tuning.timings);
    let reduce_again = second_report.reduce_tuning.clone().unwrap();
    assert!(reduce_again.from_cache, "{reduce_again}");
    assert_eq!(
        (reduce_again.winner, reduce_again.timings),
        (reduce.winner, reduce.timings)
    );

    // Tuning off, or a kernel named, leaves the built-in or named kernel.
    let off = Device::gpu_with(DeviceConfig {
        autotune: Some(Autotune::Off),
        ..DeviceConfig::default()
    })
    .unwrap();
    let off_report = off.adapter().unwrap();
    assert!(off_report.tuning.is_none() && off_report.reduce_tuning.is_none());
    assert_eq!(off_report.reduce_rule, builtin);

    // Per-class tuning: the first product of a class times the kernels
    // on that class's sizes (the second device's winner timed first)
    // and writes a file of its own; a product of other sizes in the same
    // class times nothing more; another class is timed apart.
    let product = |dev: &Device, (m, k, n): (usize, usize, usize)| {
        let a = common::data(m * k, 6);
        let b = common::data(k * n, 7);
        let want = common::matmul_f64(&a, &b, (1, m, k, n));
        let at = Tensor::from_vec(a, [m, k], dev).unwrap();
        let bt = Tensor::from_vec(b, [k, n], dev).unwrap();
        let got = at.matmul(&bt).to_vec::<f32>().unwrap();
        common::assert_close(&got, &want, 1e-4, 1e-4, "per-class tuned matmul");
    };
    product(&second, (40, 300, 50));
    let classes = second.adapter().unwrap().matmul_class_tunings;
    assert_eq!(classes.len(), 1, "{classes:?}");
    let class = &classes[0];
    assert_eq!(
        class.class.as_deref(),
        Some("f32 1 x 17..64 x 257..1024 x 17..64")
    );
    assert!(!class.from_cache && class.seconds > 0.0, "{class}");
    assert_eq!(class.builtin, again.winner, "{class}");
    assert_eq!(class.timings[0].relative, Some(1.0), "{class}");
    assert!(
        class.timings.iter().all(|t| t.relative.is_some()),
        "{class}"
    );
    product(&second, (37, 300, 45));
    // A product of another class on a line of its own (the site of
    // `product` keeps the kernel its first size got).
    let (a, b) = (common::data(5 * 7, 10), common::data(7 * 3, 11));
    let want = common::matmul_f64(&a, &b, (1, 5, 7, 3));
    let at = Tensor::from_vec(a, [5, 7], &second).unwrap();
    let bt = Tensor::from_vec(b, [7, 3], &second).unwrap();
    let got = at.matmul(&bt).to_vec::<f32>().unwrap();
    common::assert_close(&got, &want, 1e-4, 1e-4, "another class");
    let classes = second.adapter().unwrap().matmul_class_tunings;
    assert_eq!(classes.len(), 2, "{classes:?}");
    assert_eq!(
        classes[1].class.as_deref(),
        Some("f32 1 x 5..16 x 5..16 x 2..4")
    );
    let class_files = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("autotune-matmul-")
        })
        .count();
    assert_eq!(class_files, 3, "the adapter's matmul file and two classes");
    // A later device reads the class's winner back.
    let third = Device::gpu_with(config.clone()).unwrap();
    product(&third, (64, 1000, 60));
    let read = third.adapter().unwrap().matmul_class_tunings;
    assert_eq!(read.len(), 1, "{read:?}");
    assert!(read[0].from_cache && read[0].seconds == 0.0, "{}", read[0]);
    assert_eq!(
        (&read[0].winner, &read[0].timings),
        (&class.winner, &class.timings)
    );
    // A batch marked dynamic that crosses into another class keeps the
    // kernel its site got first: the second size compiles nothing and
    // tunes no class.
    let mut compiled = None;
    for rows in [40, 9] {
        let a = common::data(rows * 300, 8);
        let b = common::data(300 * 50, 9);
        let want = common::matmul_f64(&a, &b, (1, rows, 300, 50));
        let at = Tensor::from_vec(a, [rows, 300], &third)
            .unwrap()
            .mark_dynamic(0);
        let bt = Tensor::from_vec(b, [300, 50], &third).unwrap();
        let got = at.matmul(&bt).to_vec::<f32>().unwrap();
        common::assert_close(&got, &want, 1e-4, 1e-4, "marked batch");
        let now = third.metrics().counter("kernels_compiled");
        assert_eq!(*compiled.get_or_insert(now), now, "{rows} rows compiled");
    }
    let tuned = third.adapter().unwrap().matmul_class_tunings;
    assert!(
        tuned
            .iter()
            .all(|t| t.class.as_deref() != Some("f32 1 x 5..16 x 257..1024 x 17..64")),
        "the 9-row class was tuned: {tuned:?}"
    );
    // Tuning off tunes no class.
    product(&off, (40, 300, 50));
    assert!(off.adapter().unwrap().matmul_class_tunings.is_empty());

    // The tuned device's product against an f64 one.
    let (m, k, n) = (37, 300, 45);
    let a = common::data(m * k, 3);
    let b = common::data(k * n, 4);
    let want = common::matmul_f64(&a, &b, (1, m, k, n));
    let at = Tensor::from_vec(a, [m, k], &second).unwrap();
    let bt = Tensor::from_vec(b, [k, n], &second).unwrap();
    let got = at.matmul(&bt).to_vec::<f32>().unwrap();
    common::assert_close(&got, &want, 1e-4, 1e-4, "tuned matmul");
    // The tuned rule's sums over rows of several lengths and columns,
    // against f64 sums, each on a device of its own (a device keeps a
    // site's first strategies at later sizes).
    for (rows, cols) in [(300, 7), (40, 1000), (3, 5000)] {
        let dev = Device::gpu_with(config.clone()).unwrap();
        let host = common::data(rows * cols, 5);
        let x = Tensor::from_vec(host.clone(), [rows, cols], &dev).unwrap();
        let by_row = x.sum([1], false).to_vec::<f32>().unwrap();
        let by_col = x.sum([0], false).to_vec::<f32>().unwrap();
        let row_want: Vec<f32> = (0..rows)
            .map(|r| (0..cols).map(|c| host[r * cols + c] as f64).sum::<f64>() as f32)
            .collect();
        let col_want: Vec<f32> = (0..cols)
            .map(|c| (0..rows).map(|r| host[r * cols + c] as f64).sum::<f64>() as f32)
            .collect();
        common::assert_close(&by_row, &row_want, 1e-4, 1e-4, "tuned row sums");
        common::assert_close(&by_col, &col_want, 1e-4, 1e-4, "tuned column sums");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
