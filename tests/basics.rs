//! Constructors, readback, views and the error contract, on both backends,
//! checked against values computed independently in the test.

// Shapes are written `&[2, 3]`, as users write them.
#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, devices, gpu};
use lazywgpu::{DType, Device, Error, Tensor};

#[test]
fn from_vec_round_trips_every_dtype() {
    for dev in devices() {
        let f = Tensor::from_vec(vec![1.5f32, -2.0, 3.25], &[3], &dev).unwrap();
        assert_eq!(f.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 3.25]);
        let i = Tensor::from_vec(vec![-7i32, 0, 9, 11], &[2, 2], &dev).unwrap();
        assert_eq!(i.to_vec::<i32>().unwrap(), vec![-7, 0, 9, 11]);
        let u = Tensor::from_vec(vec![u32::MAX, 3], vec![2usize], &dev).unwrap();
        assert_eq!(u.to_vec::<u32>().unwrap(), vec![u32::MAX, 3]);
        let b = Tensor::from_vec(vec![true, false, true], &[3], &dev).unwrap();
        assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, false, true]);
        assert_eq!(b.dtype(), DType::Bool);
    }
}

#[test]
fn from_vec_with_wrong_length_is_an_error() {
    for dev in devices() {
        let err = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[2, 2], &dev).expect_err("must fail");
        match &err {
            Error::DataLength { expected, got, .. } => assert_eq!((*expected, *got), (4, 3)),
            other => panic!("wrong error: {other}"),
        }
        assert!(err.to_string().contains("[2, 2]"), "{err}");
    }
}

#[test]
fn reading_with_the_wrong_type_is_an_error() {
    for dev in devices() {
        let t = Tensor::ones(&[2], &dev);
        assert!(matches!(
            t.to_vec::<i32>(),
            Err(Error::DTypeMismatch { .. })
        ));
        assert!(matches!(t.item::<f32>(), Err(Error::NotScalar(_))));
    }
}

#[test]
fn constants_and_ranges() {
    for dev in devices() {
        assert_eq!(
            Tensor::zeros(&[2, 2], &dev).to_vec::<f32>().unwrap(),
            vec![0.0; 4]
        );
        assert_eq!(
            Tensor::ones(&[3], &dev).to_vec::<f32>().unwrap(),
            vec![1.0; 3]
        );
        assert_eq!(
            Tensor::full(&[2], 7i32, &dev).to_vec::<i32>().unwrap(),
            vec![7, 7]
        );
        assert_eq!(
            Tensor::arange(0, 5, 1, &dev).to_vec::<i32>().unwrap(),
            vec![0, 1, 2, 3, 4]
        );
        assert_eq!(
            Tensor::arange(10, 0, -3, &dev).to_vec::<i32>().unwrap(),
            vec![10, 7, 4, 1]
        );
        let f = Tensor::arange(0.0f32, 1.0, 0.25, &dev)
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(f, vec![0.0, 0.25, 0.5, 0.75]);
        assert_eq!(Tensor::scalar(2.5f32, &dev).item::<f32>().unwrap(), 2.5);
        assert_eq!(
            Tensor::zeros(&[0, 3], &dev).to_vec::<f32>().unwrap(),
            Vec::<f32>::new()
        );
    }
}

#[test]
fn rand_is_seeded_and_identical_across_backends() {
    let cpu = Device::cpu();
    cpu.manual_seed(42);
    let a = Tensor::rand(&[1000], &cpu).to_vec::<f32>().unwrap();
    cpu.manual_seed(42);
    let again = Tensor::rand(&[1000], &cpu).to_vec::<f32>().unwrap();
    assert_eq!(a, again, "same seed, same numbers");
    let next = Tensor::rand(&[1000], &cpu).to_vec::<f32>().unwrap();
    assert_ne!(a, next, "the counter advances");
    assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
    let mean: f64 = a.iter().map(|&x| x as f64).sum::<f64>() / 1000.0;
    assert!((mean - 0.5).abs() < 0.05, "uniform mean {mean}");

    cpu.manual_seed(7);
    let n = Tensor::randn(&[20000], &cpu).to_vec::<f32>().unwrap();
    let m: f64 = n.iter().map(|&x| x as f64).sum::<f64>() / n.len() as f64;
    let var: f64 = n.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n.len() as f64;
    assert!(
        m.abs() < 0.03 && (var - 1.0).abs() < 0.05,
        "normal mean {m} var {var}"
    );

    if let Some(dev) = gpu() {
        dev.manual_seed(42);
        let g = Tensor::rand(&[1000], &dev).to_vec::<f32>().unwrap();
        assert_eq!(g, a, "GPU and CPU generate the same uniform bits");
        dev.manual_seed(7);
        let gn = Tensor::randn(&[20000], &dev).to_vec::<f32>().unwrap();
        assert_close(&gn, &n, 1e-4, 1e-4, "randn GPU vs CPU");
    }
}

#[test]
fn views_share_data_and_read_through_strides() {
    for dev in devices() {
        let data: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let x = Tensor::from_vec(data.clone(), &[2, 3, 4], &dev).unwrap();
        // permute(2, 0, 1): out[k][i][j] = x[i][j][k]
        let p = x.permute([2, 0, 1]);
        assert_eq!(p.shape(), &[4, 2, 3]);
        let mut expected = Vec::new();
        for k in 0..4 {
            for i in 0..2 {
                for j in 0..3 {
                    expected.push(data[i * 12 + j * 4 + k]);
                }
            }
        }
        assert_eq!(p.to_vec::<f32>().unwrap(), expected);
        // A view of stored data is stored data: no kernel, no pending node.
        let v = x.transpose(0, 2).unsqueeze(1);
        assert!(!v.is_pending());
        // Merging transposed dims is not a view; it is computed when read.
        let merged = x.transpose(0, 2).reshape([4, -1]);
        assert_eq!(merged.shape(), &[4, 6]);
        assert!(merged.is_pending());
        let e = x.unsqueeze(0).expand([3, 2, 3, 4]).squeeze(0);
        assert_eq!(e.shape(), &[3, 2, 3, 4]);
        let ev = e.to_vec::<f32>().unwrap();
        assert_eq!(&ev[..24], &data[..]);
        assert_eq!(&ev[48..], &data[..]);
        let flat = x.reshape([-1]).to_vec::<f32>().unwrap();
        assert_eq!(flat, data);
        let t = x.reshape([6, 4]).t();
        assert_eq!(t.shape(), &[4, 6]);
        let v = t.to_vec::<f32>().unwrap();
        for r in 0..4 {
            for c in 0..6 {
                assert_eq!(v[r * 6 + c], (c * 4 + r) as f32);
            }
        }
    }
}

#[test]
fn shape_mismatch_panics_with_shapes_op_and_caller_line() {
    let dev = Device::cpu();
    let a = Tensor::zeros(&[2, 3], &dev);
    let b = Tensor::zeros(&[4], &dev);
    let line = line!() + 1;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.add(&b)));
    let payload = result.expect_err("add of [2, 3] and [4] must panic");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("add"), "{msg}");
    assert!(msg.contains("[2, 3]") && msg.contains("[4]"), "{msg}");
    assert!(
        msg.contains(&format!("{}:{line}", file!())),
        "{msg} should name {}:{line}",
        file!()
    );
}

#[test]
fn operator_overloads_and_scalars() {
    for dev in devices() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 4.0], &[3], &dev).unwrap();
        let y = Tensor::from_vec(vec![2.0f32, 2.0, 2.0], &[3], &dev).unwrap();
        let r = (&x + &y) * 2.0 - &x / &y + 1.0;
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![6.5, 8.0, 11.0]);
        let s = 10.0 - &x;
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![9.0, 8.0, 6.0]);
        let n = -x.clone();
        assert_eq!(n.to_vec::<f32>().unwrap(), vec![-1.0, -2.0, -4.0]);
        // int tensor with float scalar promotes to f32, as in PyTorch
        let i = Tensor::from_vec(vec![1i32, 2, 3], &[3], &dev).unwrap();
        let h = &i * 0.5;
        assert_eq!(h.dtype(), DType::F32);
        assert_eq!(h.to_vec::<f32>().unwrap(), vec![0.5, 1.0, 1.5]);
        let k = i.add(2);
        assert_eq!(k.dtype(), DType::I32);
        assert_eq!(k.to_vec::<i32>().unwrap(), vec![3, 4, 5]);
        assert_eq!(i.div(2).to_vec::<f32>().unwrap(), vec![0.5, 1.0, 1.5]);
    }
}

#[test]
fn display_shows_values() {
    for dev in devices() {
        let x = Tensor::from_vec(vec![1.0f32, 2.5, -3.0, 4.0], &[2, 2], &dev).unwrap();
        let s = format!("{x}");
        assert!(s.contains("2.5000") && s.contains("-3.0000"), "{s}");
        assert!(s.contains("shape=[2, 2]") && s.contains("f32"), "{s}");
    }
}
