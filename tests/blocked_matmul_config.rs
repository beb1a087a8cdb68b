//! The register-blocked workgroup-memory matmul (`LAZYWGPU_MATMUL=blocked`),
//! which CPU adapters fall back to where the texture-packed lane kernel's
//! operands would not fit in a texture, or when the adapter's subgroup
//! size is not fixed. One test in its own process: the switch is read when
//! the GPU context is created.

mod common;

use common::gpu;

#[test]
fn blocked_matmul_matches_f64() {
    // SAFETY: set before any thread of this process creates the GPU context.
    unsafe {
        std::env::set_var("LAZYWGPU_MATMUL", "blocked");
    }
    let Some(dev) = gpu() else { return };
    common::check_matmul_shapes(&dev, "blocked matmul");
}
