//! The configuration that discrete GPUs get, checked on whatever adapter
//! this machine has: the 256-invocation tiled matmul kernel
//! (`LAZYWGPU_MATMUL=tiled`; CPU adapters such as lavapipe default to the
//! register-blocked one) and submission on the caller's thread
//! (`LAZYWGPU_SUBMIT_THREAD=0`; CPU adapters default to a submission
//! thread). One test in its own process: the switches are read when the
//! GPU context is created.

mod common;

use common::gpu;
use lazywgpu::Tensor;

#[test]
fn tiled_matmul_and_inline_submission() {
    // SAFETY: set before any thread of this process creates the GPU context.
    unsafe {
        std::env::set_var("LAZYWGPU_MATMUL", "tiled");
        std::env::set_var("LAZYWGPU_SUBMIT_THREAD", "0");
    }
    let Some(dev) = gpu() else { return };
    common::check_matmul_shapes(&dev, "tiled matmul");
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
