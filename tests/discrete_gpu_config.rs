//! The configuration that discrete GPUs get, checked on whatever adapter
//! this machine has: the 256-invocation tiled matmul kernel (CPU adapters
//! such as lavapipe default to the lane kernel) and submission on the
//! caller's thread (`LAZYWGPU_SUBMIT_THREAD=0`; CPU adapters default to a
//! submission thread). One test in its own process: submission belongs to
//! the process's one wgpu device, read when it is created.

mod common;

use common::gpu;
use lazywgpu::{Device, DeviceConfig, MatmulChoice, Tensor};

#[test]
fn tiled_matmul_and_inline_submission() {
    // SAFETY: set before any thread of this process creates the GPU context.
    unsafe {
        std::env::set_var("LAZYWGPU_SUBMIT_THREAD", "0");
    }
    if gpu().is_none() {
        return;
    }
    let dev = Device::gpu_with(DeviceConfig {
        matmul: Some(MatmulChoice::Tiled),
        ..DeviceConfig::default()
    })
    .unwrap();
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
