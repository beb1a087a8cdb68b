//! Shared helpers for the integration tests.
#![allow(dead_code)]

use lazywgpu::data::Mnist;
use lazywgpu::nn;
use lazywgpu::{Device, DeviceConfig, Tensor};

/// The GPU device, or `None` (with a note) when no adapter exists. With
/// `LAZYWGPU_REQUIRE_GPU=1` (as in CI) a missing adapter fails the test
/// instead of skipping it. It checks every graph it binds to its trace
/// site's kernels without lowering against lowering it
/// (`DeviceConfig::check_binds`); devices made with `Device::gpu` bind as
/// a user's do.
pub fn gpu() -> Option<Device> {
    let config = DeviceConfig {
        check_binds: true,
        ..DeviceConfig::from_env()
    };
    match Device::gpu_with(config) {
        Ok(dev) => Some(dev),
        Err(e) => {
            if std::env::var("LAZYWGPU_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("LAZYWGPU_REQUIRE_GPU=1 but no GPU adapter: {e}");
            }
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}

/// The CPU reference device, and the GPU one when there is an adapter
/// (see [`gpu`]).
pub fn devices() -> Vec<Device> {
    let mut devs = vec![Device::cpu()];
    devs.extend(gpu());
    devs
}

/// Asserts `actual` is within `atol + rtol * |expected|` of `expected`
/// everywhere (NaNs must match NaNs), naming the first bad index.
#[track_caller]
pub fn assert_close(actual: &[f32], expected: &[f32], rtol: f32, atol: f32, what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let ok = if e.is_nan() {
            a.is_nan()
        } else if e.is_infinite() {
            a == e
        } else {
            (a - e).abs() <= atol + rtol * e.abs()
        };
        assert!(
            ok,
            "{what}: element {i}: got {a}, expected {e} (rtol {rtol}, atol {atol})"
        );
    }
}

/// Deterministic test data in [-1, 1).
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u64 * 2654435761 + seed * 97) % 1000) as f32 / 500.0) - 1.0)
        .collect()
}

/// The kernel plans (`*.plan.txt`) in a `LAZYWGPU_DUMP` directory.
pub fn dumped_plans(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".plan.txt"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// `a` ([bsz, m, k], row-major) times `b` ([k, n], shared by every batch
/// entry), accumulated in f64.
pub fn matmul_f64(a: &[f32], b: &[f32], (bsz, m, k, n): (usize, usize, usize, usize)) -> Vec<f32> {
    (0..bsz * m * n)
        .map(|e| {
            let (bi, i, j) = (e / (m * n), e / n % m, e % n);
            (0..k)
                .map(|kk| a[bi * m * k + i * k + kk] as f64 * b[kk * n + j] as f64)
                .sum::<f64>() as f32
        })
        .collect()
}

/// Batched matmuls of odd sizes, B broadcast over the batch and
/// optionally read through a transposed view, with a bias-and-relu
/// epilogue, against f64 loops: for the matmul kernel a process-wide
/// switch selects (`what` names it).
pub fn check_matmul_shapes(dev: &Device, what: &str) {
    for &(bsz, m, k, n, transposed) in &[
        (1, 1, 1, 1, false),
        (1, 65, 17, 130, false),
        (2, 64, 64, 64, true),
        (3, 7, 100, 3, true),
        (1, 128, 33, 70, false),
        (2, 100, 257, 700, true),
    ] {
        let a = data(bsz * m * k, 1);
        let b = data(k * n, 2);
        let want = matmul_f64(&a, &b, (bsz, m, k, n));
        let ta = Tensor::from_vec(a, [bsz, m, k], dev).unwrap();
        let tb = if transposed {
            // B stored as its transpose and read through a view.
            let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
            Tensor::from_vec(bt, [n, k], dev).unwrap().t()
        } else {
            Tensor::from_vec(b, [k, n], dev).unwrap()
        };
        // With a bias-and-relu epilogue, as in a Linear layer.
        let y = (ta.matmul(&tb) + 0.25).relu();
        let want: Vec<f32> = want.iter().map(|v| (v + 0.25).max(0.0)).collect();
        let atol = 1e-5 * (k as f32).sqrt() * 4.0;
        assert_close(
            &y.to_vec::<f32>().unwrap(),
            &want,
            1e-4,
            atol,
            &format!("{what} {bsz}x{m}x{k}x{n} (B transposed: {transposed})"),
        );
    }
}

/// The MNIST subset shipped in `examples/data/mnist-10k`.
pub fn mnist() -> Mnist {
    Mnist::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/mnist-10k"))
        .expect("the MNIST subset in examples/data")
}

/// The 784-128-10 ReLU MLP of the MNIST tests.
pub fn mnist_mlp(dev: &Device) -> nn::Sequential {
    nn::Sequential::new()
        .add(nn::Flatten)
        .add(nn::Linear::new(784, 128, dev))
        .add(nn::ReLU)
        .add(nn::Linear::new(128, 10, dev))
}
/// Asserts that the losses `got` on `dev` (taking `started` until now)
/// follow PyTorch's `want` step for step: each relative difference below
/// `tolerance(step)`; prints them all first.
#[allow(dead_code)] // not every test binary compares losses
pub fn assert_losses_follow(
    dev: &Device,
    got: &[f32],
    want: &[f64],
    tolerance: impl Fn(usize) -> f64,
    started: std::time::Instant,
) {
    let relative: Vec<f64> = (got.iter().zip(want))
        .map(|(&g, &w)| (g as f64 - w).abs() / w.abs())
        .collect();
    let shown: Vec<String> = relative.iter().map(|r| format!("{r:.1e}")).collect();
    eprintln!(
        "{}: losses {got:?}, relative differences [{}] ({:.1} s)",
        dev.name(),
        shown.join(", "),
        started.elapsed().as_secs_f64()
    );
    assert!(
        got.len() <= want.len(),
        "{} losses, {} from PyTorch",
        got.len(),
        want.len()
    );
    for (step, &r) in relative.iter().enumerate() {
        let tol = tolerance(step);
        assert!(
            r < tol,
            "{}: step {step} differs by {r:.1e} from PyTorch's (tolerance {tol:.1e}): {got:?} against {want:?}",
            dev.name()
        );
    }
}

pub mod parity;

/// Whether `dev` schedules kernels as for a GPU: long reductions split
/// from 4,096 elements into up to four stages (GPUs, and lavapipe under
/// `LAZYWGPU_GPU_CHOICES=1`), rather than lavapipe's two stages from
/// 65,536. Tests that count kernels or compiles expect each schedule's
/// own counts.
#[allow(dead_code)]
pub fn gpu_schedules(dev: &Device) -> bool {
    dev.adapter().is_some_and(|a| a.reduce_stages > 2)
}

/// A property test's configuration: with `PROPTEST_CASES` set, a longer
/// run from a random seed (`PROPTEST_RNG_SEED` fixes it); otherwise
/// `default` cases from a fixed seed, so that CI runs the cases a local
/// run passed, in a time that does not vary with the draw.
pub fn proptest_config(default: u32) -> proptest::test_runner::Config {
    let mut config = proptest::test_runner::Config::default();
    if std::env::var("PROPTEST_CASES").is_err() {
        config.cases = default;
        if std::env::var("PROPTEST_RNG_SEED").is_err() {
            config.rng_seed = proptest::test_runner::RngSeed::Fixed(29);
        }
    }
    config
}
