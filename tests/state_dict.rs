//! Modules with buffers against PyTorch: a ResNet-shaped network whose
//! state dict PyTorch saved as safetensors (tools/golden_nn.py writes
//! tests/golden/tiny_resnet.*) loads by name into the same structure
//! written with `Module::visit`, and gives PyTorch's outputs in eval and
//! training mode, with the same running statistics after a training
//! step. Also: buffers are never parameters, `train()`/`eval()` reach
//! every child, and a save/load round trip keeps the buffers.

mod common;

use common::{assert_close, devices};
use lazywgpu::nn::{self, Module, ParamVisitor, Parameters};
use lazywgpu::{Device, Tensor};
use serde_json::Value;

const GOLDEN: &str = include_str!("golden/tiny_resnet.json");
const STATE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/tiny_resnet.safetensors"
);

/// torchvision's BasicBlock, narrowed.
struct BasicBlock {
    conv1: nn::Conv2d,
    bn1: nn::BatchNorm2d,
    conv2: nn::Conv2d,
    bn2: nn::BatchNorm2d,
    downsample: Option<nn::Sequential>,
}

impl BasicBlock {
    fn new(cin: usize, cout: usize, stride: usize, dev: &Device) -> BasicBlock {
        let conv = |cin, k, s, p| {
            nn::Conv2d::no_bias(cin, cout, k, dev)
                .stride((s, s))
                .padding((p, p))
        };
        BasicBlock {
            conv1: conv(cin, 3, stride, 1),
            bn1: nn::BatchNorm2d::new(cout, dev),
            conv2: conv(cout, 3, 1, 1),
            bn2: nn::BatchNorm2d::new(cout, dev),
            downsample: (stride != 1 || cin != cout).then(|| {
                nn::Sequential::new()
                    .add(conv(cin, 1, stride, 0))
                    .add(nn::BatchNorm2d::new(cout, dev))
            }),
        }
    }
}

impl Module for BasicBlock {
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = self.bn1.forward(&self.conv1.forward(x)).relu();
        let y = self.bn2.forward(&self.conv2.forward(&y));
        let skip = match &self.downsample {
            Some(d) => d.forward(x),
            None => x.clone(),
        };
        (y + skip).relu()
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.module("conv1", &self.conv1);
        v.module("bn1", &self.bn1);
        v.module("conv2", &self.conv2);
        v.module("bn2", &self.bn2);
        if let Some(d) = &self.downsample {
            v.module("downsample", d);
        }
    }
}

struct TinyResNet {
    conv1: nn::Conv2d,
    bn1: nn::BatchNorm2d,
    layer1: nn::Sequential,
    avgpool: nn::AdaptiveAvgPool2d,
    fc: nn::Linear,
}

impl TinyResNet {
    fn new(dev: &Device) -> TinyResNet {
        TinyResNet {
            conv1: nn::Conv2d::no_bias(3, 4, 3, dev).padding((1, 1)),
            bn1: nn::BatchNorm2d::new(4, dev),
            layer1: nn::Sequential::new()
                .add(BasicBlock::new(4, 4, 1, dev))
                .add(BasicBlock::new(4, 8, 2, dev)),
            avgpool: nn::AdaptiveAvgPool2d::new((1, 1)),
            fc: nn::Linear::new(8, 5, dev),
        }
    }
}

impl Module for TinyResNet {
    fn forward(&self, x: &Tensor) -> Tensor {
        let x = self.bn1.forward(&self.conv1.forward(x)).relu();
        let x = self.avgpool.forward(&self.layer1.forward(&x));
        self.fc.forward(&nn::Flatten.forward(&x))
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.module("conv1", &self.conv1);
        v.module("bn1", &self.bn1);
        v.module("layer1", &self.layer1);
        v.module("avgpool", &self.avgpool);
        v.module("fc", &self.fc);
    }
}

fn floats(v: &Value) -> Vec<f32> {
    v["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

fn shape(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

#[test]
fn a_pytorch_state_dict_loads_by_name_and_gives_pytorchs_outputs() {
    let golden: Value = serde_json::from_str(GOLDEN).expect("golden JSON");
    for dev in devices() {
        dev.manual_seed(7);
        let net = TinyResNet::new(&dev);
        let names: Vec<String> = net.state_dict().into_iter().map(|(n, _)| n).collect();
        let want: Vec<String> = golden["names"]
            .as_array()
            .expect("names")
            .iter()
            .map(|n| n.as_str().expect("name").to_string())
            .collect();
        assert_eq!(names, want, "state dict names and order follow PyTorch's");
        nn::load_safetensors(&net, STATE).expect("PyTorch's state dict loads");
        let count = &net.bn1.num_batches_tracked.as_ref().expect("tracked");
        assert_eq!(count.item::<i64>().expect("read"), 3, "i64 counter loads");

        let x = Tensor::from_vec(floats(&golden["x"]), shape(&golden["x"]), &dev).expect("x");
        net.eval();
        let eval = net.forward(&x).to_vec::<f32>().expect("eval");
        assert_close(&eval, &floats(&golden["eval"]), 1e-4, 1e-5, "eval output");
        net.train();
        let train = lazywgpu::no_grad(|| net.forward(&x))
            .to_vec::<f32>()
            .expect("train");
        assert_close(
            &train,
            &floats(&golden["train"]),
            1e-4,
            1e-5,
            "train output",
        );
        let rm = net.bn1.running_mean.as_ref().expect("running mean");
        let rm = rm.to_vec::<f32>().expect("running mean");
        assert_close(
            &rm,
            &floats(&golden["bn1_running_mean_after"]),
            1e-4,
            1e-6,
            "bn1.running_mean after a training step",
        );
        let state = net.state_dict();
        let rv = &state
            .iter()
            .find(|(n, _)| n == "layer1.1.bn2.running_var")
            .expect("a nested buffer")
            .1;
        assert_close(
            &rv.to_vec::<f32>().expect("running var"),
            &floats(&golden["block2_bn2_running_var_after"]),
            1e-4,
            1e-6,
            "layer1.1.bn2.running_var after a training step",
        );
        let after = golden["num_batches_tracked_after"].as_i64().expect("count");
        assert_eq!(count.item::<i64>().expect("read"), after);
    }
}

#[test]
fn buffers_are_saved_and_loaded_but_never_parameters() {
    let dev = Device::cpu();
    dev.manual_seed(1);
    let net = TinyResNet::new(&dev);
    let params = net.named_parameters();
    let buffers = net.named_buffers();
    assert!(
        params.iter().all(|(n, _)| !n.contains("running")),
        "running statistics are not parameters"
    );
    assert_eq!(buffers.len(), 6 * 3, "six BatchNorms, three buffers each");
    assert!(buffers.iter().all(|(_, t)| !t.requires_grad()));
    assert_eq!(
        net.num_params(),
        net.parameters().iter().map(Tensor::numel).sum::<usize>()
    );

    // A training step moves the buffers; a round trip keeps them.
    let x = Tensor::randn([2, 3, 8, 8], &dev);
    net.forward(&x).sum_all().backward();
    let path =
        std::env::temp_dir().join(format!("lazywgpu-state-{}.safetensors", std::process::id()));
    nn::save_safetensors(&net, &path).expect("save");
    let again = TinyResNet::new(&dev);
    nn::load_safetensors(&again, &path).expect("load");
    std::fs::remove_file(&path).ok();
    for ((n, a), (_, b)) in net.state_dict().iter().zip(again.state_dict().iter()) {
        if n.ends_with("num_batches_tracked") {
            assert_eq!(a.item::<i64>().expect("read"), 1, "{n}: one batch counted");
            assert_eq!(b.item::<i64>().expect("read"), 1, "{n}: loaded");
        } else {
            let (a, b) = (a.to_vec::<f32>(), b.to_vec::<f32>());
            assert_eq!(a.expect("read"), b.expect("read"), "{n}");
        }
    }
}

#[test]
fn train_and_eval_reach_every_child_without_forwarding() {
    let dev = Device::cpu();
    let net = TinyResNet::new(&dev);
    net.eval();
    let x = Tensor::randn([2, 3, 8, 8], &dev);
    let before: Vec<Vec<f32>> = net
        .named_buffers()
        .iter()
        .filter(|(n, _)| n.ends_with("running_mean"))
        .map(|(_, t)| t.to_vec::<f32>().expect("read"))
        .collect();
    net.forward(&x).to_vec::<f32>().expect("eval forward");
    let after: Vec<Vec<f32>> = net
        .named_buffers()
        .iter()
        .filter(|(n, _)| n.ends_with("running_mean"))
        .map(|(_, t)| t.to_vec::<f32>().expect("read"))
        .collect();
    assert_eq!(
        before, after,
        "eval mode leaves every running mean alone, nested ones too"
    );
    net.train();
    net.forward(&x).to_vec::<f32>().expect("train forward");
    let moved = net
        .named_buffers()
        .iter()
        .filter(|(n, _)| n.ends_with("running_mean"))
        .zip(&before)
        .filter(|((_, t), b)| t.to_vec::<f32>().expect("read") != **b)
        .count();
    assert_eq!(moved, 6, "training mode reaches all six BatchNorms");
}

#[test]
#[should_panic(expected = "expected more than 1 value per channel when training")]
fn batch_norm_refuses_one_value_per_channel_in_training() {
    let dev = Device::cpu();
    let bn = nn::BatchNorm1d::new_1d(4, &dev);
    bn.forward(&Tensor::ones([1, 4], &dev));
}

#[test]
#[should_panic(expected = "must be divisible by num_groups")]
fn group_norm_refuses_channels_that_do_not_divide() {
    nn::GroupNorm::new(3, 8, &Device::cpu());
}

/// `to_dtype` converts a module's floating parameters and buffers in
/// place (BatchNorm's running statistics follow, its counter stays i64),
/// and the module runs in the new dtype.
#[test]
fn to_dtype_converts_parameters_and_float_buffers() {
    use lazywgpu::nn::BatchNorm2d;
    for dev in common::devices() {
        let bn = BatchNorm2d::new(3, &dev);
        bn.to_dtype(lazywgpu::DType::BF16);
        for (name, t) in bn.state_dict() {
            let want = if name.ends_with("num_batches_tracked") {
                lazywgpu::DType::I64
            } else {
                lazywgpu::DType::BF16
            };
            assert_eq!(t.dtype(), want, "{name}");
        }
        bn.eval();
        let x = lazywgpu::Tensor::ones([2, 3, 2, 2], &dev).cast(lazywgpu::DType::BF16);
        let y = bn.forward(&x);
        assert_eq!(y.dtype(), lazywgpu::DType::BF16);
        let v = y.cast(lazywgpu::DType::F32).to_vec::<f32>().unwrap();
        // Running mean 0, variance 1: y = x / sqrt(1 + 1e-5), in bf16.
        assert!(v.iter().all(|&a| (a - 1.0).abs() < 1e-2), "{v:?}");
    }
}
