//! W1 (elementwise chain on 4,194,304 f32) fused vs one kernel per op, and
//! W6 (host cost per traced op), as defined in PERFORMANCE.md ("The
//! workloads and their targets"). Each W1 iteration ends with a device
//! wait so asynchronous work is counted.

use criterion::{Criterion, criterion_group, criterion_main};
use lazywgpu::{Device, Tensor};

const N: usize = 4_194_304;

fn w1(x: &Tensor) -> Tensor {
    ((x * 2.0 + 1.0).tanh() - x).sigmoid() * x + 0.5
}

fn bench_w1(c: &mut Criterion) {
    let dev = match Device::gpu() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no GPU adapter, skipping W1: {e}");
            return;
        }
    };
    let data: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 / 250.0 - 2.0).collect();
    let x = Tensor::from_vec(data, [N], &dev).expect("upload");
    let mut group = c.benchmark_group(format!("W1 chain 4M f32 on {}", dev.name()));
    group.sample_size(20);
    for (name, fused) in [("fused", true), ("unfused", false)] {
        dev.set_fusion(fused);
        group.bench_function(name, |b| {
            b.iter(|| {
                let y = w1(&x);
                dev.mark_step().expect("step");
                dev.wait().expect("wait");
                y
            })
        });
    }
    group.finish();
    dev.set_fusion(true);
}

fn bench_w6(c: &mut Criterion) {
    let dev = Device::gpu().unwrap_or_else(|_| Device::cpu());
    let mut group = c.benchmark_group("W6 1000 traced ops");
    group.sample_size(20);
    // Tracing alone: host cost of recording 1,000 ops.
    group.bench_function("trace only", |b| {
        let x0 = Tensor::from_vec(vec![1.0f32], [1], &dev).expect("upload");
        b.iter(|| {
            let mut x = x0.clone();
            for _ in 0..500 {
                x = x * 1.0001 + 0.0001;
            }
            x
        })
    });
    // Trace, compile-cache hit, run and read back.
    group.bench_function("trace + run + read", |b| {
        let x0 = Tensor::from_vec(vec![1.0f32], [1], &dev).expect("upload");
        b.iter(|| {
            let mut x = x0.clone();
            for _ in 0..500 {
                x = x * 1.0001 + 0.0001;
            }
            x.item::<f32>().expect("read")
        })
    });
    group.finish();
}

criterion_group!(benches, bench_w1, bench_w6);
criterion_main!(benches);
