//! The configuration that discrete GPUs get, checked on whatever adapter
//! this machine has: the 256-invocation tiled matmul kernel
//! (`LAZYWGPU_MATMUL=tiled`; CPU adapters such as lavapipe default to the
//! register-blocked one) and submission on the caller's thread
//! (`LAZYWGPU_SUBMIT_THREAD=0`; CPU adapters default to a submission
//! thread). One test in its own process: the switches are read when the
//! GPU context is created.

mod common;

use common::{assert_close, gpu};
use lazywgpu::Tensor;

fn data(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u64 * 2654435761 + seed * 97) % 1000) as f32 / 500.0) - 1.0)
        .collect()
}

#[test]
fn tiled_matmul_and_inline_submission() {
    // SAFETY: set before any thread of this process creates the GPU context.
    unsafe {
        std::env::set_var("LAZYWGPU_MATMUL", "tiled");
        std::env::set_var("LAZYWGPU_SUBMIT_THREAD", "0");
    }
    let Some(dev) = gpu() else { return };
    for &(bsz, m, k, n, transposed) in &[
        (1, 1, 1, 1, false),
        (1, 65, 17, 130, false),
        (2, 64, 64, 64, true),
        (3, 7, 100, 3, true),
        (1, 128, 33, 70, false),
    ] {
        let a = data(bsz * m * k, 1);
        let b = data(k * n, 2);
        let mut want = vec![0.0f32; bsz * m * n];
        for bi in 0..bsz {
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..k)
                        .map(|kk| a[bi * m * k + i * k + kk] as f64 * b[kk * n + j] as f64)
                        .sum();
                    want[bi * m * n + i * n + j] = s as f32;
                }
            }
        }
        let ta = Tensor::from_vec(a, [bsz, m, k], &dev).unwrap();
        let tb = if transposed {
            // B stored as its transpose and read through a view.
            let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
            Tensor::from_vec(bt, [n, k], &dev).unwrap().t()
        } else {
            Tensor::from_vec(b, [k, n], &dev).unwrap()
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
            &format!("tiled matmul {bsz}x{m}x{k}x{n}"),
        );
    }
    // Steps submitted on this thread, an in-place update loop and reads
    // between them: values stay right.
    let w = Tensor::from_vec(vec![1.0f32; 1000], [1000], &dev).unwrap();
    for step in 1..=5 {
        w.sub_(0.5f32);
        dev.mark_step().unwrap();
        if step % 2 == 1 {
            let v: Vec<f32> = w.to_vec().unwrap();
            assert!(v.iter().all(|&e| e == 1.0 - 0.5 * step as f32));
        }
    }
    dev.wait().unwrap();
}
