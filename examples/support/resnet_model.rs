//! A ResNet-18-shaped network, narrowed: torchvision's `BasicBlock` and
//! `ResNet` structure with PyTorch's state-dict names (`conv1.weight`,
//! `bn1.running_mean`, `layer1.0.conv1.weight`,
//! `layer2.0.downsample.0.weight`, `fc.bias`, ...), its initialisation
//! (Kaiming normal, fan-out, on the convolutions; BatchNorm weight 1 and
//! bias 0), and a stem for small images: one 3x3 convolution of stride
//! 1 and no max-pool (the CIFAR variant), as 28x28 digits and 32x32
//! photos leave no room for torchvision's 7x7 stride-2 stem.
//!
//! Shared by `examples/resnet.rs` and `tests/resnet_example.rs`.

// Each includer uses its own part of it.
#![allow(dead_code)]

use lazywgpu::nn::init::{FanMode, Nonlinearity, kaiming_normal_};
use lazywgpu::nn::{self, Module, ParamVisitor};
use lazywgpu::{Device, Tensor};

/// A 3x3 or 1x1 convolution without bias, as torchvision's `conv3x3` and
/// `conv1x1`, initialised as torchvision's `ResNet.__init__` does.
fn conv(cin: usize, cout: usize, kernel: usize, stride: usize, dev: &Device) -> nn::Conv2d {
    let pad = kernel / 2;
    let c = nn::Conv2d::no_bias(cin, cout, kernel, dev)
        .stride((stride, stride))
        .padding((pad, pad));
    kaiming_normal_(&c.weight, FanMode::FanOut, Nonlinearity::Relu);
    c
}

/// torchvision's `BasicBlock`: conv3x3-BN-ReLU-conv3x3-BN plus the input
/// (through a 1x1 convolution and BN where the shape changes), then ReLU.
pub struct BasicBlock {
    conv1: nn::Conv2d,
    bn1: nn::BatchNorm2d,
    conv2: nn::Conv2d,
    bn2: nn::BatchNorm2d,
    downsample: Option<nn::Sequential>,
}

impl BasicBlock {
    /// A block from `cin` to `cout` channels, the first convolution (and
    /// the downsample) of stride `stride`.
    pub fn new(cin: usize, cout: usize, stride: usize, dev: &Device) -> BasicBlock {
        BasicBlock {
            conv1: conv(cin, cout, 3, stride, dev),
            bn1: nn::BatchNorm2d::new(cout, dev),
            conv2: conv(cout, cout, 3, 1, dev),
            bn2: nn::BatchNorm2d::new(cout, dev),
            downsample: (stride != 1 || cin != cout).then(|| {
                nn::Sequential::new()
                    .add(conv(cin, cout, 1, stride, dev))
                    .add(nn::BatchNorm2d::new(cout, dev))
            }),
        }
    }
}

impl Module for BasicBlock {
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = self.bn1.forward(&self.conv1.forward(x)).relu();
        let y = self.bn2.forward(&self.conv2.forward(&y));
        let identity = match &self.downsample {
            Some(d) => d.forward(x),
            None => x.clone(),
        };
        (y + identity).relu()
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

/// The network's shape: input channels, the width of each of the four
/// stages and its number of blocks, and the classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResNetConfig {
    /// Channels of the input images (1 for MNIST, 3 for CIFAR-10).
    pub in_channels: usize,
    /// Channels of `layer1` to `layer4` (ResNet-18: 64, 128, 256, 512).
    pub widths: [usize; 4],
    /// Blocks in each stage (ResNet-18: 2, 2, 2, 2).
    pub blocks: [usize; 4],
    /// Outputs of the final linear layer.
    pub classes: usize,
}

/// torchvision's `ResNet` with `BasicBlock`, narrowed to a
/// [`ResNetConfig`], on a small-image stem.
pub struct ResNet {
    conv1: nn::Conv2d,
    bn1: nn::BatchNorm2d,
    layers: [nn::Sequential; 4],
    avgpool: nn::AdaptiveAvgPool2d,
    fc: nn::Linear,
}

impl ResNet {
    /// The network of `config` on `dev`, initialised as torchvision's.
    pub fn new(config: ResNetConfig, dev: &Device) -> ResNet {
        let stem = config.widths[0];
        let mut cin = stem;
        let layers = std::array::from_fn(|i| {
            let cout = config.widths[i];
            let mut stage = nn::Sequential::new();
            for b in 0..config.blocks[i].max(1) {
                // The first stage keeps the resolution; the others halve it
                // in their first block.
                let stride = if i > 0 && b == 0 { 2 } else { 1 };
                stage = stage.add(BasicBlock::new(cin, cout, stride, dev));
                cin = cout;
            }
            stage
        });
        ResNet {
            conv1: conv(config.in_channels, stem, 3, 1, dev),
            bn1: nn::BatchNorm2d::new(stem, dev),
            layers,
            avgpool: nn::AdaptiveAvgPool2d::new((1, 1)),
            fc: nn::Linear::new(cin, config.classes, dev),
        }
    }
}

impl Module for ResNet {
    fn forward(&self, x: &Tensor) -> Tensor {
        let mut x = self.bn1.forward(&self.conv1.forward(x)).relu();
        for layer in &self.layers {
            x = layer.forward(&x);
        }
        let x = nn::Flatten.forward(&self.avgpool.forward(&x));
        self.fc.forward(&x)
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.module("conv1", &self.conv1);
        v.module("bn1", &self.bn1);
        for (name, layer) in ["layer1", "layer2", "layer3", "layer4"]
            .into_iter()
            .zip(&self.layers)
        {
            v.module(name, layer);
        }
        v.module("avgpool", &self.avgpool);
        v.module("fc", &self.fc);
    }
}
