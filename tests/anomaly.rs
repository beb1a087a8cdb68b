//! Anomaly mode (`Device::set_checks`, `LAZYWGPU_CHECK=1`): the first op
//! that makes NaN or infinity from finite values, or reads an index out of
//! range, becomes an error naming the op and the line that recorded it, on
//! both backends. Without the mode the same programs run unchecked.

mod common;

use lazywgpu::{Device, Error, Tensor};

/// The 1-based line of this file whose text (trimmed) is `text`.
fn line_of(text: &str) -> String {
    let source = include_str!("anomaly.rs");
    let line = source
        .lines()
        .position(|l| l.trim() == text)
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no line {text:?}"));
    format!("tests/anomaly.rs:{line}:")
}

/// A fused chain of ten ops with a `log` of a negative value in the
/// middle (element 2: (-3 * 2 + 1) = -5).
fn chain(dev: &Device) -> Tensor {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, -3.0, 4.0], [4], dev).unwrap();
    let a = &x * 2.0;
    let b = &a + 1.0;
    let c = b.tanh();
    let d = &c * 3.0;
    let e = d.log();
    let f = &e + 0.5;
    let g = f.exp();
    let h = &g * &x;
    let i = h.abs();
    &i - 1.0
}

#[test]
fn the_log_of_a_negative_value_in_a_fused_chain_is_named_with_its_line() {
    for dev in common::devices() {
        dev.set_checks(true);
        let err = chain(&dev)
            .to_vec::<f32>()
            .expect_err("anomaly mode catches the log");
        let Error::NonFinite { op, location, .. } = &err else {
            panic!("{}: wanted NonFinite, got {err}", dev.name());
        };
        assert_eq!(*op, "log", "{}: {err}", dev.name());
        assert!(
            location.starts_with(&line_of("let e = d.log();")),
            "{}: {err}",
            dev.name()
        );
        // Without the mode the NaN flows through silently, as in PyTorch.
        dev.set_checks(false);
        let values = chain(&dev).to_vec::<f32>().unwrap();
        assert!(values[2].is_nan() && values[0].is_finite(), "{values:?}");
    }
}

#[test]
fn an_out_of_range_index_select_is_named_with_its_line() {
    for dev in common::devices() {
        dev.set_checks(true);
        let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev).unwrap();
        for bad in [7i32, -1] {
            // Computed on the device: indices known on the host are
            // checked when the op is recorded (a panic at that line).
            let index = &Tensor::from_vec(vec![-1i32, bad - 1], [2], &dev).unwrap() + 1;
            let picked = t.index_select(0, &index);
            let err = (&picked * 2.0)
                .to_vec::<f32>()
                .expect_err("anomaly mode catches the index");
            let Error::IndexOutOfRange { op, location, .. } = &err else {
                panic!("{}: wanted IndexOutOfRange, got {err}", dev.name());
            };
            assert!(
                location.starts_with(&line_of("let picked = t.index_select(0, &index);")),
                "{}: {err}",
                dev.name()
            );
            // The op the user called, not the gather it records.
            assert_eq!(*op, "index_select", "{}: {err}", dev.name());
        }
        // In range: no error.
        let index = Tensor::from_vec(vec![2i32, 0], [2], &dev).unwrap();
        assert_eq!(
            t.index_select(0, &index).to_vec::<f32>().unwrap(),
            [3.0, 1.0]
        );
    }
}

/// A NaN made inside a composite op (`layer_norm` over rows of zeros
/// with eps 0: 0 * inf, in the normalisation it records) is named by the
/// op the user called; were the forward values finite, its gradient's
/// nodes would carry the same name.
#[test]
fn a_nan_inside_a_composite_op_is_named_by_it() {
    for dev in common::devices() {
        dev.set_checks(true);
        let x = Tensor::from_vec(vec![0.0f32; 8], [2, 4], &dev).unwrap();
        x.requires_grad_(true);
        let y = lazywgpu::nn::functional::layer_norm(&x, &[4], None, None, 0.0);
        let loss = y.sum_all();
        let err = match loss.to_vec::<f32>() {
            Err(e) => e,
            Ok(_) => {
                loss.backward();
                x.grad()
                    .expect("a gradient")
                    .to_vec::<f32>()
                    .expect_err("anomaly mode catches the NaN")
            }
        };
        let Error::NonFinite { op, .. } = &err else {
            panic!("{}: wanted NonFinite, got {err}", dev.name());
        };
        assert_eq!(*op, "layer_norm", "{}: {err}", dev.name());
    }
}

#[test]
fn values_that_only_carry_nan_or_infinity_along_are_not_blamed() {
    for dev in common::devices() {
        dev.set_checks(true);
        // NaN and -inf in the data: every op below only propagates them.
        let x = Tensor::from_vec(vec![f32::NAN, 1.0, f32::NEG_INFINITY, 2.0], [4], &dev).unwrap();
        let y = ((&x * 2.0) + 1.0).exp().to_vec::<f32>().unwrap();
        assert!(y[0].is_nan() && y[2] == 0.0, "{}: {y:?}", dev.name());
        // A causal mask's -inf through a softmax: finite results.
        let scores = Tensor::from_vec(vec![0.5f32, 0.1, 0.2, 0.3], [2, 2], &dev).unwrap();
        let mask = Tensor::from_vec(vec![false, true, false, false], [2, 2], &dev).unwrap();
        let p = scores.masked_fill(&mask, f32::NEG_INFINITY).softmax(-1);
        let p = p.to_vec::<f32>().unwrap();
        assert_eq!(p[0], 1.0, "{}: {p:?}", dev.name());
        assert!(p.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn a_nan_made_by_a_reduction_of_infinities_is_named() {
    for dev in common::devices() {
        dev.set_checks(true);
        let x = Tensor::from_vec(vec![f32::INFINITY, f32::NEG_INFINITY], [2], &dev).unwrap();
        let err = x.sum_all().to_vec::<f32>().expect_err("inf - inf");
        let Error::NonFinite { op, location, .. } = &err else {
            panic!("{}: wanted NonFinite, got {err}", dev.name());
        };
        assert_eq!(*op, "sum", "{err}");
        assert!(
            location.starts_with(&line_of(
                "let err = x.sum_all().to_vec::<f32>().expect_err(\"inf - inf\");"
            )),
            "{err}"
        );
    }
}

#[test]
fn anomaly_mode_is_a_device_config_field() {
    let config = lazywgpu::DeviceConfig {
        checks: true,
        ..lazywgpu::DeviceConfig::default()
    };
    let dev = Device::cpu_with(config);
    assert!(dev.checks());
    assert!(chain(&dev).to_vec::<f32>().is_err());
}

#[test]
fn a_step_that_fails_its_checks_leaves_the_values_it_read_as_they_were() {
    for dev in common::devices() {
        let w = Tensor::from_vec(vec![4.0f32, 5.0, 1.0, 6.0], [4], &dev).unwrap();
        dev.mark_step().unwrap();
        // An in-place update whose value is NaN at element 2 (log of -2).
        let v = (&w - 3.0).log();
        w.add_(&v);
        dev.set_checks(true);
        let err = dev.mark_step().expect_err("the log makes NaN");
        assert!(matches!(err, Error::NonFinite { op: "log", .. }), "{err}");
        // The update is still pending, computed from w as it was.
        dev.set_checks(false);
        let got = w.to_vec::<f32>().unwrap();
        let want = [4.0f32, 5.0 + 2f32.ln(), f32::NAN, 6.0 + 3f32.ln()];
        for (g, e) in got.iter().zip(want) {
            assert!(
                (g.is_nan() && e.is_nan()) || (g - e).abs() < 1e-5,
                "{}: {got:?} vs {want:?}",
                dev.name()
            );
        }
    }
}
