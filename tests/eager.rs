//! `LAZYWGPU_EAGER=1` runs every op as it is recorded. This binary sets the
//! variable before any device exists, so it has a test binary to itself
//! (the second test only checks types).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use lazywgpu::{Device, Tensor};

#[test]
fn eager_mode_materialises_every_op() {
    // SAFETY: no other thread of this binary touches the environment (the
    // other test only checks types), and devices read it when created.
    unsafe { std::env::set_var("LAZYWGPU_EAGER", "1") };
    let mut devs = vec![Device::cpu()];
    devs.extend(common::gpu());
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

#[test]
fn tensors_and_devices_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tensor>();
    check::<Device>();
}
