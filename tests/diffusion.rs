//! The diffusion example's U-Net (examples/support/unet.rs), tiny: its
//! parameter count against a count by hand, its names, the output shape,
//! and three AdamW steps on a fixed noise-prediction problem with a
//! finite, falling loss, on every device. Also the examples' PNG writer
//! (examples/support/png.rs): its CRC-32 and a file read back.

mod common;

#[path = "../examples/support/png.rs"]
mod png;
#[path = "../examples/support/unet.rs"]
mod unet;

use lazywgpu::Tensor;
use lazywgpu::nn::{Parameters, functional as F};
use lazywgpu::optim::{AdamW, Optimizer};
use unet::{UNet, UNetConfig};

/// The U-Net's parameters counted from its description.
fn expected_params(ch: usize, c: usize) -> usize {
    let td = 4 * c;
    let conv = |cin: usize, cout: usize, k: usize| cin * cout * k * k + cout;
    let lin = |i: usize, o: usize| i * o + o;
    let gn = |c: usize| 2 * c;
    let res = |cin: usize, cout: usize| {
        gn(cin)
            + conv(cin, cout, 3)
            + lin(td, cout)
            + gn(cout)
            + conv(cout, cout, 3)
            + if cin != cout { conv(cin, cout, 1) } else { 0 }
    };
    let attn = |c: usize| gn(c) + conv(c, 3 * c, 1) + conv(c, c, 1);
    lin(c, td) + lin(td, td) // time MLP
        + conv(ch, c, 3) // stem
        + res(c, c) + conv(c, c, 3) // down0, downsample0
        + res(c, 2 * c) + conv(2 * c, 2 * c, 3) // down1, downsample1
        + res(2 * c, 2 * c) + attn(2 * c) + res(2 * c, 2 * c) // middle
        + conv(2 * c, 2 * c, 3) + res(4 * c, 2 * c) // up to half size, up1
        + conv(2 * c, 2 * c, 3) + res(3 * c, c) // up to full size, up0
        + gn(c) + conv(c, ch, 3) // out
}

#[test]
fn tiny_unet_shapes_names_and_three_falling_steps() {
    let config = UNetConfig {
        channels: 1,
        base: 8,
        groups: 4,
    };
    for dev in common::devices() {
        dev.manual_seed(0);
        let model = UNet::new(config, &dev);
        assert_eq!(model.num_params(), expected_params(1, 8), "{}", dev.name());
        let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
        for name in [
            "time_mlp.0.weight",
            "time_mlp.2.bias",
            "down1.skip.weight",
            "mid_attn.qkv.weight",
            "upsample0.conv.weight",
            "up0.time_proj.weight",
            "out_conv.bias",
        ] {
            assert!(names.iter().any(|n| n == name), "no {name} in {names:?}");
        }

        // A fixed problem: the noise added to fixed images at fixed steps.
        let x0 = Tensor::rand([4, 1, 16, 16], &dev) * 2.0f32 - 1.0f32;
        let noise = Tensor::randn([4, 1, 16, 16], &dev);
        let t = Tensor::from_vec(vec![10.0f32, 200.0, 500.0, 900.0], [4], &dev).unwrap();
        let x_t = &x0 * 0.6f32 + &noise * 0.8f32;
        dev.mark_step().unwrap();
        let mut opt = AdamW::new(model.params(), 3e-3);
        let mut losses = Vec::new();
        for _ in 0..3 {
            opt.zero_grad();
            let pred = model.forward(&x_t, &t);
            assert_eq!(pred.shape(), x_t.shape());
            let loss = F::mse_loss(&pred, &noise);
            loss.backward();
            opt.step();
            dev.mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
        }
        assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
        assert!(losses[2] < losses[0], "{}: {losses:?}", dev.name());
    }
    // The example's default width, counted the same way.
    assert_eq!(expected_params(1, 16), 146_961);
}

#[test]
fn png_writer() {
    // CRC-32's check value, and PNG's own IEND chunk.
    assert_eq!(png::crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(png::crc32(b"IEND"), 0xAE42_6082);
    let pixels: Vec<u8> = (0..2 * 3 * 3).map(|i| (i * 13) as u8).collect();
    let file = png::encode(3, 2, 3, &pixels);
    assert_eq!(&file[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&file[12..16], b"IHDR");
    assert_eq!(&file[16..24], &[0, 0, 0, 3, 0, 0, 0, 2]);
    assert_eq!(&file[24..26], &[8, 2]); // 8 bits, RGB
    // IDAT's data decompresses to the rows, each after filter byte 0.
    let idat_len = u32::from_be_bytes(file[33..37].try_into().unwrap()) as usize;
    assert_eq!(&file[37..41], b"IDAT");
    let mut raw = Vec::new();
    use std::io::Read;
    flate2::read::ZlibDecoder::new(&file[41..41 + idat_len])
        .read_to_end(&mut raw)
        .unwrap();
    let mut expected = vec![0u8];
    expected.extend_from_slice(&pixels[..9]);
    expected.push(0);
    expected.extend_from_slice(&pixels[9..]);
    assert_eq!(raw, expected);
    assert!(file.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]));
}
