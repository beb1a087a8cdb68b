//! Layers and initialisers whose results are shapes or statistics rather
//! than values PyTorch pins down: `Flatten`'s dims, the `nn::init`
//! functions' spreads (against the formulas of PyTorch's `nn.init`, over
//! many draws), and the kernel counts of BatchNorm in training and eval.

mod common;

use lazywgpu::nn::init::{self, FanMode, Nonlinearity};
use lazywgpu::nn::{self, Module};
use lazywgpu::{Device, Tensor};

#[test]
fn flatten_joins_the_dims_it_is_given() {
    let dev = Device::cpu();
    let x = Tensor::zeros([2, 3, 4, 5], &dev);
    assert_eq!(nn::Flatten.forward(&x).shape(), &[2, 60]);
    assert_eq!(nn::Flatten::new(0, -1).forward(&x).shape(), &[120]);
    assert_eq!(nn::Flatten::new(1, 2).forward(&x).shape(), &[2, 12, 5]);
    assert_eq!(nn::Flatten::new(-2, -1).forward(&x).shape(), &[2, 3, 20]);
    assert_eq!(nn::Flatten::new(2, 2).forward(&x).shape(), &[2, 3, 4, 5]);
}

#[test]
#[should_panic(expected = "Flatten: dims 2..=1")]
fn flatten_refuses_dims_out_of_order() {
    nn::Flatten::new(2, 1).forward(&Tensor::zeros([2, 3, 4], &Device::cpu()));
}

/// Mean and standard deviation of `t`'s elements, in f64.
fn moments(t: &Tensor) -> (f64, f64) {
    let v = t.to_vec::<f32>().expect("read");
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[test]
fn initialisers_draw_with_pytorchs_spreads() {
    let dev = Device::cpu();
    dev.manual_seed(3);
    // [out 256, in 64, 3, 3]: fan_in = 576, fan_out = 2304.
    let w = Tensor::zeros([256, 64, 3, 3], &dev);
    let close = |got: f64, want: f64, what: &str| {
        assert!((got - want).abs() <= 0.02 * want, "{what}: {got} vs {want}");
    };

    init::kaiming_normal_(&w, FanMode::FanOut, Nonlinearity::Relu);
    close(
        moments(&w).1,
        (2.0f64 / 2304.0).sqrt(),
        "kaiming_normal_ fan_out relu std",
    );
    init::kaiming_normal_(&w, FanMode::FanIn, Nonlinearity::LeakyRelu(0.0));
    close(
        moments(&w).1,
        (2.0f64 / 576.0).sqrt(),
        "kaiming_normal_ default std",
    );
    init::kaiming_uniform_(&w, FanMode::FanIn, Nonlinearity::Relu);
    // Uniform in [-b, b): std b / sqrt(3), b = sqrt(2) sqrt(3 / fan_in).
    let b = 2.0f64.sqrt() * (3.0f64 / 576.0).sqrt();
    close(moments(&w).1, b / 3.0f64.sqrt(), "kaiming_uniform_ std");
    let max = w.abs().max_all().item::<f32>().expect("max") as f64;
    assert!(
        max < b && max > 0.99 * b,
        "kaiming_uniform_ bound {max} vs {b}"
    );
    init::normal_(&w, 1.5, 0.25);
    let (m, s) = moments(&w);
    assert!((m - 1.5).abs() < 0.005, "normal_ mean {m}");
    close(s, 0.25, "normal_ std");
    init::xavier_uniform_(&w, 1.0);
    let b = (6.0f64 / (576.0 + 2304.0)).sqrt();
    close(moments(&w).1, b / 3.0f64.sqrt(), "xavier_uniform_ std");
    init::zeros_(&w);
    assert_eq!(moments(&w), (0.0, 0.0));
    init::ones_(&w);
    assert_eq!(moments(&w), (1.0, 0.0));
}

#[test]
fn batch_norm_kernels_per_step() {
    let Some(dev) = common::gpu() else { return };
    dev.manual_seed(0);
    let conv = nn::Conv2d::no_bias(8, 8, 3, &dev).padding((1, 1));
    let bn = nn::BatchNorm2d::new(8, &dev);
    let x = Tensor::randn([4, 8, 16, 16], &dev);
    dev.mark_step().expect("inputs");
    let launches = || dev.metrics().counter("kernel_launches");
    let kernels = |training: bool| {
        bn.set_training(training);
        let step = || {
            let before = launches();
            bn.forward(&conv.forward(&x))
                .relu()
                .sum_all()
                .item::<f32>()
                .expect("read");
            launches() - before
        };
        step(); // compiles; the second step runs what it compiled
        step()
    };
    let eval = kernels(false);
    let train = kernels(true);
    eprintln!("conv + BatchNorm2d + relu + sum: {eval} kernels in eval, {train} in training");
    // Eval folds the normalisation into the convolution's epilogue: the
    // matmul and the sum, nothing more (the sum of 8,192 elements takes
    // two stages where reductions split as for a GPU).
    let sum_kernels = if common::gpu_schedules(&dev) { 2 } else { 1 };
    assert!(eval <= 1 + sum_kernels, "eval: {eval} kernels");
    assert!(train > eval, "training adds the statistics' reductions");
}

#[test]
fn batch_norm_on_bf16_input_keeps_f32_statistics() {
    for dev in common::devices() {
        // Values exact in bf16, so the f32 and bf16 layers see the same numbers.
        let values: Vec<f32> = (0..2 * 3 * 4 * 4)
            .map(|i| ((i * 7) % 23) as f32 * 0.125 - 1.0)
            .collect();
        let x = Tensor::from_vec(values, [2, 3, 4, 4], &dev).expect("x");
        let (a, b) = (nn::BatchNorm2d::new(3, &dev), nn::BatchNorm2d::new(3, &dev));
        let want = a.forward(&x).to_vec::<f32>().expect("f32");
        let got = b.forward(&x.bfloat16());
        assert_eq!(
            got.dtype(),
            lazywgpu::DType::BF16,
            "the output keeps the input's dtype"
        );
        let got = got.float().to_vec::<f32>().expect("bf16");
        common::assert_close(&got, &want, 1e-2, 1e-2, "bf16 batch norm");
        let (ra, rb) = (
            a.running_var.as_ref().expect("a"),
            b.running_var.as_ref().expect("b"),
        );
        assert_eq!(
            rb.dtype(),
            lazywgpu::DType::F32,
            "running statistics stay f32"
        );
        assert_eq!(
            ra.to_vec::<f32>().expect("a"),
            rb.to_vec::<f32>().expect("b")
        );
    }
}

#[test]
fn spatial_ops_keep_half_dtypes() {
    for dev in common::devices() {
        let x = Tensor::from_vec(
            (0..49).map(|i| i as f32 * 0.25).collect::<Vec<f32>>(),
            [1, 1, 7, 7],
            &dev,
        )
        .expect("x");
        for dtype in [lazywgpu::DType::F16, lazywgpu::DType::BF16] {
            let h = x.cast(dtype);
            let pooled = h.adaptive_avg_pool2d((3, 3));
            assert_eq!(pooled.dtype(), dtype);
            let want = x.adaptive_avg_pool2d((3, 3)).to_vec::<f32>().expect("f32");
            common::assert_close(
                &pooled.float().to_vec::<f32>().expect("half"),
                &want,
                1e-2,
                1e-2,
                "pool",
            );
            let up = h.interpolate(
                Some((9, 5)),
                None,
                lazywgpu::InterpolateMode::Bilinear,
                true,
            );
            assert_eq!(up.dtype(), dtype);
            let want = x
                .interpolate(
                    Some((9, 5)),
                    None,
                    lazywgpu::InterpolateMode::Bilinear,
                    true,
                )
                .to_vec::<f32>()
                .expect("f32");
            common::assert_close(
                &up.float().to_vec::<f32>().expect("half"),
                &want,
                1e-2,
                5e-2,
                "bilinear",
            );
        }
    }
}
