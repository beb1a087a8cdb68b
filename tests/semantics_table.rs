//! Both backends follow the semantics table (`NanResult`, `identity`) op
//! by op: every unary op at NaN, every binary op with NaN on either side,
//! every reduction over elements with NaNs among them and over none. The
//! table itself is checked against PyTorch's outputs in `tests/golden.rs`.

mod common;

use common::gpu;
use lazywgpu::{BinaryOp, DType, Device, NanResult, ReduceOp, Tensor, UnaryOp};

fn devices() -> Vec<Device> {
    let mut devs = vec![Device::cpu()];
    devs.extend(gpu());
    devs
}

fn unary(x: &Tensor, op: UnaryOp) -> Tensor {
    match op {
        UnaryOp::Neg => x.neg(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.log(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => x.rsqrt(),
        UnaryOp::Recip => x.recip(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => x.sigmoid(),
        UnaryOp::Relu => x.relu(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        UnaryOp::Sign => x.sign(),
    }
}

fn binary(a: &Tensor, b: &Tensor, op: BinaryOp) -> Tensor {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.pow(b),
        BinaryOp::Maximum => a.maximum(b),
        BinaryOp::Minimum => a.minimum(b),
        BinaryOp::Eq => a.eq(b),
        BinaryOp::Ne => a.ne(b),
        BinaryOp::Lt => a.lt(b),
        BinaryOp::Le => a.le(b),
        BinaryOp::Gt => a.gt(b),
        BinaryOp::Ge => a.ge(b),
    }
}

fn reduce(x: &Tensor, op: ReduceOp) -> Tensor {
    match op {
        ReduceOp::Sum => x.sum([-1], false),
        ReduceOp::Prod => x.prod([-1], false),
        ReduceOp::Max => x.max([-1], false),
        ReduceOp::Min => x.min([-1], false),
        ReduceOp::ArgMax => x.argmax(-1, false),
        ReduceOp::ArgMin => x.argmin(-1, false),
    }
}

/// Whether element `i` of `t` is what `rule` says (`first_nan`: the index
/// of the first NaN among the reduced elements).
fn follows(t: &Tensor, i: usize, rule: NanResult, first_nan: usize) -> Result<(), String> {
    let got = match t.dtype() {
        DType::Bool => format!("{}", t.to_vec::<bool>().unwrap()[i]),
        DType::I32 => format!("{}", t.to_vec::<i32>().unwrap()[i]),
        _ => format!("{}", t.to_vec::<f32>().unwrap()[i]),
    };
    let ok = match rule {
        NanResult::Nan => got == "NaN",
        NanResult::Value(v) => got == format!("{v}"),
        NanResult::False => got == "false",
        NanResult::True => got == "true",
        NanResult::FirstNanIndex => got == format!("{first_nan}"),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("got {got}, the table says {rule:?}"))
    }
}

#[test]
fn every_unary_op_at_nan_follows_the_table() {
    for dev in devices() {
        // Every fourth element NaN, so vec4 kernels see it in each lane.
        let x = Tensor::from_vec(
            vec![f32::NAN, 0.5, -1.5, 2.0, 3.0, f32::NAN, 1.0, -0.25],
            [8],
            &dev,
        )
        .unwrap();
        for op in UnaryOp::ALL {
            let y = unary(&x, op);
            for i in [0, 5] {
                follows(&y, i, op.nan_result(), 0)
                    .unwrap_or_else(|e| panic!("{} at NaN on {dev:?}: {e}", op.name()));
            }
        }
    }
}

#[test]
fn every_binary_op_with_nan_on_either_side_follows_the_table() {
    for dev in devices() {
        let a = Tensor::from_vec(vec![f32::NAN, 2.0, f32::NAN, -3.0], [4], &dev).unwrap();
        let b = Tensor::from_vec(vec![2.0, f32::NAN, f32::NAN, 0.5], [4], &dev).unwrap();
        for op in BinaryOp::ALL {
            let y = binary(&a, &b, op);
            for i in 0..3 {
                follows(&y, i, op.nan_result(), 0).unwrap_or_else(|e| {
                    panic!("{} with NaN (element {i}) on {dev:?}: {e}", op.name())
                });
            }
        }
    }
}

#[test]
fn every_reduction_with_nans_follows_the_table() {
    for dev in devices() {
        // Rows: NaN second and fourth; NaN first; NaN last of a long row
        // (a workgroup-tree reduction).
        let mut long = vec![1.0f32; 4096];
        long[4095] = f32::NAN;
        for (row, first_nan) in [
            (vec![1.0f32, f32::NAN, 5.0, f32::NAN], 1),
            (vec![f32::NAN, 2.0, f32::NAN, 5.0], 0),
            (long, 4095),
        ] {
            let n = row.len();
            let x = Tensor::from_vec(row, [1, n], &dev).unwrap();
            for op in ReduceOp::ALL {
                follows(&reduce(&x, op), 0, op.nan_result(), first_nan)
                    .unwrap_or_else(|e| panic!("{} over {n} on {dev:?}: {e}", op.name()));
            }
        }
    }
}

#[test]
fn sums_and_products_of_nothing_are_the_identity() {
    for dev in devices() {
        let x = Tensor::from_vec(Vec::<f32>::new(), [3, 0], &dev).unwrap();
        for op in [ReduceOp::Sum, ReduceOp::Prod] {
            let got = reduce(&x, op).to_vec::<f32>().unwrap();
            assert_eq!(
                got,
                vec![op.identity() as f32; 3],
                "{} on {dev:?}",
                op.name()
            );
        }
    }
}
