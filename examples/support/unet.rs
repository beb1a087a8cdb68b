//! A small DDPM U-Net, shared by `examples/diffusion.rs` and
//! `tests/diffusion.rs`: a sinusoidal time embedding and its MLP, residual
//! blocks (GroupNorm, SiLU, 3x3 convolution, the time embedding added per
//! channel), two stride-2 down-samplings, nearest up-sampling followed by a
//! convolution, skip connections by concatenation, and one self-attention
//! block at the lowest resolution. Images whose sides halve twice cleanly
//! (28x28 -> 14 -> 7, 32x32 -> 16 -> 8) go through unchanged.
//!
//! Parameter names follow the structure (`down1.conv1.weight`,
//! `mid_attn.qkv.weight`, `time_mlp.0.weight`), through `Module::visit`.

// The test uses the model, not every helper.
#![allow(dead_code)]

use lazywgpu::nn::{self, Module, ParamVisitor, functional as F};
use lazywgpu::{Device, InterpolateMode, Tensor};

/// The U-Net's sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UNetConfig {
    /// Image channels in and out (1 for MNIST, 3 for CIFAR-10).
    pub channels: usize,
    /// Channels at full resolution; the two lower levels have twice as
    /// many.
    pub base: usize,
    /// GroupNorm's groups (must divide `base`).
    pub groups: usize,
}

impl UNetConfig {
    /// Width of the time embedding after its MLP (4 x `base`).
    pub fn time_dim(&self) -> usize {
        4 * self.base
    }
}

/// The sinusoidal embedding of timesteps `t` (`[B]`, `f32`): `[B, dim]`,
/// `sin` of `t * 10000^(-i / (dim/2))` for `i < dim/2`, then `cos` of the
/// same (as the DDPM and "Attention is all you need" papers).
pub fn timestep_embedding(t: &Tensor, dim: usize) -> Tensor {
    let half = dim / 2;
    let freqs: Vec<f32> = (0..half)
        .map(|i| (-(10000f32.ln()) * i as f32 / half as f32).exp())
        .collect();
    let freqs = Tensor::from_vec(freqs, [1, half], t.device())
        .expect("a [1, dim/2] tensor of dim/2 values");
    let b = t.shape()[0];
    let args = t.reshape([b, 1]) * &freqs;
    Tensor::cat(&[&args.sin(), &args.cos()], 1)
}

/// A 3x3 convolution keeping the size (padding 1).
fn conv3(cin: usize, cout: usize, dev: &Device) -> nn::Conv2d {
    nn::Conv2d::new(cin, cout, 3, dev).padding((1, 1))
}

/// GroupNorm -> SiLU -> conv, twice, with the time embedding projected to
/// the output channels and added after the first convolution; a 1x1
/// convolution on the skip path when the channels change.
pub struct ResBlock {
    norm1: nn::GroupNorm,
    conv1: nn::Conv2d,
    time_proj: nn::Linear,
    norm2: nn::GroupNorm,
    conv2: nn::Conv2d,
    skip: Option<nn::Conv2d>,
}

impl ResBlock {
    /// A block from `cin` to `cout` channels for a `time_dim` embedding.
    pub fn new(cin: usize, cout: usize, time_dim: usize, groups: usize, dev: &Device) -> ResBlock {
        ResBlock {
            norm1: nn::GroupNorm::new(groups, cin, dev),
            conv1: conv3(cin, cout, dev),
            time_proj: nn::Linear::new(time_dim, cout, dev),
            norm2: nn::GroupNorm::new(groups, cout, dev),
            conv2: conv3(cout, cout, dev),
            skip: (cin != cout).then(|| nn::Conv2d::new(cin, cout, 1, dev)),
        }
    }

    /// `x` `[B, cin, H, W]` with the (already SiLU-activated) time
    /// embedding `temb` `[B, time_dim]`: `[B, cout, H, W]`.
    pub fn forward(&self, x: &Tensor, temb: &Tensor) -> Tensor {
        let h = self.conv1.forward(&self.norm1.forward(x).silu());
        let t = self.time_proj.forward(temb);
        let (b, c) = (t.shape()[0], t.shape()[1]);
        let h = h + t.reshape([b, c, 1, 1]);
        let h = self.conv2.forward(&self.norm2.forward(&h).silu());
        let skip = match &self.skip {
            Some(conv) => conv.forward(x),
            None => x.clone(),
        };
        h + skip
    }
}

impl nn::Parameters for ResBlock {
    fn visit(&self, v: &mut ParamVisitor) {
        v.module("norm1", &self.norm1);
        v.module("conv1", &self.conv1);
        v.module("time_proj", &self.time_proj);
        v.module("norm2", &self.norm2);
        v.module("conv2", &self.conv2);
        if let Some(skip) = &self.skip {
            v.module("skip", skip);
        }
    }
}

/// Single-head self-attention over the `H*W` positions: GroupNorm, a 1x1
/// convolution to queries, keys and values, scaled dot-product attention,
/// a 1x1 output projection, and the residual.
pub struct AttnBlock {
    norm: nn::GroupNorm,
    qkv: nn::Conv2d,
    proj: nn::Conv2d,
}

impl AttnBlock {
    /// Attention over `channels`-wide positions.
    pub fn new(channels: usize, groups: usize, dev: &Device) -> AttnBlock {
        AttnBlock {
            norm: nn::GroupNorm::new(groups, channels, dev),
            qkv: nn::Conv2d::new(channels, 3 * channels, 1, dev),
            proj: nn::Conv2d::new(channels, channels, 1, dev),
        }
    }
}

impl Module for AttnBlock {
    fn forward(&self, x: &Tensor) -> Tensor {
        let s = x.shape().to_vec();
        let (b, c, hw) = (s[0], s[1], s[2] * s[3]);
        // [B, 3C, H, W] -> [3, B, HW, C]: queries, keys, values per position.
        let qkv = self
            .qkv
            .forward(&self.norm.forward(x))
            .reshape([b, 3, c, hw])
            .permute([1, 0, 3, 2]);
        let (q, k, v) = (qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2));
        let h = F::scaled_dot_product_attention(&q, &k, &v, None, false);
        let h = h.permute([0, 2, 1]).reshape([b, c, s[2], s[3]]);
        x + self.proj.forward(&h)
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.module("norm", &self.norm);
        v.module("qkv", &self.qkv);
        v.module("proj", &self.proj);
    }
}

/// Nearest 2x up-sampling, then a 3x3 convolution.
pub struct Up {
    upsample: nn::Upsample,
    conv: nn::Conv2d,
}

impl Up {
    fn new(channels: usize, dev: &Device) -> Up {
        Up {
            upsample: nn::Upsample::scale(2.0, InterpolateMode::Nearest),
            conv: conv3(channels, channels, dev),
        }
    }
}

impl Module for Up {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.conv.forward(&self.upsample.forward(x))
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.module("conv", &self.conv);
    }
}

/// The noise-predicting U-Net: `forward(x, t)` with images `x`
/// `[B, channels, H, W]` and timesteps `t` `[B]` (`f32`) gives the
/// predicted noise, shaped as `x`.
///
/// With `c = base`: stem conv to `c`; `down0` (c -> c) at full size, a
/// stride-2 conv; `down1` (c -> 2c) at half size, a stride-2 conv;
/// `mid1`, `mid_attn`, `mid2` (2c) at a quarter; up-sampling to half
/// size, concatenation with `down1`'s output, `up1` (4c -> 2c);
/// up-sampling to full size, concatenation with `down0`'s output, `up0`
/// (3c -> c); GroupNorm, SiLU and a conv back to the image channels.
pub struct UNet {
    /// The sizes it was built with.
    pub config: UNetConfig,
    time_mlp: nn::Sequential,
    stem: nn::Conv2d,
    down0: ResBlock,
    downsample0: nn::Conv2d,
    down1: ResBlock,
    downsample1: nn::Conv2d,
    mid1: ResBlock,
    mid_attn: AttnBlock,
    mid2: ResBlock,
    upsample1: Up,
    up1: ResBlock,
    upsample0: Up,
    up0: ResBlock,
    out_norm: nn::GroupNorm,
    out_conv: nn::Conv2d,
}

impl UNet {
    /// A freshly initialised U-Net (the device's generator draws the
    /// weights: seed it first).
    pub fn new(config: UNetConfig, dev: &Device) -> UNet {
        let (c, g, td) = (config.base, config.groups, config.time_dim());
        let res = |cin, cout| ResBlock::new(cin, cout, td, g, dev);
        let down = |ch| {
            nn::Conv2d::new(ch, ch, 3, dev)
                .stride((2, 2))
                .padding((1, 1))
        };
        UNet {
            config,
            time_mlp: nn::Sequential::new()
                .add(nn::Linear::new(c, td, dev))
                .add(nn::SiLU)
                .add(nn::Linear::new(td, td, dev)),
            stem: conv3(config.channels, c, dev),
            down0: res(c, c),
            downsample0: down(c),
            down1: res(c, 2 * c),
            downsample1: down(2 * c),
            mid1: res(2 * c, 2 * c),
            mid_attn: AttnBlock::new(2 * c, g, dev),
            mid2: res(2 * c, 2 * c),
            upsample1: Up::new(2 * c, dev),
            up1: res(4 * c, 2 * c),
            upsample0: Up::new(2 * c, dev),
            up0: res(3 * c, c),
            out_norm: nn::GroupNorm::new(g, c, dev),
            out_conv: conv3(c, config.channels, dev),
        }
    }

    /// The predicted noise for images `x` at timesteps `t` (`[B]`, `f32`).
    pub fn forward(&self, x: &Tensor, t: &Tensor) -> Tensor {
        let temb = self
            .time_mlp
            .forward(&timestep_embedding(t, self.config.base))
            .silu();
        let h = self.stem.forward(x);
        let h0 = self.down0.forward(&h, &temb);
        let h = self.downsample0.forward(&h0);
        let h1 = self.down1.forward(&h, &temb);
        let h = self.downsample1.forward(&h1);
        let h = self.mid1.forward(&h, &temb);
        let h = self.mid_attn.forward(&h);
        let h = self.mid2.forward(&h, &temb);
        let h = self.upsample1.forward(&h);
        let h = self.up1.forward(&Tensor::cat(&[&h, &h1], 1), &temb);
        let h = self.upsample0.forward(&h);
        let h = self.up0.forward(&Tensor::cat(&[&h, &h0], 1), &temb);
        self.out_conv.forward(&self.out_norm.forward(&h).silu())
    }
}

impl nn::Parameters for UNet {
    fn visit(&self, v: &mut ParamVisitor) {
        v.module("time_mlp", &self.time_mlp);
        v.module("stem", &self.stem);
        v.module("down0", &self.down0);
        v.module("downsample0", &self.downsample0);
        v.module("down1", &self.down1);
        v.module("downsample1", &self.downsample1);
        v.module("mid1", &self.mid1);
        v.module("mid_attn", &self.mid_attn);
        v.module("mid2", &self.mid2);
        v.module("upsample1", &self.upsample1);
        v.module("up1", &self.up1);
        v.module("upsample0", &self.upsample0);
        v.module("up0", &self.up0);
        v.module("out_norm", &self.out_norm);
        v.module("out_conv", &self.out_conv);
    }
}
