//! Tensors past the 128 MiB storage-binding limit (lavapipe's, and many
//! GPUs'): kernels bind such buffers in parts and pick the part by index.
//! 40 million f32 (160 MB) through elementwise ops, a strided view whose
//! reads jump across parts, and a full sum, against plain f64 loops; and
//! past the adapter's largest buffer a clear `Error`, not a panic.

mod common;

use common::gpu;
use lazywgpu::{Error, Tensor};

const N: usize = 40_000_000;

fn data() -> Vec<f32> {
    (0..N).map(|i| (i % 1000) as f32 * 0.001).collect()
}

#[test]
fn elementwise_and_views_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    let host = data();
    let x = Tensor::from_vec(host.clone(), [N], &dev).unwrap();
    let y: Vec<f32> = (&x * 2.0 + 1.0).sqrt().to_vec().unwrap();
    assert_eq!(y.len(), N);
    for (i, (&got, &v)) in y.iter().zip(&host).enumerate() {
        let want = ((v as f64) * 2.0 + 1.0).sqrt() as f32;
        assert!(
            (got - want).abs() <= 1e-6 * want,
            "element {i}: {got} vs {want}"
        );
    }
    // A transposed view: output element (r, c) reads input c * 8000 + r,
    // so neighbouring outputs read from different 128 MiB parts.
    let t: Vec<f32> = (x.reshape([5000, 8000]).t() + 1.0).to_vec().unwrap();
    for &(r, c) in &[
        (0usize, 0usize),
        (7999, 4999),
        (1234, 4000),
        (7000, 10),
        (3, 4999),
    ] {
        assert_eq!(
            t[r * 5000 + c],
            host[c * 8000 + r] + 1.0,
            "transposed ({r}, {c})"
        );
    }
}

#[test]
fn sum_past_the_binding_limit() {
    let Some(dev) = gpu() else { return };
    let host = data();
    let want: f64 = host.iter().map(|&v| v as f64).sum();
    let x = Tensor::from_vec(host, [N], &dev).unwrap();
    let got = x.sum_all().item::<f32>().unwrap() as f64;
    assert!((got - want).abs() <= 1e-5 * want, "sum {got} vs {want}");
    let rows: Vec<f32> = x.reshape([4, N / 4]).sum([1], false).to_vec().unwrap();
    let part: f64 = rows.iter().map(|&v| v as f64).sum();
    assert!(
        (part - want).abs() <= 1e-5 * want,
        "row sums add to {part}, want {want}"
    );
}

#[test]
fn past_the_largest_buffer_is_an_error() {
    let Some(dev) = gpu() else { return };
    // 3 GiB of f32 is more than lavapipe's (and most adapters') largest
    // buffer, but not an H200's: one element past the adapter's own
    // limit, at least that. Summing it needs no buffer of that size (the
    // fill fuses into the reduction); reading it back does.
    let limit = dev.adapter().expect("a GPU device").max_buffer_bytes;
    let n = (limit / 4 + 1).max(805_306_368);
    let huge = Tensor::zeros([n as usize], &dev) + 1.0;
    if n == 805_306_368 {
        let total = huge.sum_all().item::<f32>().unwrap();
        assert!((total - 805_306_368.0).abs() <= 1e-5 * 805_306_368.0);
    }
    match huge.to_vec::<f32>() {
        Err(Error::TooLarge { bytes, limit, .. }) => assert!(bytes > limit),
        Err(other) => panic!("expected Error::TooLarge, got {other}"),
        Ok(v) => panic!("expected Error::TooLarge, got {} elements", v.len()),
    }
}

/// A strided view of a stored buffer just past one binding (128 MiB on
/// lavapipe), read back: the copy's output holds its few elements alone,
/// though the view reaches the input's last binding part. Before, the
/// output was bound in the input's parts (an invalid bind group), and
/// the error surfaced again at the next, unrelated read.
#[test]
fn a_strided_view_of_a_buffer_past_the_binding_limit_reads_back() {
    let Some(dev) = gpu() else { return };
    let n = 33_554_436; // 128 MiB + 16 bytes
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let x = Tensor::from_vec(host.clone(), [n], &dev).unwrap();
    let tail = x.slice(0, n - 8, n, 2).to_vec::<f32>().unwrap();
    let want: Vec<f32> = (n - 8..n).step_by(2).map(|i| host[i]).collect();
    assert_eq!(tail, want, "the last elements, two apart");
    let spread = x.slice(0, 1, n, 4097).to_vec::<f32>().unwrap();
    let want: Vec<f32> = (1..n).step_by(4097).map(|i| host[i]).collect();
    assert_eq!(spread, want, "every 4,097th element");
    // The device is clean afterwards: an unrelated read works.
    let y = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev).unwrap();
    assert_eq!((&y * 2.0).to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    dev.wait().unwrap();
}
