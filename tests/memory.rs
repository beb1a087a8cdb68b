//! Device memory: the buffer pool, and donation of a mutated tensor's old
//! buffer to its new value (`w -= lr * g` allocates nothing).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, gpu};
use lazywgpu::Tensor;

#[test]
fn in_place_update_loop_keeps_device_memory_flat() {
    let Some(dev) = gpu() else { return };
    let n = 1 << 20;
    let w0: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.01).collect();
    let g0: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    let w = Tensor::from_vec(w0.clone(), [n], &dev).unwrap();
    let g = Tensor::from_vec(g0.clone(), [n], &dev).unwrap();
    let mut w_alias = w.clone(); // the same tensor: `-=` through either is seen by both
    let steps = 100;
    let mut live_after_warmup = 0;
    for step in 0..steps {
        w_alias -= &g * 0.01;
        dev.mark_step().unwrap();
        if step == 2 {
            dev.wait().unwrap();
            live_after_warmup = dev.metrics().counter("bytes_live");
            dev.reset_metrics();
        }
    }
    dev.wait().unwrap();
    let m = dev.metrics();
    assert_eq!(m.counter("bytes_live"), live_after_warmup, "{m}");
    assert_eq!(
        m.counter("buffers_allocated"),
        0,
        "steady state allocates nothing: {m}"
    );
    assert_eq!(m.counter("buffers_donated"), (steps - 3) as u64, "{m}");
    assert_eq!(m.counter("graphs_compiled"), 0, "{m}");
    let expected: Vec<f32> = w0
        .iter()
        .zip(&g0)
        .map(|(&w, &g)| {
            let mut v = w;
            for _ in 0..steps {
                v -= g * 0.01;
            }
            v
        })
        .collect();
    assert_close(
        &w.to_vec::<f32>().unwrap(),
        &expected,
        1e-5,
        1e-5,
        "w after the loop",
    );
}

#[test]
fn an_old_value_still_referenced_is_not_donated() {
    let Some(dev) = gpu() else { return };
    let w = Tensor::from_vec(vec![1.0f32; 1024], [1024], &dev).unwrap();
    let old = w.deep_clone(); // shares the old value
    w.add_(1.0);
    dev.mark_step().unwrap();
    assert_eq!(dev.metrics().counter("buffers_donated"), 0);
    assert_eq!(old.to_vec::<f32>().unwrap(), vec![1.0; 1024]);
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![2.0; 1024]);
}

#[test]
fn donated_input_read_elsewhere_is_not_aliased() {
    let Some(dev) = gpu() else { return };
    // The update reads w transposed: element (i, j) of the new value needs
    // (j, i) of the old one, so writing in place would race.
    let data: Vec<f32> = (0..64 * 64).map(|v| v as f32).collect();
    let w = Tensor::from_vec(data.clone(), [64, 64], &dev).unwrap();
    let t = w.t().deep_clone();
    w.copy_(&t);
    drop(t);
    dev.mark_step().unwrap();
    let v = w.to_vec::<f32>().unwrap();
    for i in 0..64 {
        for j in 0..64 {
            assert_eq!(v[i * 64 + j], data[j * 64 + i]);
        }
    }
}

#[test]
fn dropped_tensors_return_buffers_to_the_pool() {
    let Some(dev) = gpu() else { return };
    let before = dev.metrics();
    let t = Tensor::from_vec(vec![0.5f32; 4096], [4096], &dev).unwrap();
    let live = dev.metrics().counter("bytes_live");
    assert!(live >= before.counter("bytes_live") + 4096 * 4);
    drop(t);
    let after = dev.metrics();
    assert_eq!(after.counter("bytes_live"), before.counter("bytes_live"));
    assert!(after.counter("bytes_pooled") >= 4096 * 4);
    // The next tensor of that size class reuses the buffer.
    dev.reset_metrics();
    let _u = Tensor::from_vec(vec![1.5f32; 4000], [4000], &dev).unwrap();
    let m = dev.metrics();
    assert_eq!(m.counter("buffers_allocated"), 0, "{m}");
    assert_eq!(m.counter("pool_reuses"), 1, "{m}");
}

#[test]
fn intermediates_reuse_each_other_by_liveness() {
    let Some(dev) = gpu() else { return };
    dev.set_fusion(false); // seven kernels, six intermediates
    let n = 1 << 16;
    let x = Tensor::from_vec(vec![0.25f32; n], [n], &dev).unwrap();
    let w1 = |x: &Tensor| ((x * 2.0 + 1.0).tanh() - x).sigmoid() * x + 0.5;
    w1(&x).to_vec::<f32>().unwrap();
    dev.reset_metrics();
    let base = dev.metrics().counter("bytes_live");
    let y = w1(&x);
    dev.mark_step().unwrap();
    let m = dev.metrics();
    assert_eq!(m.counter("kernel_launches"), 7, "{m}");
    assert_eq!(
        m.counter("buffers_allocated"),
        0,
        "the pool serves a warm graph: {m}"
    );
    // A chain needs its input, at most two intermediates and the output at
    // once; without liveness it would hold all six intermediates.
    let peak_extra = m.counter("peak_bytes_live") - base;
    assert!(
        peak_extra <= 3 * (n as u64 * 4) + 4096,
        "peak {peak_extra} bytes above base: {m}"
    );
    let expected = (((0.25f64 * 2.0 + 1.0).tanh() - 0.25).exp().recip() + 1.0).recip() * 0.25 + 0.5;
    assert!((y.to_vec::<f32>().unwrap()[0] as f64 - expected).abs() < 1e-6);
}

const MIB: u64 = 1 << 20;

/// A GPU device whose buffers may hold at most `limit` bytes (`None`
/// where there is no GPU and none is required).
fn gpu_limited_to(limit: u64) -> Option<lazywgpu::Device> {
    gpu()?;
    let config = lazywgpu::DeviceConfig {
        memory_limit: Some(limit),
        ..lazywgpu::DeviceConfig::default()
    };
    Some(lazywgpu::Device::gpu_with(config).unwrap())
}

/// A device memory limit (`DeviceConfig::memory_limit`): idle buffers are
/// released to make room before anything fails; an allocation past the
/// limit is an `Error::OutOfMemory` naming the value being allocated
/// with its source line, the bytes live and at peak, and the largest
/// values held with theirs; the device goes on working once values are
/// dropped.
#[test]
fn an_allocation_past_the_memory_limit_is_an_error_naming_the_largest_values() {
    use lazywgpu::Error;
    let Some(dev) = gpu_limited_to(40 * MIB) else {
        return;
    };
    let n = 4 << 20; // 16 MiB of f32
    let a = Tensor::ones([n], &dev) * 2.0;
    dev.mark_step().unwrap();
    // 16 MiB live and 16 MiB idle; a 20 MiB value fits only once the idle
    // buffer is released.
    let d = &a + 1.0;
    dev.mark_step().unwrap();
    drop(d);
    dev.wait().unwrap();
    // (Small buffers, kernel parameters, come and go beside the values.)
    let about = |bytes: u64, want: u64| (want..want + MIB / 16).contains(&bytes);
    let pooled = dev.metrics().counter("bytes_pooled");
    assert!(about(pooled, 16 * MIB), "{pooled} bytes pooled");
    let f = Tensor::ones([5 << 20], &dev) * 3.0;
    dev.mark_step().unwrap();
    let pooled = dev.metrics().counter("bytes_pooled");
    assert!(pooled < MIB / 16, "{pooled} bytes still pooled");
    let live = dev.metrics().counter("bytes_live");
    assert!(about(live, 36 * MIB), "{live} bytes live");
    drop(f);
    // 16 MiB live and 20 MiB idle: another 16 MiB value passes the limit
    // of 40 even with the idle buffer released... after one more.
    let b = &a + 1.0;
    dev.mark_step().unwrap();
    let c = &b * 3.0; // 48 MiB with a and b
    match dev.mark_step() {
        Err(Error::OutOfMemory {
            what,
            requested,
            live,
            largest,
            cause,
            ..
        }) => {
            assert_eq!(requested, 16 * MIB);
            assert!(about(live, 32 * MIB), "{live} bytes live");
            assert!(what.contains("tests/memory.rs"), "{what}");
            assert!(cause.contains("41943040"), "{cause}");
            assert!(largest.contains("tests/memory.rs"), "{largest}");
            assert!(largest.contains(&(16 * MIB).to_string()), "{largest}");
        }
        other => panic!("expected Error::OutOfMemory, got {other:?}"),
    }
    // Dropping a value makes room: the same work then runs.
    drop(c);
    drop(b);
    let c = &a * 3.0;
    assert_eq!(c.to_vec::<f32>().unwrap()[n - 1], 6.0);
}

/// A scratch texture made for one run (the lane matmul's packed operand
/// past 32 MiB, on CPU adapters) counts as live memory: the step's peak
/// holds it beside the operands and the output, and it is gone after.
#[test]
fn a_matmuls_scratch_texture_counts_in_the_peak() {
    let Some(dev) = gpu() else { return };
    let report = dev.adapter().unwrap();
    if !report.matmul_kernel.starts_with("lanes") {
        return; // only the lane matmul packs operands into textures
    }
    let (m, k, n) = (4096usize, 2304usize, 64usize);
    let a = Tensor::ones([m, k], &dev);
    let b = Tensor::ones([k, n], &dev);
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    dev.reset_metrics();
    let held = dev.metrics().counter("bytes_live");
    // A computed in the matmul's prologue is packed (a stored A this
    // large would be read in place).
    let c = (&a * 2.0).matmul(&b);
    assert_eq!(c.to_vec::<f32>().unwrap()[0], 2.0 * k as f32);
    dev.wait().unwrap();
    let peak = dev.metrics().counter("peak_bytes_live");
    let packed = (m * k * 4) as u64; // one texel of four floats per four elements
    assert!(
        peak >= held + (m * n * 4) as u64 + packed,
        "peak {peak} with {held} held before: the packed operand of {packed} bytes is not counted"
    );
    let after = dev.metrics().counter("bytes_live");
    assert!(after < held + packed, "{after} bytes live after the step");
}

/// A convolution reads its input's windows in place on every matmul path
/// (lavapipe's lane kernel included): forward and backward hold the
/// input, its padded copy, the weights, the output and the gradients, and
/// nothing of the size of the windows laid out as columns (the im2col,
/// here 9 times the input).
#[test]
fn a_convolution_holds_nothing_of_its_columns_size() {
    let Some(dev) = gpu() else { return };
    let (n, c, h, w) = (8usize, 32usize, 48usize, 48usize);
    let x = Tensor::randn([n, c, h, w], &dev);
    let weight = Tensor::randn([c, c, 3, 3], &dev) * 0.1;
    x.requires_grad_(true);
    weight.requires_grad_(true);
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    let input_bytes = (n * c * h * w * 4) as u64;
    let columns_bytes = 9 * input_bytes;

    dev.reset_metrics();
    let held = dev.metrics().counter("bytes_live");
    let y = x.conv2d(&weight, None, (1, 1), (1, 1), (1, 1));
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    let forward = dev.metrics().counter("peak_bytes_live") - held;
    // The padded copy and the output, with room for the packed weights.
    assert!(
        forward <= 3 * input_bytes,
        "forward peak {forward} bytes above what was held (the input is {input_bytes}, its columns {columns_bytes})"
    );

    dev.reset_metrics();
    let held = dev.metrics().counter("bytes_live");
    y.sum_all().backward();
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    let backward = dev.metrics().counter("peak_bytes_live") - held;
    // The output's gradient, its padded copy and the input's gradient
    // (the weight's is small), with room for one more of their size.
    assert!(
        backward <= 4 * input_bytes,
        "backward peak {backward} bytes above what was held (the input is {input_bytes}, its columns {columns_bytes})"
    );
    let gx = x.grad().unwrap().to_vec::<f32>().unwrap();
    assert!(gx.iter().all(|v| v.is_finite()));
}

/// A strided convolution's input gradient is a transposed convolution
/// run as one stride-1 convolution per stride phase, each reading the
/// output gradient in place: nothing of the size of the output gradient
/// spread by the stride (zeros between its elements, here twice the
/// input) nor a packed copy of it is written, so the backward pass holds
/// the input's gradient, the phases' results (together as large) and
/// small things.
#[test]
fn a_strided_convolutions_input_gradient_spreads_nothing() {
    let Some(dev) = gpu() else { return };
    // A ResNet stage-2 shape: where the spread gradient was also packed.
    let (n, c, h, w) = (64usize, 8usize, 28usize, 28usize);
    let x = Tensor::randn([n, c, h, w], &dev);
    let weight = Tensor::randn([2 * c, c, 3, 3], &dev) * 0.1;
    x.requires_grad_(true);
    let y = x.conv2d(&weight, None, (2, 2), (1, 1), (1, 1));
    let loss = (&y * &y).sum_all();
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    let input_bytes = (n * c * h * w * 4) as u64;

    dev.reset_metrics();
    let held = dev.metrics().counter("bytes_live");
    loss.backward();
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    let backward = dev.metrics().counter("peak_bytes_live") - held;
    // The input's gradient, the four phases' results (as large together)
    // and a phase's packed operand: 2.3 times the input. The spread
    // gradient (twice the input) and its packed copy took 3.0 times.
    let report = dev
        .memory_report()
        .map(|r| r.to_string())
        .unwrap_or_default();
    assert!(
        backward * 4 <= 11 * input_bytes,
        "backward peak {backward} bytes above what was held (the input is {input_bytes}):\n{report}"
    );
    let gx = x.grad().unwrap().to_vec::<f32>().unwrap();
    assert!(gx.iter().all(|v| v.is_finite()));
}

/// The memory report names the step's peak and the largest buffers live
/// then, each with the source line of the value it holds: here the input
/// and the matmul's result, which the softmax after it reads.
#[test]
fn the_memory_report_lists_the_largest_buffers_at_the_peak_with_their_lines() {
    let Some(dev) = gpu() else { return };
    let n = 512usize;
    let input_line = line!() + 1;
    let x = Tensor::ones([n, n], &dev);
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    dev.reset_metrics();
    assert!(dev.memory_report().is_none(), "reset forgets the report");
    let matmul_line = line!() + 1;
    let y = x.matmul(&x);
    let total = y.softmax(1).sum_all();
    assert!((total.item::<f32>().unwrap() - n as f32).abs() < 0.5);
    let report = dev.memory_report().expect("a report after a GPU run");
    let text = report.to_string();
    assert!(report.peak_bytes >= report.graph_bytes, "{text}");
    assert_eq!(
        report.peak_bytes,
        dev.metrics().counter("peak_bytes_live"),
        "{text}"
    );
    let bytes = (n * n * 4) as u64;
    let listed = |role: lazywgpu::BufferRole, line: u32| {
        report.buffers.iter().any(|b| {
            b.role == role
                && b.shape == [n, n]
                && b.bytes >= bytes
                && b.location.contains(&format!("memory.rs:{line}:"))
        })
    };
    assert!(listed(lazywgpu::BufferRole::Input, input_line), "{text}");
    assert!(
        listed(lazywgpu::BufferRole::Intermediate, matmul_line),
        "{text}"
    );
}

/// An in-place update fused into a kernel root's epilogue (an optimiser's
/// step joining the matmul or reduction that computes its gradient) writes
/// into the buffer of the value it replaces, as an elementwise update
/// does: the step holds one copy of the state, not two. Values against
/// f64 loops.
#[test]
fn updates_fused_into_a_root_kernel_write_into_the_old_buffer() {
    let Some(dev) = gpu() else { return };
    let (m, k, n) = (96usize, 80usize, 72usize);
    let av: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7) % 11) as f32 * 0.1 - 0.5)
        .collect();
    let bv: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5) % 13) as f32 * 0.1 - 0.6)
        .collect();
    let cv: Vec<f32> = (0..m * n).map(|i| (i % 17) as f32 * 0.25).collect();
    let a = Tensor::from_vec(av.clone(), [m, k], &dev).unwrap();
    let b = Tensor::from_vec(bv.clone(), [k, n], &dev).unwrap();
    let c = Tensor::from_vec(cv.clone(), [m, n], &dev).unwrap();
    let rows = Tensor::from_vec(vec![1.0f32; m], [m], &dev).unwrap();
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    dev.reset_metrics();
    // c += a @ b (the matmul's epilogue), rows = rows * 0.5 + a.sum(1)
    // (the reduction's epilogue).
    c.add_(&a.matmul(&b));
    rows.mul_(0.5).add_(&a.sum([1], false));
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    assert_eq!(dev.metrics().counter("buffers_donated"), 2);
    let got = c.to_vec::<f32>().unwrap();
    let mut want = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k)
                .map(|t| av[i * k + t] as f64 * bv[t * n + j] as f64)
                .sum();
            want[i * n + j] = cv[i * n + j] as f64 + dot;
        }
    }
    let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    assert_close(&got, &want, 1e-4, 1e-4, "c += a @ b");
    let want_rows: Vec<f32> = (0..m)
        .map(|i| (0.5 + (0..k).map(|t| av[i * k + t] as f64).sum::<f64>()) as f32)
        .collect();
    let rows = rows.to_vec::<f32>().unwrap();
    assert_close(&rows, &want_rows, 1e-4, 1e-4, "rows * 0.5 + a.sum(1)");
}

/// A value the root's own loop reads (`c += c @ b`: c is an operand of
/// the matmul, read at other elements than the one stored) is never
/// written over while it is read.
#[test]
fn a_root_kernel_reading_the_old_value_in_its_loop_does_not_take_its_buffer() {
    let Some(dev) = gpu() else { return };
    let n = 64usize;
    let cv: Vec<f32> = (0..n * n).map(|i| ((i * 3) % 7) as f32 * 0.1).collect();
    let bv: Vec<f32> = (0..n * n)
        .map(|i| ((i * 5) % 9) as f32 * 0.1 - 0.4)
        .collect();
    let c = Tensor::from_vec(cv.clone(), [n, n], &dev).unwrap();
    let b = Tensor::from_vec(bv.clone(), [n, n], &dev).unwrap();
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    dev.reset_metrics();
    c.add_(&c.matmul(&b));
    let got = c.to_vec::<f32>().unwrap();
    assert_eq!(dev.metrics().counter("buffers_donated"), 0);
    let want: Vec<f32> = (0..n * n)
        .map(|e| {
            let (i, j) = (e / n, e % n);
            let dot: f64 = (0..n)
                .map(|t| cv[i * n + t] as f64 * bv[t * n + j] as f64)
                .sum();
            (cv[e] as f64 + dot) as f32
        })
        .collect();
    assert_close(&got, &want, 1e-4, 1e-4, "c += c @ b");
}

/// An allocation past the limit inside a graph names that graph's own
/// largest buffers at the kernel that failed (an intermediate the graph
/// still needs, with its source line), before the tensors held.
#[test]
fn running_out_of_memory_in_a_graph_names_its_live_intermediates() {
    use lazywgpu::Error;
    let Some(dev) = gpu_limited_to(40 * MIB) else {
        return;
    };
    let n = 1024usize;
    let a = Tensor::ones([n, 4 * n], &dev); // 16 MiB
    dev.mark_step().unwrap();
    // The matmul's result (16 MiB) is an intermediate that the softmax
    // and the sum after it read; the softmax's own 16 MiB output does not
    // fit beside it and `a`.
    let intermediate_line = line!() + 1;
    let m = a.t().matmul(&a.narrow(1, 0, n)) * 0.5;
    let s = m.softmax(1).sum_all() + m.sum_all();
    match s.item::<f32>() {
        Err(Error::OutOfMemory { largest, .. }) => {
            eprintln!("{largest}");
            assert!(largest.starts_with("in graph "), "{largest}");
            assert!(
                largest.contains(&format!("memory.rs:{intermediate_line}:")),
                "{largest}"
            );
            assert!(largest.contains("intermediate"), "{largest}");
            assert!(largest.contains("tensors held:"), "{largest}");
        }
        other => panic!("expected Error::OutOfMemory, got {other:?}"),
    }
}

/// The lane matmul's scratch textures (its packed operands) come from
/// the device's pool: live only while their kernel is encoded, idle in
/// the pool after (`bytes_pooled`), and taken again by any later kernel
/// of the same texture size, in any executable.
#[test]
fn scratch_textures_are_pooled_and_shared_by_executables() {
    let Some(dev) = gpu() else { return };
    if !dev.adapter().unwrap().matmul_kernel.starts_with("lanes") {
        return; // only the lane matmul packs operands into textures
    }
    let a = Tensor::ones([64, 256], &dev);
    let b = Tensor::ones([256, 64], &dev);
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    let before = dev.metrics();
    let c = a.matmul(&b);
    assert_eq!(c.to_vec::<f32>().unwrap()[0], 256.0);
    dev.wait().unwrap();
    let after = dev.metrics();
    let made = after.counter("textures_allocated") - before.counter("textures_allocated");
    assert!(made > 0, "the lane matmul packs an operand: {after}");
    // A: 64 rows of 64 texels; B: 256 rows of 16 texels; 16 bytes a texel.
    let packed = ((64 * 64 + 256 * 16) * 16) as u64;
    let output = (64 * 64 * 4) as u64;
    assert_eq!(
        after.counter("bytes_live"),
        before.counter("bytes_live") + output,
        "only the product stays live: {after}"
    );
    assert!(
        after.counter("bytes_pooled") >= before.counter("bytes_pooled") + packed,
        "the textures wait in the pool: {after}"
    );
    // Another graph (another executable) multiplying the same shapes
    // takes the same textures.
    let d = (&a * 2.0).matmul(&b) + 1.0;
    assert_eq!(d.to_vec::<f32>().unwrap()[0], 513.0);
    let again = dev.metrics();
    assert_eq!(
        again.counter("textures_allocated"),
        after.counter("textures_allocated"),
        "{again}"
    );
}

/// `y = a @ b + c @ d`: the sum's kernel is the last to read the first
/// product, and writes into its buffer instead of a third one; the
/// second product, computed in between, must not be handed that buffer
/// (it was, while the first product's last read was not counted: its
/// values then summed with themselves).
#[test]
fn an_output_takes_over_the_intermediate_its_kernel_reads_last() {
    let Some(dev) = gpu() else { return };
    let (m, k, n) = (128usize, 20usize, 96usize);
    let data = |len: usize, seed: usize| -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 31 + seed * 17) % 23) as f32 / 23.0 - 0.5)
            .collect()
    };
    let (av, bv, cv, dv) = (
        data(m * k, 1),
        data(k * n, 2),
        data(m * k, 3),
        data(k * n, 4),
    );
    let t = |v: &Vec<f32>, shape: [usize; 2]| Tensor::from_vec(v.clone(), shape, &dev).unwrap();
    let (a, b, c, d) = (
        t(&av, [m, k]),
        t(&bv, [k, n]),
        t(&cv, [m, k]),
        t(&dv, [k, n]),
    );
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    dev.reset_metrics();
    let held = dev.metrics().counter("bytes_live");
    let y = a.matmul(&b) + c.matmul(&d);
    let got = y.to_vec::<f32>().unwrap();
    let m_ = dev.metrics();
    assert_eq!(m_.counter("buffers_reused_in_place"), 1, "{m_}");
    // Two products of m x n live at once, the sum in the first's buffer
    // (and the operands packed, a third of a product at most).
    let product = (m * n * 4) as u64;
    let peak = m_.counter("peak_bytes_live") - held;
    assert!(2 * peak < 5 * product, "peak {peak} bytes: {m_}");
    let want: Vec<f32> = (0..m * n)
        .map(|e| {
            let (i, j) = (e / n, e % n);
            let dot = |x: &[f32], w: &[f32]| -> f64 {
                (0..k)
                    .map(|t| x[i * k + t] as f64 * w[t * n + j] as f64)
                    .sum()
            };
            (dot(&av, &bv) + dot(&cv, &dv)) as f32
        })
        .collect();
    assert_close(&got, &want, 1e-5, 1e-5, "a @ b + c @ d");
}

/// An SGD step on a weight the forward read transposed (`x @ w.t()`, the
/// view bound as an input of its own on the weight's buffer): the update,
/// the buffer's last reader, writes the new weight into the old one.
#[test]
fn a_weight_read_through_a_view_is_updated_in_its_own_buffer() {
    let Some(dev) = gpu() else { return };
    let (b, i, o) = (16usize, 32usize, 24usize);
    let xv: Vec<f32> = (0..b * i)
        .map(|e| ((e * 7) % 19) as f32 * 0.1 - 0.9)
        .collect();
    let wv: Vec<f32> = (0..o * i)
        .map(|e| ((e * 5) % 11) as f32 * 0.1 - 0.5)
        .collect();
    let x = Tensor::from_vec(xv.clone(), [b, i], &dev).unwrap();
    let w = Tensor::from_vec(wv.clone(), [o, i], &dev).unwrap();
    w.requires_grad_(true);
    dev.mark_step().unwrap();
    let (steps, lr) = (3usize, 0.05f32);
    let mut donated = 0;
    for _ in 0..steps {
        dev.reset_metrics();
        let y = x.matmul(&w.t());
        (&y * &y).sum_all().backward();
        let g = w.grad().unwrap();
        lazywgpu::no_grad(|| {
            w.sub_(&g * lr);
        });
        w.zero_grad();
        drop((y, g));
        dev.mark_step().unwrap();
        dev.wait().unwrap();
        donated = dev.metrics().counter("buffers_donated");
    }
    assert!(donated >= 1, "the last step wrote w into its own buffer");
    // f64: dL/dw[p, q] = sum_r 2 y[r, p] x[r, q], y = x w^T.
    let mut wf: Vec<f64> = wv.iter().map(|&v| v as f64).collect();
    for _ in 0..steps {
        let y: Vec<f64> = (0..b * o)
            .map(|e| {
                (0..i)
                    .map(|q| xv[(e / o) * i + q] as f64 * wf[(e % o) * i + q])
                    .sum()
            })
            .collect();
        let grad: Vec<f64> = (0..o * i)
            .map(|e| {
                (0..b)
                    .map(|r| 2.0 * y[r * o + e / i] * xv[r * i + e % i] as f64)
                    .sum()
            })
            .collect();
        for (w, g) in wf.iter_mut().zip(&grad) {
            *w -= lr as f64 * g;
        }
    }
    let want: Vec<f32> = wf.iter().map(|&v| v as f32).collect();
    assert_close(
        &w.to_vec::<f32>().unwrap(),
        &want,
        1e-4,
        1e-4,
        "w after three steps",
    );
}

/// The lane matmul reads a stored A in place where its packed copy would
/// be large (here 4.5 MB), and packs an A broadcast over the batch once
/// (weights shared by every sample): no scratch texture for the large A,
/// and the values of every layout A may have (row-major with a K tail,
/// transposed, offset, broadcast small and large) against f64.
#[test]
fn a_large_or_broadcast_stored_left_operand_is_read_in_place() {
    let Some(dev) = gpu() else { return };
    if !dev.adapter().unwrap().matmul_kernel.starts_with("lanes") {
        return; // only the lane matmul packs operands into textures
    }
    let value = |e: usize| ((e * 37) % 29) as f32 / 29.0 - 0.5;
    let (m, k, n) = (1030usize, 1101usize, 20usize);
    let base: Vec<f32> = (0..(m + 3) * (k + 2)).map(value).collect();
    let bv: Vec<f32> = (0..k * n).map(|e| value(e * 3 + 1)).collect();
    let src = Tensor::from_vec(base.clone(), [m + 3, k + 2], &dev).unwrap();
    let b = Tensor::from_vec(bv.clone(), [k, n], &dev).unwrap();
    let at = |r: usize, c: usize| base[r * (k + 2) + c] as f64;
    let check = |name: &str, a: &Tensor, a_at: &dyn Fn(usize, usize) -> f64| {
        dev.mark_step().unwrap();
        dev.wait().unwrap();
        dev.reset_metrics();
        let held = dev.metrics().counter("bytes_live");
        let got = a.matmul(&b).to_vec::<f32>().unwrap();
        let metrics = dev.metrics();
        let want: Vec<f32> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                (0..k)
                    .map(|t| a_at(i, t) * bv[t * n + j] as f64)
                    .sum::<f64>() as f32
            })
            .collect();
        assert_close(&got, &want, 1e-4, 1e-4, name);
        // The output (82 KB) and B packed (88 KB) may be live; A packed
        // (4.5 MB) is not.
        let extra = metrics.counter("peak_bytes_live") - held;
        assert!(
            extra < 1 << 20,
            "{name}: {extra} bytes above those held: {metrics}"
        );
    };
    // Row-major (a slice: rows offset by 2, columns by 1).
    let a = src.slice(0, 2, 2 + m, 1).slice(1, 1, 1 + k, 1);
    check("offset rows", &a, &|i, t| at(i + 2, t + 1));
    // Transposed: A's rows are the source's columns.
    let tsrc = Tensor::from_vec((0..k * m).map(|e| value(e + 5)).collect(), [k, m], &dev).unwrap();
    let tv: Vec<f32> = (0..k * m).map(|e| value(e + 5)).collect();
    check("transposed", &tsrc.t(), &|i, t| tv[t * m + i] as f64);
    // Broadcast over a batch: a [64, 256] weight applied to 32 inputs,
    // packed once (64 KB), not per input (2.1 MB).
    let (bm, bk, bn, batch) = (64usize, 256usize, 8usize, 32usize);
    let wv: Vec<f32> = (0..bm * bk).map(|e| value(e + 11)).collect();
    let xv: Vec<f32> = (0..batch * bk * bn).map(|e| value(e + 13)).collect();
    let w = Tensor::from_vec(wv.clone(), [bm, bk], &dev).unwrap();
    let x = Tensor::from_vec(xv.clone(), [batch, bk, bn], &dev).unwrap();
    dev.mark_step().unwrap();
    dev.wait().unwrap();
    dev.reset_metrics();
    let held = dev.metrics().counter("bytes_live");
    let got = w
        .expand([batch, bm, bk])
        .matmul(&x)
        .to_vec::<f32>()
        .unwrap();
    let extra = dev.metrics().counter("peak_bytes_live") - held;
    assert!(
        extra < 1 << 20,
        "broadcast weights: {extra} bytes above those held"
    );
    let want: Vec<f32> = (0..batch * bm * bn)
        .map(|e| {
            let (p, i, j) = (e / (bm * bn), (e / bn) % bm, e % bn);
            (0..bk)
                .map(|t| wv[i * bk + t] as f64 * xv[(p * bk + t) * bn + j] as f64)
                .sum::<f64>() as f32
        })
        .collect();
    assert_close(&got, &want, 1e-4, 1e-4, "broadcast weights");
    // A large matrix broadcast over a batch of two: read in place once.
    let pair = Tensor::from_vec(
        (0..2 * k * n).map(|e| value(e * 7 + 3)).collect(),
        [2, k, n],
        &dev,
    )
    .unwrap();
    let pv: Vec<f32> = (0..2 * k * n).map(|e| value(e * 7 + 3)).collect();
    let a = src.slice(0, 0, m, 1).slice(1, 0, k, 1);
    let got = a.expand([2, m, k]).matmul(&pair).to_vec::<f32>().unwrap();
    let want: Vec<f32> = (0..2 * m * n)
        .map(|e| {
            let (p, i, j) = (e / (m * n), (e / n) % m, e % n);
            (0..k)
                .map(|t| at(i, t) * pv[(p * k + t) * n + j] as f64)
                .sum::<f64>() as f32
        })
        .collect();
    assert_close(&got, &want, 1e-4, 1e-4, "a large matrix broadcast");
}
