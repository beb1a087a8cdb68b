//! W2 (sum of 16,777,216 f32, read back), W3 (row softmax 4096 x 1024) and
//! W4 (matmul 1024^3) (see PERFORMANCE.md), beside the same-run baselines: a
//! hand-written vec4 copy kernel's bandwidth on the same adapter, and
//! ndarray's own CPU matmul. The ratios are printed after criterion's
//! figures.

#[path = "support/baseline.rs"]
mod baseline;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use lazywgpu::{Device, Tensor};

fn workloads(c: &mut Criterion) {
    let Ok(dev) = Device::gpu() else {
        eprintln!("no GPU adapter: skipping W2-W4");
        return;
    };
    dev.manual_seed(0);
    let x16m = Tensor::rand([1 << 24], &dev);
    let s = Tensor::randn([4096, 1024], &dev);
    let a = Tensor::randn([1024, 1024], &dev);
    let b = Tensor::randn([1024, 1024], &dev);
    dev.mark_step().expect("step");
    dev.wait().expect("wait");

    let mut g = c.benchmark_group(format!("ops on {}", dev.name()));
    g.sample_size(10);
    g.bench_function("W2 sum 16M f32 + read", |bch| {
        bch.iter(|| x16m.sum_all().item::<f32>().expect("read"))
    });
    g.bench_function("W3 softmax 4096x1024", |bch| {
        bch.iter(|| {
            let y = s.softmax(-1);
            dev.mark_step().expect("step");
            dev.wait().expect("wait");
            y
        })
    });
    g.bench_function("W4 matmul 1024^3", |bch| {
        bch.iter(|| {
            let y = a.matmul(&b);
            dev.mark_step().expect("step");
            dev.wait().expect("wait");
            y
        })
    });
    g.finish();

    // Same-run ratios against the baselines (medians, interleaved).
    let copy = baseline::CopyKernel::new();
    let w2 = baseline::median_of(7, || {
        x16m.sum_all().item::<f32>().expect("read");
    });
    let w3 = baseline::median_of(7, || {
        let _y = s.softmax(-1);
        dev.mark_step().expect("step");
        dev.wait().expect("wait");
    });
    let w4 = baseline::median_of(5, || {
        let _y = a.matmul(&b);
        dev.mark_step().expect("step");
        dev.wait().expect("wait");
    });
    let an = ndarray::Array2::<f32>::from_shape_fn((1024, 1024), |(i, j)| {
        ((i * 7 + j) % 13) as f32 * 0.1
    });
    let bn = an.t().to_owned();
    let nd = baseline::median_of(5, || {
        std::hint::black_box(an.dot(&bn));
    });
    let gflops = |t: Duration| 2.0 * 1024f64.powi(3) / t.as_secs_f64() / 1e9;
    println!("\n| workload | lazywgpu | baseline | ratio |");
    println!("| --- | --- | --- | --- |");
    if let Some(copy) = &copy {
        let c16 = copy.time_copy(1 << 24, 7);
        let read_bw = |t: Duration| (1u64 << 26) as f64 / t.as_secs_f64() / 1e9;
        // The copy reads and writes 64 MiB; its read bandwidth counts the read half.
        println!(
            "| W2 sum 16M | {:.2?} ({:.2} GB/s read) | vec4 copy 16M: {:.2?} ({:.2} GB/s read) | {:.2} of copy read bandwidth |",
            w2,
            read_bw(w2),
            c16,
            read_bw(c16),
            read_bw(w2) / read_bw(c16)
        );
        let c4m2 = copy.time_copy(4096 * 1024, 7);
        println!(
            "| W3 softmax 4096x1024 | {:.2?} | two copy passes: {:.2?} | {:.2}x the time of two copies |",
            w3,
            c4m2 * 2,
            w3.as_secs_f64() / (2.0 * c4m2.as_secs_f64())
        );
    }
    println!(
        "| W4 matmul 1024^3 | {:.2?} ({:.1} GFLOP/s) | ndarray CPU dot: {:.2?} ({:.1} GFLOP/s) | {:.2} of ndarray |",
        w4,
        gflops(w4),
        nd,
        gflops(nd),
        gflops(w4) / gflops(nd)
    );
}

criterion_group!(benches, workloads);
criterion_main!(benches);
