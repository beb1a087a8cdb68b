//! `i64` and `u8` against PyTorch's semantics, on the CPU reference and
//! the GPU: `i64` is stored in 32 bits (values outside `i32` are refused
//! where they enter), `u8` arithmetic wraps modulo 256 (checked against
//! Rust's wrapping arithmetic on random bytes), sums of bytes are `i64`,
//! casts into `u8` saturate; both index, feed losses, print and go
//! through safetensors.

mod common;

use common::devices;
use lazywgpu::nn::{self, ParamVisitor, Parameters, functional as F};
use lazywgpu::{DType, Error, Tensor};

/// `n` pseudo-random bytes from `seed` (a plain LCG: the test's own data).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect()
}

#[test]
fn u8_arithmetic_wraps_modulo_256_like_pytorch() {
    let (a, b) = (bytes(1000, 1), bytes(1000, 2));
    for dev in devices() {
        let ta = Tensor::from_vec(a.clone(), [1000], &dev).expect("a");
        let tb = Tensor::from_vec(b.clone(), [1000], &dev).expect("b");
        type ByteOp = fn(u8, u8) -> u8;
        let cases: [(&str, Tensor, ByteOp); 3] = [
            ("add", &ta + &tb, u8::wrapping_add),
            ("sub", &ta - &tb, u8::wrapping_sub),
            ("mul", &ta * &tb, u8::wrapping_mul),
        ];
        for (name, got, want) in cases {
            assert_eq!(got.dtype(), DType::U8, "{name}");
            let want: Vec<u8> = a.iter().zip(&b).map(|(&x, &y)| want(x, y)).collect();
            assert_eq!(got.to_vec::<u8>().expect("read"), want, "{name} on {dev:?}");
        }
        let plus = (&ta + 200u8).to_vec::<u8>().expect("read");
        let want: Vec<u8> = a.iter().map(|&x| x.wrapping_add(200)).collect();
        assert_eq!(plus, want, "u8 + scalar stays u8 and wraps");
        // Promotion: u8 with i32 is i32, with f32 is f32, with i64 i64.
        let wide = Tensor::from_vec(vec![1000i32; 1000], [1000], &dev).expect("i32");
        let sum = &ta + &wide;
        assert_eq!(sum.dtype(), DType::I32);
        let want: Vec<i32> = a.iter().map(|&x| x as i32 + 1000).collect();
        assert_eq!(sum.to_vec::<i32>().expect("read"), want);
        assert_eq!((&ta * 0.5f32).dtype(), DType::F32);
        // Sums of bytes are i64 and do not wrap.
        let total = ta.sum_all();
        assert_eq!(total.dtype(), DType::I64);
        let want: i64 = a.iter().map(|&x| x as i64).sum();
        assert_eq!(total.item::<i64>().expect("read"), want);
        // Normalising pixels.
        let f = ta.cast(DType::F32) / 255.0f32;
        let got = f.to_vec::<f32>().expect("read");
        for (g, &x) in got.iter().zip(&a) {
            assert!((g - x as f32 / 255.0).abs() < 1e-6);
        }
    }
}

#[test]
fn casts_into_u8_saturate_and_i64_round_trips() {
    for dev in devices() {
        let f = Tensor::from_vec(vec![-5.0f32, 0.0, 3.7, 254.9, 300.0, 1e9], [6], &dev).expect("f");
        assert_eq!(
            f.cast(DType::U8).to_vec::<u8>().expect("read"),
            [0, 0, 3, 254, 255, 255]
        );
        let i = Tensor::from_vec(vec![-1i32, 7, 256, 1 << 20], [4], &dev).expect("i");
        assert_eq!(
            i.cast(DType::U8).to_vec::<u8>().expect("read"),
            [0, 7, 255, 255]
        );

        let values = vec![i32::MIN as i64, -3, 0, 5, i32::MAX as i64];
        let t = Tensor::from_vec(values.clone(), [5], &dev).expect("i64");
        assert_eq!(t.dtype(), DType::I64);
        assert_eq!(t.to_vec::<i64>().expect("read"), values);
        let mixed =
            &t.narrow(0, 1, 3) + &Tensor::from_vec(vec![1i32, 2, 3], [3], &dev).expect("i32");
        assert_eq!(mixed.dtype(), DType::I64, "i64 with i32 is i64");
        assert_eq!(mixed.to_vec::<i64>().expect("read"), [-2, 2, 8]);
        assert_eq!(
            (&t.narrow(0, 1, 3) * 2i64).to_vec::<i64>().expect("read"),
            [-6, 0, 10]
        );
        assert_eq!(
            (t.narrow(0, 1, 3).cast(DType::F32) * 0.5f32)
                .to_vec::<f32>()
                .expect("read"),
            [-1.5, 0.0, 2.5]
        );
        assert_eq!(
            format!("{}", t.narrow(0, 1, 3)),
            "tensor([-3,  0,  5], shape=[3], dtype=i64)"
        );
    }
}

#[test]
fn i64_outside_i32_is_an_error_where_it_enters() {
    let dev = lazywgpu::Device::cpu();
    match Tensor::from_vec(vec![0i64, 1 << 40], [2], &dev) {
        Err(Error::OutOfRange { index, dtype, .. }) => {
            assert_eq!((index, dtype), (1, DType::I64));
        }
        other => panic!("expected OutOfRange, got {other:?}"),
    }
    let scalar = std::panic::catch_unwind(|| {
        let t = Tensor::from_vec(vec![1i64], [1], &lazywgpu::Device::cpu()).expect("t");
        let _ = &t + (1i64 << 33);
    });
    assert!(scalar.is_err(), "a scalar outside i32 panics at the caller");
}

#[test]
fn i64_indices_and_targets_work_like_i32_ones() {
    for dev in devices() {
        dev.manual_seed(0);
        let x = Tensor::randn([5, 4], &dev);
        let idx64 = Tensor::from_vec(vec![4i64, 0, 2], [3], &dev).expect("idx");
        let idx32 = idx64.cast(DType::I32);
        assert_eq!(
            x.index_select(0, &idx64).to_vec::<f32>().expect("read"),
            x.index_select(0, &idx32).to_vec::<f32>().expect("read")
        );
        let g64 = Tensor::from_vec(vec![3i64, 1, 0, 2, 2], [5, 1], &dev).expect("g");
        assert_eq!(
            x.gather(1, &g64).to_vec::<f32>().expect("read"),
            x.gather(1, &g64.cast(DType::I32))
                .to_vec::<f32>()
                .expect("read")
        );
        let targets = Tensor::from_vec(vec![1i64, 0, 3, 2, -100], [5], &dev).expect("t");
        let a = F::cross_entropy(&x, &targets).item::<f32>().expect("loss");
        let b = F::cross_entropy(&x, &targets.cast(DType::I32))
            .item::<f32>()
            .expect("loss");
        assert_eq!(a, b);
        let hot = Tensor::from_vec(vec![2i64, 0], [2], &dev)
            .expect("h")
            .one_hot(3);
        assert_eq!(hot.dtype(), DType::I64, "one_hot is i64 as in PyTorch");
        assert_eq!(hot.to_vec::<i64>().expect("read"), [0, 0, 1, 1, 0, 0]);
        let ids = Tensor::from_vec(vec![3u8, 1], [2], &dev).expect("ids");
        let table = Tensor::randn([4, 2], &dev);
        assert_eq!(
            F::embedding(&ids, &table).to_vec::<f32>().expect("read"),
            F::embedding(&ids.cast(DType::I32), &table)
                .to_vec::<f32>()
                .expect("read")
        );
    }
}

/// A model holding an image and its labels as buffers.
struct Batch {
    images: Tensor,
    labels: Tensor,
}

impl Parameters for Batch {
    fn visit(&self, v: &mut ParamVisitor) {
        v.buffer("images", &self.images);
        v.buffer("labels", &self.labels);
    }
}

#[test]
fn u8_and_i64_go_through_safetensors() {
    for dev in devices() {
        let images = bytes(2 * 3 * 4, 9);
        let labels = vec![7i64, -2];
        let batch = Batch {
            images: Tensor::from_vec(images.clone(), [2, 3, 4], &dev).expect("images"),
            labels: Tensor::from_vec(labels.clone(), [2], &dev).expect("labels"),
        };
        let path =
            std::env::temp_dir().join(format!("lazywgpu-ints-{}.safetensors", std::process::id()));
        nn::save_safetensors(&batch, &path).expect("save");
        let again = Batch {
            images: Tensor::zeros_dtype([2, 3, 4], DType::U8, &dev),
            labels: Tensor::zeros_dtype([2], DType::I64, &dev),
        };
        nn::load_safetensors(&again, &path).expect("load");
        std::fs::remove_file(&path).ok();
        assert_eq!(again.images.to_vec::<u8>().expect("read"), images);
        assert_eq!(again.labels.to_vec::<i64>().expect("read"), labels);
    }
}

#[test]
fn in_place_and_negation_of_bytes_wrap_and_comparisons_see_true_values() {
    for dev in devices() {
        let t = Tensor::from_vec(vec![250u8, 5, 0], [3], &dev).expect("t");
        t.add_(10u8);
        assert_eq!(
            t.cast(DType::F32).to_vec::<f32>().expect("read"),
            [4.0, 15.0, 10.0]
        );
        t.sub_(11u8);
        assert_eq!(t.to_vec::<u8>().expect("read"), [249, 4, 255]);
        assert_eq!(t.sum_all().item::<i64>().expect("sum"), 249 + 4 + 255);
        let n = -&Tensor::from_vec(vec![1u8, 0, 200], [3], &dev).expect("n");
        assert_eq!(n.dtype(), DType::U8);
        assert_eq!(
            n.cast(DType::I32).to_vec::<i32>().expect("read"),
            [255, 0, 56]
        );
        let b = Tensor::from_vec(vec![0u8, 255], [2], &dev).expect("b");
        assert_eq!(b.gt(-1).to_vec::<bool>().expect("gt"), [true, true]);
        assert_eq!(b.eq(-1).to_vec::<bool>().expect("eq"), [false, false]);
        assert_eq!(b.eq(256).to_vec::<bool>().expect("eq"), [false, false]);
        assert_eq!(b.lt(300).to_vec::<bool>().expect("lt"), [true, true]);
        assert_eq!(b.eq(255).to_vec::<bool>().expect("eq"), [false, true]);
    }
}

#[test]
fn every_way_in_refuses_an_i64_outside_i32() {
    let dev = lazywgpu::Device::cpu();
    let refuses = |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();
    assert!(refuses(&|| {
        Tensor::full([1], 1i64 << 33, &dev);
    }));
    assert!(refuses(&|| {
        Tensor::scalar((1i64 << 32) + 7, &dev);
    }));
    assert!(refuses(&|| {
        Tensor::zeros_dtype([1], DType::I64, &dev).fill_(1i64 << 32);
    }));
    assert_eq!(
        Tensor::full([2], -(1i64 << 31), &dev)
            .to_vec::<i64>()
            .expect("read"),
        [-(1i64 << 31); 2]
    );
}
