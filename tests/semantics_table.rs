//! Both backends follow the semantics table (`NanResult`, `identity`) op
//! by op: every unary op at NaN, every binary op with NaN on either side,
//! every reduction over elements with NaNs among them and over none. The
//! table itself is checked against PyTorch's outputs in `tests/golden.rs`.

mod common;

use common::devices;
use lazywgpu::{BinaryOp, DType, NanResult, ReduceOp, Tensor, UnaryOp};

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
        UnaryOp::Erf => x.erf(),
        UnaryOp::Gelu => x.gelu(),
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

/// Softmax rows holding a NaN, a +inf, or only -inf are NaN throughout
/// (PyTorch), and a row beside them with a single -inf is unaffected, for
/// every softmax strategy: rows read as vec4s (length 8), one element at
/// a time (lengths 7 and 1: a one-element row of NaN once gave 1), and one
/// workgroup per row (length 2048, few rows).
#[test]
fn softmax_rows_with_nan_or_infinities_are_nan() {
    for dev in devices() {
        for len in [1usize, 8, 7, 2048] {
            let mut rows = vec![vec![0.5f32; len]; 4];
            rows[0][len / 2] = f32::NAN;
            rows[1][len - 1] = f32::INFINITY;
            rows[2] = vec![f32::NEG_INFINITY; len];
            rows[3][0] = f32::NEG_INFINITY;
            let x = Tensor::from_vec(rows.concat(), [4, len], &dev).unwrap();
            for log in [false, true] {
                let y = if log {
                    x.log_softmax(-1)
                } else {
                    x.softmax(-1)
                };
                let got = y.to_vec::<f32>().unwrap();
                let what = format!("softmax (log: {log}) over rows of {len} on {dev:?}");
                for r in 0..3 {
                    assert!(
                        got[r * len..(r + 1) * len].iter().all(|v| v.is_nan()),
                        "{what}: row {r} should be NaN"
                    );
                }
                if len == 1 {
                    continue;
                }
                // Row 3: -inf at 0 (probability 0), the rest uniform.
                let p = 1.0 / (len - 1) as f32;
                let (first, rest) = if log {
                    (f32::NEG_INFINITY, p.ln())
                } else {
                    (0.0, p)
                };
                assert_eq!(got[3 * len], first, "{what}: the -inf element");
                for &v in &got[3 * len + 1..4 * len] {
                    assert!(
                        (v - rest).abs() <= 1e-5 * rest.abs().max(1.0),
                        "{what}: {v} vs {rest}"
                    );
                }
            }
        }
    }
}
