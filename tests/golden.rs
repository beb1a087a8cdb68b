//! Golden values from PyTorch (tests/golden/ops.json, written by
//! tools/golden.py): every op on both backends against PyTorch's outputs,
//! which catches semantics the CPU reference could get wrong the same way
//! as the GPU. Tolerances: f32 rtol 2e-4 / atol 1e-5 (transcendentals and
//! summation order differ from PyTorch's CPU kernels); integers and bools
//! exact.

mod common;

use common::{assert_close, gpu};
use lazywgpu::{DType, Device, Tensor};
use serde_json::Value;

const GOLDEN: &str = include_str!("golden/ops.json");

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

fn tensor(v: &Value, dev: &Device) -> Tensor {
    let shape = shape_of(v);
    let data = v["data"].as_array().expect("data");
    match v["dtype"].as_str().expect("dtype") {
        "f32" => Tensor::from_vec(data.iter().map(f32_of).collect::<Vec<_>>(), shape, dev),
        "i32" => Tensor::from_vec(
            data.iter()
                .map(|d| d.as_i64().expect("int") as i32)
                .collect::<Vec<_>>(),
            shape,
            dev,
        ),
        "bool" => Tensor::from_vec(
            data.iter()
                .map(|d| d.as_i64() == Some(1))
                .collect::<Vec<_>>(),
            shape,
            dev,
        ),
        other => panic!("dtype {other}"),
    }
    .expect("golden input")
}

fn axes(args: &Value) -> Vec<isize> {
    args["axes"]
        .as_array()
        .expect("axes")
        .iter()
        .map(|a| a.as_i64().expect("axis") as isize)
        .collect()
}

fn pair(v: &Value) -> (usize, usize) {
    (
        v[0].as_u64().expect("pair") as usize,
        v[1].as_u64().expect("pair") as usize,
    )
}

fn run(op: &str, args: &Value, x: &[Tensor]) -> Tensor {
    let keep = args["keepdim"].as_bool().unwrap_or(false);
    let int = |k: &str| args[k].as_i64().expect(k);
    match op {
        "neg" => x[0].neg(),
        "abs" => x[0].abs(),
        "exp" => x[0].exp(),
        "sin" => x[0].sin(),
        "cos" => x[0].cos(),
        "tanh" => x[0].tanh(),
        "sigmoid" => x[0].sigmoid(),
        "relu" => x[0].relu(),
        "floor" => x[0].floor(),
        "ceil" => x[0].ceil(),
        "sign" => x[0].sign(),
        "log" => x[0].log(),
        "sqrt" => x[0].sqrt(),
        "rsqrt" => x[0].rsqrt(),
        "reciprocal" => x[0].recip(),
        "round" => x[0].round(),
        "add" => &x[0] + &x[1],
        "sub" => &x[0] - &x[1],
        "mul" => &x[0] * &x[1],
        "div" => &x[0] / &x[1],
        "maximum" => x[0].maximum(&x[1]),
        "minimum" => x[0].minimum(&x[1]),
        "pow" => x[0].pow(&x[1]),
        "eq" => x[0].eq(&x[1]),
        "ne" => x[0].ne(&x[1]),
        "lt" => x[0].lt(&x[1]),
        "le" => x[0].le(&x[1]),
        "gt" => x[0].gt(&x[1]),
        "ge" => x[0].ge(&x[1]),
        "where" => x[0].where_cond(&x[1], &x[2]),
        "cast_i32" => x[0].cast(DType::I32),
        "sum" => x[0].sum(axes(args), keep),
        "mean" => x[0].mean(axes(args), keep),
        "logsumexp" => x[0].logsumexp(axes(args), keep),
        "var" => x[0].var(axes(args), int("correction") as usize, keep),
        "std" => x[0].std(axes(args), int("correction") as usize, keep),
        "max" => x[0].max(axes(args), keep),
        "min" => x[0].min(axes(args), keep),
        "prod" => x[0].prod(axes(args), keep),
        "argmax" => x[0].argmax(int("axis") as isize, keep),
        "argmin" => x[0].argmin(int("axis") as isize, keep),
        "softmax" => x[0].softmax(int("axis") as isize),
        "log_softmax" => x[0].log_softmax(int("axis") as isize),
        "matmul" => x[0].matmul(&x[1]),
        "matmul_t" => x[0].t().matmul(&x[1]),
        "permute_reshape" => x[0].permute([2, 0, 1]).reshape([10, 12]),
        "slice" => x[0].slice(
            int("dim") as isize,
            int("start") as usize,
            int("end") as usize,
            int("step") as usize,
        ),
        "diagonal" => x[0].diagonal(
            int("offset") as isize,
            int("dim1") as isize,
            int("dim2") as isize,
        ),
        "select" => x[0].select(int("dim") as isize, int("index") as usize),
        "pad" => {
            let pads: Vec<(usize, usize)> = args["pads"]
                .as_array()
                .expect("pads")
                .iter()
                .map(|p| {
                    (
                        p[0].as_u64().expect("pad") as usize,
                        p[1].as_u64().expect("pad") as usize,
                    )
                })
                .collect();
            x[0].pad(&pads, args["value"].as_f64().expect("value") as f32)
        }
        "cat" => Tensor::cat(&x.iter().collect::<Vec<_>>(), int("axis") as isize),
        "stack" => Tensor::stack(&x.iter().collect::<Vec<_>>(), int("axis") as isize),
        "flip" => x[0].flip(
            args["dims"]
                .as_array()
                .expect("dims")
                .iter()
                .map(|d| d.as_i64().expect("dim") as isize)
                .collect::<Vec<_>>(),
        ),
        "gather" => x[0].gather(int("axis") as isize, &x[1]),
        "index_select" => x[0].index_select(int("axis") as isize, &x[1]),
        "scatter_add" => x[0].scatter_add(int("axis") as isize, &x[1], &x[2]),
        "index_add" => x[0].index_add(int("axis") as isize, &x[1], &x[2]),
        "one_hot" => x[0].one_hot(int("num_classes") as usize),
        "masked_fill" => x[0].masked_fill(&x[1], args["value"].as_f64().expect("value") as f32),
        "conv2d" => x[0].conv2d(
            &x[1],
            Some(&x[2]),
            pair(&args["stride"]),
            pair(&args["padding"]),
            pair(&args["dilation"]),
        ),
        "max_pool2d" => x[0].max_pool2d(
            pair(&args["kernel"]),
            pair(&args["stride"]),
            pair(&args["padding"]),
        ),
        "avg_pool2d" => x[0].avg_pool2d(
            pair(&args["kernel"]),
            pair(&args["stride"]),
            pair(&args["padding"]),
        ),
        other => panic!("golden op {other} has no mapping"),
    }
}

#[test]
fn every_op_matches_pytorch() {
    let golden: Value = serde_json::from_str(GOLDEN).expect("golden JSON");
    let cases = golden["cases"].as_array().expect("cases");
    assert!(cases.len() >= 80, "the golden file lists every op");
    let mut devs = vec![Device::cpu()];
    devs.extend(gpu());
    for dev in devs {
        for case in cases {
            let name = case["name"].as_str().expect("name");
            let inputs: Vec<Tensor> = case["inputs"]
                .as_array()
                .expect("inputs")
                .iter()
                .map(|v| tensor(v, &dev))
                .collect();
            let out = run(case["op"].as_str().expect("op"), &case["args"], &inputs);
            let expected = &case["expected"];
            assert_eq!(out.shape(), &shape_of(expected)[..], "{name}: shape");
            let what = format!("{name} on {dev:?} vs PyTorch {}", golden["torch"]);
            match expected["dtype"].as_str().expect("dtype") {
                "f32" => {
                    let want: Vec<f32> = expected["data"]
                        .as_array()
                        .expect("data")
                        .iter()
                        .map(f32_of)
                        .collect();
                    assert_close(
                        &out.to_vec::<f32>().expect("read"),
                        &want,
                        2e-4,
                        1e-5,
                        &what,
                    );
                }
                "i32" => {
                    let want: Vec<i32> = expected["data"]
                        .as_array()
                        .expect("data")
                        .iter()
                        .map(|d| d.as_i64().expect("int") as i32)
                        .collect();
                    assert_eq!(out.to_vec::<i32>().expect("read"), want, "{what}");
                }
                "bool" => {
                    let want: Vec<bool> = expected["data"]
                        .as_array()
                        .expect("data")
                        .iter()
                        .map(|d| d.as_i64() == Some(1))
                        .collect();
                    assert_eq!(out.to_vec::<bool>().expect("read"), want, "{what}");
                }
                other => panic!("dtype {other}"),
            }
        }
    }
}
