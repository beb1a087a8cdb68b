//! Mixed-precision training: autocast to f16 on f32 master weights with
//! dynamic loss scaling (PyTorch's `torch.autocast` + `GradScaler`).

mod common;

use lazywgpu::amp::{GradScaler, autocast};
use lazywgpu::data::Mnist;
use lazywgpu::nn::{self, Module, functional as F};
use lazywgpu::optim::{Optimizer, Sgd};
use lazywgpu::{DType, Device, Tensor, no_grad};

/// Test-set accuracy, the forward pass under autocast to `dtype` if given.
fn accuracy(model: &nn::Sequential, data: &Mnist, dtype: Option<DType>, dev: &Device) -> f64 {
    let n = data.test_labels.shape[0];
    let (x, y) = Mnist::batch(&data.test_images, &data.test_labels, 0, n, dev).expect("batch");
    let hits = no_grad(|| {
        let logits = match dtype {
            Some(d) => autocast(d, || model.forward(&x)),
            None => model.forward(&x),
        };
        logits.argmax(1, false).eq(&y).cast(DType::I32).sum_all()
    });
    hits.item::<i32>().expect("read") as f64 / n as f64
}

/// Trains the MLP for `steps` SGD steps of batch 64 (in f16 with loss
/// scaling when `dtype` is given) and returns the test accuracy.
fn train(dev: &Device, dtype: Option<DType>, steps: usize) -> (f64, GradScaler) {
    dev.manual_seed(7);
    let data = common::mnist();
    let model = common::mnist_mlp(dev);
    let mut opt = Sgd::new(model.parameters(), 0.1);
    let mut scaler = GradScaler::new();
    let train_n = data.train_labels.shape[0];
    for step in 0..steps {
        let start = (step * 64) % (train_n - 64);
        let (x, y) =
            Mnist::batch(&data.train_images, &data.train_labels, start, 64, dev).expect("batch");
        match dtype {
            Some(d) => {
                let logits = autocast(d, || model.forward(&x));
                assert_eq!(logits.dtype(), DType::F32, "linear's f32 bias promotes");
                let loss = F::cross_entropy(&logits, &y);
                scaler.scale(&loss).backward();
                scaler.step(&mut opt).expect("step");
                scaler.update();
            }
            None => {
                F::cross_entropy(&model.forward(&x), &y).backward();
                opt.step();
            }
        }
        opt.zero_grad();
        dev.mark_step().expect("step");
    }
    for p in model.parameters() {
        assert_eq!(p.dtype(), DType::F32, "master weights stay f32");
    }
    (accuracy(&model, &data, dtype, dev), scaler)
}

#[test]
fn mlp_trained_in_f16_with_loss_scaling_reaches_88_percent() {
    let Some(dev) = common::gpu() else { return };
    let steps = 250;
    let (acc16, scaler) = train(&dev, Some(DType::F16), steps);
    let (acc32, _) = train(&dev, None, steps);
    eprintln!(
        "f16: {:.2} %, f32: {:.2} %, scale {}, skipped {}",
        acc16 * 100.0,
        acc32 * 100.0,
        scaler.get_scale(),
        scaler.skipped_steps()
    );
    assert!(acc16 >= 0.88, "f16 accuracy {acc16}");
    // Stated tolerance: within one point of the same run in f32.
    assert!((acc16 - acc32).abs() <= 0.01, "f16 {acc16} vs f32 {acc32}");
}

#[test]
fn matmul_inside_autocast_runs_in_the_scope_dtype_and_its_gradient_is_f32() {
    for dev in common::devices() {
        let w = Tensor::from_vec(vec![0.5f32, -1.0, 0.25, 2.0], [2, 2], &dev).expect("w");
        w.requires_grad_(true);
        let x = Tensor::from_vec(vec![1.0f32, 3.0], [1, 2], &dev).expect("x");
        let y = autocast(DType::BF16, || {
            let y = x.matmul(&w);
            assert_eq!(y.dtype(), DType::BF16);
            // Softmax of a 16-bit value runs in f32 inside the scope.
            assert_eq!(y.softmax(1).dtype(), DType::F32);
            y
        });
        // Outside the scope the same call stays f32.
        assert_eq!(x.matmul(&w).dtype(), DType::F32);
        (y.float() * 2.0f32).sum_all().backward();
        let g = w.grad().expect("grad");
        assert_eq!(g.dtype(), DType::F32);
        // d(sum(2 x W))/dW = 2 x^T broadcast over columns.
        assert_eq!(g.to_vec::<f32>().expect("read"), vec![2.0, 2.0, 6.0, 6.0]);
    }
}

#[test]
fn an_overflowing_step_is_skipped_and_the_scale_backs_off() {
    for dev in common::devices() {
        let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev).expect("w");
        w.requires_grad_(true);
        let mut opt = Sgd::new(vec![w.clone()], 0.5);
        // 2^30: the gradient of the f16 product overflows f16.
        let mut scaler = GradScaler::new()
            .init_scale(1073741824.0)
            .growth_interval(2);
        let x = Tensor::from_vec(vec![100.0f32, 100.0], [1, 2], &dev).expect("x");
        let step = |scaler: &mut GradScaler, opt: &mut Sgd| {
            let y = autocast(DType::F16, || x.matmul(&w));
            scaler.scale(&y.float().sum_all()).backward();
            let stepped = scaler.step(opt).expect("step");
            scaler.update();
            opt.zero_grad();
            stepped
        };
        assert!(
            !step(&mut scaler, &mut opt),
            "overflow must skip on {dev:?}"
        );
        assert_eq!(scaler.get_scale(), 536870912.0);
        assert_eq!(w.to_vec::<f32>().expect("read"), vec![1.0, 2.0, 3.0, 4.0]);
        // Down to a scale whose gradients fit: the step runs, and the
        // gradient it applies is unscaled (x^T: 100 per entry).
        let mut scaler = scaler.init_scale(64.0);
        assert!(step(&mut scaler, &mut opt), "finite step on {dev:?}");
        assert_eq!(
            w.to_vec::<f32>().expect("read"),
            vec![-49.0, -48.0, -47.0, -46.0]
        );
        assert!(step(&mut scaler, &mut opt));
        // Two good steps in a row at growth_interval 2: the scale doubles.
        assert_eq!(scaler.get_scale(), 128.0);
        assert_eq!(scaler.skipped_steps(), 1);
    }
}
