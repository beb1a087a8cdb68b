//! The pieces of a Llama-style decoder against f64 loops written here:
//! `rms_norm` (forward, both gradients, f16/bf16 input, the default eps),
//! on both backends.

mod common;

use common::{assert_close, data, devices};
use lazywgpu::nn::functional::rms_norm;
use lazywgpu::nn::{Module, RMSNorm};
use lazywgpu::{DType, Tensor};

/// `x / sqrt(mean(x^2) + eps) * w` per row, and the gradients of
/// `sum(y * c)` with respect to x and w, in f64.
fn rms_oracle(
    x: &[f32],
    w: &[f32],
    c: &[f32],
    len: usize,
    eps: f64,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut y = vec![0.0f32; x.len()];
    let mut gx = vec![0.0f32; x.len()];
    let mut gw = vec![0.0f64; len];
    for (r, row) in x.chunks(len).enumerate() {
        let n = len as f64;
        let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / n;
        let rs = 1.0 / (ms + eps).sqrt();
        let g: Vec<f64> = (0..len)
            .map(|k| f64::from(c[r * len + k]) * f64::from(w[k]))
            .collect();
        let dot: f64 = (0..len).map(|k| g[k] * f64::from(row[k])).sum();
        for k in 0..len {
            let xk = f64::from(row[k]);
            y[r * len + k] = (xk * rs * f64::from(w[k])) as f32;
            gx[r * len + k] = (rs * g[k] - xk * rs.powi(3) / n * dot) as f32;
            gw[k] += f64::from(c[r * len + k]) * xk * rs;
        }
    }
    (y, gx, gw.into_iter().map(|v| v as f32).collect())
}

#[test]
fn rms_norm_and_its_gradients_match_an_f64_loop() {
    for &(rows, len) in &[(1usize, 1usize), (7, 33), (3, 512), (2, 3000)] {
        let x = data(rows * len, 3);
        let w: Vec<f32> = data(len, 5).iter().map(|v| v + 1.5).collect();
        let c = data(rows * len, 9);
        let (y_want, gx_want, gw_want) = rms_oracle(&x, &w, &c, len, 1e-6);
        for dev in devices() {
            let xt = Tensor::from_vec(x.clone(), [rows, len], &dev).unwrap();
            xt.requires_grad_(true);
            let wt = Tensor::from_vec(w.clone(), [len], &dev).unwrap();
            wt.requires_grad_(true);
            let ct = Tensor::from_vec(c.clone(), [rows, len], &dev).unwrap();
            let y = rms_norm(&xt, &[len], Some(&wt), Some(1e-6));
            let what = format!("{rows}x{len} on {}", dev.name());
            assert_close(&y.to_vec::<f32>().unwrap(), &y_want, 1e-5, 1e-5, &what);
            (&y * &ct).sum_all().backward();
            let gx = xt.grad().unwrap().to_vec::<f32>().unwrap();
            assert_close(&gx, &gx_want, 1e-4, 1e-4, &format!("grad x {what}"));
            let gw = wt.grad().unwrap().to_vec::<f32>().unwrap();
            assert_close(&gw, &gw_want, 1e-4, 1e-4, &format!("grad w {what}"));
        }
    }
}

/// Normalised over two trailing dims, the module's default eps (f32's
/// machine epsilon, as PyTorch's `eps=None`), its one parameter named
/// `weight`.
#[test]
fn rms_norm_module_over_two_dims_with_the_default_eps() {
    let (rows, a, b) = (4usize, 3usize, 5usize);
    let x: Vec<f32> = data(rows * a * b, 11);
    let ones = vec![1.0f32; a * b];
    let zeros = vec![0.0f32; rows * a * b];
    let (want, _, _) = rms_oracle(&x, &ones, &zeros, a * b, f64::from(f32::EPSILON));
    for dev in devices() {
        let m = RMSNorm::new(&[a, b], &dev);
        let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["weight"]);
        let xt = Tensor::from_vec(x.clone(), [rows, a, b], &dev).unwrap();
        let got = m.forward(&xt).to_vec::<f32>().unwrap();
        assert_close(&got, &want, 1e-5, 1e-6, &dev.name());
        // A row of zeros stays zeros (eps keeps the scale finite).
        let z = Tensor::zeros([2, a, b], &dev);
        let got = m.forward(&z).to_vec::<f32>().unwrap();
        assert!(got.iter().all(|&v| v == 0.0), "{got:?}");
    }
}

/// f16 and bf16 input: computed in f32, rounded once to the input's
/// dtype, the default eps that dtype's epsilon; the gradient flows back
/// in that dtype.
#[test]
fn rms_norm_takes_half_precision_input() {
    let (rows, len) = (5usize, 48usize);
    let x: Vec<f32> = data(rows * len, 4).iter().map(|v| v * 3.0).collect();
    for dev in devices() {
        for (dtype, eps, tol) in [
            (DType::F16, 9.765625e-4f64, 5e-3f64),
            (DType::BF16, 7.8125e-3, 4e-2),
        ] {
            let xt = Tensor::from_vec(x.clone(), [rows, len], &dev)
                .unwrap()
                .cast(dtype)
                .detach();
            xt.requires_grad_(true);
            // The oracle sees the input after its rounding to `dtype`.
            let rounded = xt.cast(DType::F32).to_vec::<f32>().unwrap();
            let ones = vec![1.0f32; len];
            let zeros = vec![0.0f32; rows * len];
            let (want, _, _) = rms_oracle(&rounded, &ones, &zeros, len, eps);
            let y = rms_norm(&xt, &[len], None, None);
            assert_eq!(y.dtype(), dtype);
            let got = y.cast(DType::F32).to_vec::<f32>().unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (g, w) = (f64::from(*g), f64::from(*w));
                assert!(
                    (g - w).abs() <= tol * (1.0 + w.abs()),
                    "{} {dtype}: [{i}] {g} where {w}",
                    dev.name()
                );
            }
            y.cast(DType::F32).sum_all().backward();
            assert_eq!(xt.grad().expect("a gradient").dtype(), dtype);
        }
    }
}
