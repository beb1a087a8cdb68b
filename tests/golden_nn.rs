//! Golden values from PyTorch for the normalisation layers, grouped
//! convolutions and losses (tests/golden/nn.json, written by
//! tools/golden_nn.py): outputs, BatchNorm's running statistics after
//! training steps, and the gradient of `(out * w).sum()` with respect to
//! every float input (layer weights and biases included), on the CPU
//! reference and on the GPU.

mod common;

use common::devices;
use lazywgpu::nn::functional::{self as F, CrossEntropyOptions, Reduction};
use lazywgpu::nn::{BatchNorm, BatchNormOptions, GroupNorm, Module};
use lazywgpu::{DType, Device, InterpolateMode, Tensor};
use serde_json::Value;

const GOLDEN: &str = include_str!("golden/nn.json");

fn f32_of(v: &Value) -> f32 {
    match v {
        Value::String(s) if s == "nan" => f32::NAN,
        Value::String(s) if s == "inf" => f32::INFINITY,
        Value::String(s) if s == "-inf" => f32::NEG_INFINITY,
        other => other.as_f64().expect("a number") as f32,
    }
}

fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(f32_of)
        .collect()
}

fn tensor(v: &Value, dev: &Device) -> Tensor {
    let shape = shape_of(v);
    let data = v["data"].as_array().expect("data");
    match v["dtype"].as_str().expect("dtype") {
        "f32" => Tensor::from_vec(floats(v), shape, dev),
        "i32" => Tensor::from_vec(
            data.iter()
                .map(|d| d.as_i64().expect("int") as i32)
                .collect::<Vec<_>>(),
            shape,
            dev,
        ),
        other => panic!("dtype {other}"),
    }
    .expect("golden input")
}

fn reduction(args: &Value) -> Reduction {
    match args["reduction"].as_str().unwrap_or("mean") {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        "batchmean" => Reduction::BatchMean,
        other => panic!("reduction {other}"),
    }
}

fn pair(v: &Value) -> (usize, usize) {
    (
        v[0].as_u64().expect("pair") as usize,
        v[1].as_u64().expect("pair") as usize,
    )
}

/// A BatchNorm built as the case says, its weight and bias the inputs
/// themselves (so their gradients are the inputs' gradients).
fn batch_norm(kind: &str, args: &Value, x: &[Tensor]) -> Vec<Tensor> {
    let dev = x[0].device();
    let c = x[0].shape()[1];
    let options = BatchNormOptions {
        eps: args["eps"].as_f64().expect("eps") as f32,
        momentum: args["momentum"].as_f64().map(|m| m as f32),
        affine: args["affine"].as_bool().expect("affine"),
        track_running_stats: args["track"].as_bool().expect("track"),
    };
    let mut bn = if kind == "batch_norm2d" {
        BatchNorm::new_2d_with(c, options, dev)
    } else {
        BatchNorm::with_options(c, options, dev)
    };
    let mut rest = &x[1..];
    if options.affine {
        bn.weight = Some(x[1].clone());
        bn.bias = Some(x[2].clone());
        rest = &x[3..];
    }
    if options.track_running_stats && args["running"].as_bool() == Some(true) {
        bn.running_mean
            .as_ref()
            .expect("running mean")
            .copy_(&rest[0]);
        bn.running_var
            .as_ref()
            .expect("running var")
            .copy_(&rest[1]);
        rest = &rest[2..];
    }
    bn.train();
    for earlier in rest {
        bn.forward(earlier);
    }
    bn.set_training(args["training"].as_bool().expect("training"));
    let mut outs = vec![bn.forward(&x[0])];
    if options.track_running_stats {
        outs.extend(bn.named_buffers().into_iter().map(|(_, t)| t));
    }
    outs
}

fn run(kind: &str, args: &Value, x: &[Tensor]) -> Vec<Tensor> {
    let one = |t: Tensor| vec![t];
    match kind {
        "batch_norm1d" | "batch_norm2d" => batch_norm(kind, args, x),
        "batch_norm_fn" => {
            // Copies: the function moves the running statistics in place.
            let (rm, rv) = (x[3].deep_clone(), x[4].deep_clone());
            let y = F::batch_norm(
                &x[0],
                Some(&rm),
                Some(&rv),
                Some(&x[1]),
                Some(&x[2]),
                args["training"].as_bool().expect("training"),
                args["momentum"].as_f64().expect("momentum") as f32,
                args["eps"].as_f64().expect("eps") as f32,
            );
            vec![y, rm, rv]
        }
        "group_norm" => {
            let affine = args["affine"].as_bool().expect("affine");
            let groups = args["groups"].as_u64().expect("groups") as usize;
            let eps = args["eps"].as_f64().expect("eps") as f32;
            let mut gn =
                GroupNorm::with_options(groups, x[0].shape()[1], eps, affine, x[0].device());
            if affine {
                gn.weight = Some(x[1].clone());
                gn.bias = Some(x[2].clone());
            }
            one(gn.forward(&x[0]))
        }
        "conv2d" => one(x[0].conv2d_groups(
            &x[1],
            x.get(2),
            pair(&args["stride"]),
            pair(&args["padding"]),
            pair(&args["dilation"]),
            args["groups"].as_u64().expect("groups") as usize,
        )),
        "conv_transpose2d" => one(x[0].conv_transpose2d(
            &x[1],
            x.get(2),
            pair(&args["stride"]),
            pair(&args["padding"]),
            pair(&args["output_padding"]),
            args["groups"].as_u64().expect("groups") as usize,
            pair(&args["dilation"]),
        )),
        "conv1d" => {
            let n = |k: &str| args[k].as_u64().expect("an integer") as usize;
            one(x[0].conv1d(
                &x[1],
                x.get(2),
                n("stride"),
                n("padding"),
                n("dilation"),
                n("groups"),
            ))
        }
        "interpolate" => {
            let mode = match args["mode"].as_str().expect("mode") {
                "nearest" => InterpolateMode::Nearest,
                _ => InterpolateMode::Bilinear,
            };
            let size = (!args["size"].is_null()).then(|| pair(&args["size"]));
            let scale = (!args["scale"].is_null()).then(|| {
                let s = &args["scale"];
                (s[0].as_f64().expect("scale"), s[1].as_f64().expect("scale"))
            });
            let align = args["align_corners"].as_bool().expect("align_corners");
            one(x[0].interpolate(size, scale, mode, align))
        }
        "adaptive_avg_pool2d" => one(x[0].adaptive_avg_pool2d(pair(&args["output"]))),
        "cross_entropy" => {
            let options = CrossEntropyOptions {
                weight: x.get(2),
                ignore_index: args["ignore_index"].as_i64().expect("ignore_index"),
                label_smoothing: args["smoothing"].as_f64().expect("smoothing") as f32,
                reduction: reduction(args),
            };
            one(F::cross_entropy_with(&x[0], &x[1], &options))
        }
        "bce_logits" => {
            let weight = (args["weight"].as_bool() == Some(true)).then(|| &x[2]);
            let pos = (args["pos_weight"].as_bool() == Some(true)).then(|| &x[x.len() - 1]);
            one(F::binary_cross_entropy_with_logits_with(
                &x[0],
                &x[1],
                weight,
                pos,
                reduction(args),
            ))
        }
        "l1" => one(F::l1_loss(&x[0], &x[1])),
        "smooth_l1" => one(F::smooth_l1_loss(
            &x[0],
            &x[1],
            args["beta"].as_f64().expect("beta") as f32,
        )),
        "kl_div" => one(F::kl_div(
            &x[0],
            &x[1],
            reduction(args),
            args["log_target"].as_bool().expect("log_target"),
        )),
        other => panic!("golden kind {other} has no mapping"),
    }
}

/// NaN-aware closeness: NaN matches NaN, infinities match exactly,
/// finite values within `atol + rtol * |expected|`.
fn compare(what: &str, got: &Tensor, want: &Value) -> Result<(), String> {
    if got.shape() != shape_of(want).as_slice() {
        return Err(format!(
            "{what}: shape {:?}, PyTorch {:?}",
            got.shape(),
            shape_of(want)
        ));
    }
    let got = got
        .cast(DType::F32)
        .to_vec::<f32>()
        .map_err(|e| e.to_string())?;
    let want = floats(want);
    let bad: Vec<String> = got
        .iter()
        .zip(&want)
        .enumerate()
        .filter(|&(_, (&g, &w))| {
            let same_special = (g.is_nan() && w.is_nan()) || (w.is_infinite() && g == w);
            let close = (g - w).abs() <= 2e-5 + 2e-4 * w.abs();
            !same_special && !close
        })
        .take(4)
        .map(|(i, (g, w))| format!("[{i}] {g} vs {w}"))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{what}: {}", bad.join(", ")))
    }
}

fn check_case(case: &Value, dev: &Device) -> Result<(), String> {
    let kind = case["kind"].as_str().expect("kind");
    let grads = case["grads"].as_array();
    let x: Vec<Tensor> = case["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let t = tensor(v, dev);
            if grads.is_some_and(|g| !g[i].is_null()) {
                t.requires_grad_(true);
            }
            t
        })
        .collect();
    let outs = run(kind, &case["args"], &x);
    let want = case["outputs"].as_array().expect("outputs");
    if outs.len() != want.len() {
        return Err(format!("{} outputs, PyTorch {}", outs.len(), want.len()));
    }
    for (i, (o, w)) in outs.iter().zip(want).enumerate() {
        compare(&format!("output {i}"), o, w)?;
    }
    if let Some(grads) = grads {
        let gw = tensor(&case["grad_weight"], dev);
        (&outs[0] * &gw).sum_all().backward();
        for (i, want) in grads.iter().enumerate() {
            if want.is_null() {
                continue;
            }
            let g = x[i]
                .grad()
                .ok_or_else(|| format!("input {i} has no gradient"))?;
            compare(&format!("gradient of input {i}"), &g, want)?;
        }
    }
    Ok(())
}

#[test]
fn layers_and_losses_match_pytorch() {
    let golden: Value = serde_json::from_str(GOLDEN).expect("golden JSON");
    let cases = golden["cases"].as_array().expect("cases");
    assert!(cases.len() >= 40, "the golden file lists every case");
    let mut failures = Vec::new();
    for dev in devices() {
        for case in cases {
            let name = case["name"].as_str().expect("name");
            if let Err(e) = check_case(case, &dev) {
                failures.push(format!("{name} on {dev:?}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} checks differ from PyTorch {}:\n{}",
        failures.len(),
        golden["torch"],
        failures.join("\n")
    );
}
