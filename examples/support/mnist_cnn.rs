//! PyTorch's MNIST example network, shared by the `mnist` example and the
//! comparison suite's CNN row.

use lazywgpu::Device;
use lazywgpu::nn;

/// PyTorch's MNIST example network (without its final log_softmax).
pub fn cnn(dev: &Device) -> nn::Sequential {
    nn::Sequential::new()
        .add(nn::Conv2d::new(1, 32, 3, dev))
        .add(nn::ReLU)
        .add(nn::Conv2d::new(32, 64, 3, dev))
        .add(nn::ReLU)
        .add(nn::MaxPool2d::new(2))
        .add(nn::Dropout::new(0.25))
        .add(nn::Flatten)
        .add(nn::Linear::new(9216, 128, dev))
        .add(nn::ReLU)
        .add(nn::Dropout::new(0.5))
        .add(nn::Linear::new(128, 10, dev))
}
