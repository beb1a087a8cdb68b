//! Shared helpers for the integration tests.
#![allow(dead_code)]

use lazywgpu::Device;

/// The GPU device, or `None` (with a note) when no adapter exists. With
/// `LAZYWGPU_REQUIRE_GPU=1` (as in CI) a missing adapter fails the test
/// instead of skipping it.
pub fn gpu() -> Option<Device> {
    match Device::gpu() {
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
