//! W5 of the comparison suite (PERFORMANCE.md): one training step of the
//! 784-128-10 MLP (ReLU, batch 64, cross-entropy, SGD lr 0.01; forward,
//! backward and update traced into one graph), input generated once on the
//! device. Each iteration ends with a device wait so asynchronous work is
//! counted. The same step in plain ndarray is the CPU yardstick beside it.

#[path = "support/ndarray_mlp.rs"]
mod ndarray_mlp;

use criterion::{Criterion, criterion_group, criterion_main};
use lazywgpu::nn::{self, Module, functional as F};
use lazywgpu::optim::{Optimizer, Sgd};
use lazywgpu::{DType, Device, Tensor};

fn bench_w5(c: &mut Criterion) {
    let mut group = c.benchmark_group("W5 MLP training step");
    group.sample_size(20);
    let mut devices = vec![Device::cpu()];
    match Device::gpu() {
        Ok(d) => devices.insert(0, d),
        Err(e) => eprintln!("no GPU adapter, W5 on the CPU backend only: {e}"),
    }
    for dev in devices {
        dev.manual_seed(0);
        let model = nn::Sequential::new()
            .add(nn::Linear::new(784, 128, &dev))
            .add(nn::ReLU)
            .add(nn::Linear::new(128, 10, &dev));
        let mut opt = Sgd::new(model.parameters(), 0.01);
        let x = Tensor::randn([64, 784], &dev);
        let y = (Tensor::rand([64], &dev) * 10.0).floor().cast(DType::I32);
        group.bench_function(dev.name(), |b| {
            b.iter(|| {
                opt.zero_grad();
                let loss = F::cross_entropy(&model.forward(&x), &y);
                loss.backward();
                opt.step();
                dev.mark_step().expect("step");
                dev.wait().expect("wait");
            })
        });
    }
    let mut mlp = ndarray_mlp::Mlp::new();
    group.bench_function("ndarray (hand-written backward)", |b| {
        b.iter(|| mlp.step(0.01))
    });
    group.finish();
}

criterion_group!(benches, bench_w5);
criterion_main!(benches);
