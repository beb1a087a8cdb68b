//! The CPU reference backend: interprets a graph node by node on ndarray.
//!
//! It is deliberately plain (no fusion, one obvious loop per op) because it
//! is the oracle the GPU path is tested against and the default device where
//! no adapter exists. Its semantics follow PyTorch's where WGSL's leave a
//! case open (pow of negative bases, round half to even).

mod checks;
mod indexing;
mod reduce;
pub(crate) mod rng;

use ndarray::{ArrayD, IxDyn, Zip};

use crate::dtype::DType;
use crate::error::Result;
use crate::graph::op::{BinaryOp, Op, UnaryOp};
use crate::graph::{GKind, Graph};
use crate::runtime::storage::{DataBuffer, Storage};
use crate::shape::{Layout, numel};
use std::sync::Arc;

/// A typed n-dimensional value.
#[derive(Clone, Debug)]
pub(crate) enum Arr {
    F32(ArrayD<f32>),
    I32(ArrayD<i32>),
    U32(ArrayD<u32>),
    Bool(ArrayD<bool>),
}

/// Applies `$body` to the array inside any variant, rewrapping the result
/// in the same variant.
macro_rules! map_same {
    ($arr:expr, $a:ident => $body:expr) => {
        match $arr {
            Arr::F32($a) => Arr::F32($body),
            Arr::I32($a) => Arr::I32($body),
            Arr::U32($a) => Arr::U32($body),
            Arr::Bool($a) => Arr::Bool($body),
        }
    };
}

impl Arr {
    fn from_bits(dtype: DType, shape: &[usize], bits: Vec<u32>) -> Arr {
        fn build<T>(shape: &[usize], v: Vec<T>) -> ArrayD<T> {
            ArrayD::from_shape_vec(IxDyn(shape), v).expect("length matches shape")
        }
        match dtype {
            DType::F32 => Arr::F32(build(shape, bits.into_iter().map(f32::from_bits).collect())),
            DType::F16 | DType::BF16 => Arr::F32(build(
                shape,
                bits.into_iter().map(|b| dtype.float_from_bits(b)).collect(),
            )),
            DType::I32 => Arr::I32(build(shape, bits.into_iter().map(|b| b as i32).collect())),
            DType::U32 => Arr::U32(build(shape, bits)),
            DType::Bool => Arr::Bool(build(shape, bits.into_iter().map(|b| b != 0).collect())),
            DType::I64 | DType::U8 => unreachable!("I32 and U32 below the front end"),
        }
    }

    fn shape(&self) -> Vec<usize> {
        match self {
            Arr::F32(a) => a.shape().to_vec(),
            Arr::I32(a) => a.shape().to_vec(),
            Arr::U32(a) => a.shape().to_vec(),
            Arr::Bool(a) => a.shape().to_vec(),
        }
    }

    /// The values in row-major order, as f64 (exact for every dtype).
    fn to_f64(&self) -> Vec<f64> {
        match self {
            Arr::F32(a) => a.iter().map(|&v| v as f64).collect(),
            Arr::I32(a) => a.iter().map(|&v| v as f64).collect(),
            Arr::U32(a) => a.iter().map(|&v| v as f64).collect(),
            Arr::Bool(a) => a.iter().map(|&v| v as u32 as f64).collect(),
        }
    }

    /// One 32-bit pattern per element as the array holds it (f32 for
    /// every float dtype).
    fn raw_bits(&self) -> Vec<u32> {
        self.to_bits(DType::F32)
    }

    /// One 32-bit pattern per element, as stored for `dtype` (a 16-bit
    /// float's pattern in the low half).
    fn to_bits(&self, dtype: DType) -> Vec<u32> {
        match self {
            Arr::F32(a) => a.iter().map(|&v| dtype.float_to_bits(v)).collect(),
            Arr::I32(a) => a.iter().map(|&v| v as u32).collect(),
            Arr::U32(a) => a.iter().copied().collect(),
            Arr::Bool(a) => a.iter().map(|&v| v as u32).collect(),
        }
    }
}

/// Coordinates of row-major element `i` of `shape`.
fn unravel(shape: &[usize], mut i: usize) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d].max(1);
        i /= shape[d].max(1);
    }
    c
}

/// Reads the elements of a strided view in row-major order.
pub(crate) fn gather(flat: &[u32], shape: &[usize], layout: &Layout) -> Vec<u32> {
    (0..numel(shape))
        .map(|i| flat[layout.position(shape, i)])
        .collect()
}

/// Runs `graph` and returns the storage of each output.
pub(crate) fn run_graph(graph: &Graph) -> Result<Vec<Storage>> {
    let nodes = &graph.key.nodes;
    let mut values: Vec<Option<Arr>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let get = |k: usize| {
            values[n.inputs[k]]
                .as_ref()
                .expect("inputs precede their users")
        };
        let value = match &n.kind {
            GKind::Input { slot, layout } => {
                let DataBuffer::Cpu(flat) = &graph.inputs[*slot].buffer else {
                    return Err(crate::Error::Device {
                        during: format!("graph {:016x} on the CPU", graph.hash),
                        message: format!(
                            "input created at {} lives on a GPU device; tensors of different devices cannot be mixed",
                            graph.locations[i]
                        ),
                    });
                };
                Arr::from_bits(n.dtype, &n.shape, gather(flat, &n.shape, layout))
            }
            GKind::Op { op, param_base } => {
                let p = &graph.params[*param_base..];
                let inputs: Vec<&Arr> = (0..n.inputs.len()).map(get).collect();
                let value = eval(op, n.dtype, &n.shape, p, &inputs);
                // A 16-bit float op is computed in f32 and rounded, as
                // PyTorch's kernels (and this crate's) do.
                let value = match value {
                    Arr::F32(a) if n.dtype.is_half() => Arr::F32(a.mapv(|v| n.dtype.round_f32(v))),
                    other => other,
                };
                if graph.key.checked {
                    checks::check(graph, i, &value, &inputs)?;
                }
                value
            }
        };
        values[i] = Some(value);
    }
    Ok(graph
        .key
        .outputs
        .iter()
        .map(|&o| Storage {
            buffer: DataBuffer::Cpu(Arc::new(
                values[o]
                    .as_ref()
                    .expect("computed")
                    .to_bits(nodes[o].dtype),
            )),
            layout: Layout::contiguous(&nodes[o].shape),
        })
        .collect())
}

fn eval(op: &Op, dtype: DType, shape: &[usize], p: &[u32], inputs: &[&Arr]) -> Arr {
    let n = numel(shape);
    // Float parameters are f32 patterns whatever the float dtype; a
    // 16-bit result is rounded by the caller.
    let dtype = dtype.compute();
    match op {
        Op::Scalar => Arr::from_bits(dtype, shape, vec![p[0]; n]),
        Op::Arange => arange(dtype, shape, p),
        Op::Rand { normal } => {
            let bits = rng::stream([p[0], p[1], p[2], p[3]], n, *normal)
                .map(f32::to_bits)
                .collect();
            Arr::from_bits(dtype, shape, bits)
        }
        Op::Unary(u) => unary(*u, inputs[0]),
        Op::Binary(b) => binary(*b, inputs[0], inputs[1]),
        Op::Where => {
            let Arr::Bool(c) = inputs[0] else {
                unreachable!("where's condition is bool (checked at trace time)")
            };
            match (inputs[1], inputs[2]) {
                (Arr::F32(a), Arr::F32(b)) => Arr::F32(select(c, a, b)),
                (Arr::I32(a), Arr::I32(b)) => Arr::I32(select(c, a, b)),
                (Arr::U32(a), Arr::U32(b)) => Arr::U32(select(c, a, b)),
                (Arr::Bool(a), Arr::Bool(b)) => Arr::Bool(select(c, a, b)),
                _ => unreachable!("where's branches share a dtype (checked at trace time)"),
            }
        }
        Op::Cast(to) => cast(inputs[0], *to),
        Op::Reshape => map_same!(inputs[0], a => {
            let flat: Vec<_> = a.iter().cloned().collect();
            ArrayD::from_shape_vec(IxDyn(shape), flat).expect("reshape keeps numel")
        }),
        Op::Expand => map_same!(inputs[0], a => {
            a.broadcast(IxDyn(shape)).expect("expand checked at trace time").to_owned()
        }),
        Op::AsStrided(layout) => map_same!(inputs[0], a => {
            let flat: Vec<_> = a.iter().cloned().collect();
            let picked = (0..n).map(|i| flat[layout.position(shape, i)]).collect();
            ArrayD::from_shape_vec(IxDyn(shape), picked).expect("numel matches")
        }),
        Op::Pad(pads) => indexing::pad(inputs[0], shape, pads, p[0], dtype),
        Op::Flip(axes) => indexing::flip(inputs[0], shape, axes, dtype),
        Op::Gather(axis) => indexing::gather(inputs[0], inputs[1], shape, *axis, dtype),
        Op::ScatterAdd(axis) => indexing::scatter_add(inputs, shape, *axis, dtype),
        Op::SortedScatterAdd(_) | Op::SortedStarts => unreachable!(
            "sorted scatters are a lowering for the GPU (schedule::split::sort_scatters); the CPU reference runs traced graphs only"
        ),
        Op::Reduce { .. }
        | Op::Softmax { .. }
        | Op::Normalize { .. }
        | Op::NormalizeBackward { .. }
        | Op::Attention { .. }
        | Op::Scan { .. }
        | Op::Sort { .. }
        | Op::MergeRuns { .. }
        | Op::TopkSelect { .. }
        | Op::RadixCount(_)
        | Op::RadixScatter(_)
        | Op::Matmul => {
            let values = root_values(op, shape, p, inputs);
            Arr::from_bits(dtype, shape, reduce::to_bits(&values, dtype))
        }
        Op::StridedScatter(layout) => {
            let view_shape = inputs[1].shape();
            let mut bits = inputs[0].raw_bits();
            for (i, v) in inputs[1].raw_bits().into_iter().enumerate() {
                bits[layout.position(&view_shape, i)] = v;
            }
            Arr::from_bits(dtype, shape, bits)
        }
    }
}

/// `Arange`'s `start + i * step` (`p[0]`, `p[1]`) at each element.
fn arange(dtype: DType, shape: &[usize], p: &[u32]) -> Arr {
    let bits: Vec<u32> = (0..numel(shape))
        .map(|i| match dtype {
            DType::F32 => (f32::from_bits(p[0]) + i as f32 * f32::from_bits(p[1])).to_bits(),
            DType::I32 => (p[0] as i32).wrapping_add((i as i32).wrapping_mul(p[1] as i32)) as u32,
            _ => p[0].wrapping_add((i as u32).wrapping_mul(p[1])),
        })
        .collect();
    Arr::from_bits(dtype, shape, bits)
}

/// The values of a kernel root's op (reductions, softmax, the row norms,
/// attention, scans, sorts, matmul), in f64 (a sort's are its indices).
fn root_values(op: &Op, shape: &[usize], p: &[u32], inputs: &[&Arr]) -> Vec<f64> {
    let x = || inputs[0].to_f64();
    match op {
        Op::Reduce { op, axes, parts } => {
            // Traced graphs hold one-stage reductions; splitting is a
            // lowering for the GPU (`schedule::split_reductions`).
            assert_eq!(*parts, 1, "the CPU reference runs traced graphs only");
            reduce::reduce(*op, &x(), &inputs[0].shape(), axes)
        }
        Op::Softmax { axis, log } => reduce::softmax(&x(), shape, *axis, *log),
        Op::Normalize { rms } | Op::NormalizeBackward { rms } => {
            let len = shape.last().copied().unwrap_or(1);
            let eps = f64::from(f32::from_bits(p[0]));
            let gy = matches!(op, Op::NormalizeBackward { .. }).then(|| inputs[1].to_f64());
            reduce::normalize(&x(), gy.as_deref(), (len, *rms), eps)
        }
        Op::Attention { causal } => {
            let (qs, ks, vs) = (inputs[0].shape(), inputs[1].shape(), inputs[2].shape());
            let r = qs.len();
            let dims = (qs[r - 2], ks[r - 2], qs[r - 1], vs[r - 1]);
            let scale = f64::from(f32::from_bits(p[0]));
            let (k, v) = (inputs[1].to_f64(), inputs[2].to_f64());
            reduce::attention((&x(), &k, &v), dims, scale, *causal)
        }
        Op::Scan { op, axis, chunk } => {
            // Chunked scans are a lowering for the GPU
            // (`schedule::split_long_scans`).
            assert_eq!(*chunk, 0, "the CPU reference runs traced graphs only");
            reduce::scan(*op, &x(), shape, *axis)
        }
        Op::Sort {
            axis,
            descending,
            run,
        } => {
            // Sorts in runs are a lowering for the GPU
            // (`schedule::split_long_sorts`).
            assert_eq!(*run, 0, "the CPU reference runs traced graphs only");
            reduce::argsort(&x(), shape, *axis, *descending)
                .into_iter()
                .map(f64::from)
                .collect()
        }
        Op::TopkSelect { k, largest } => {
            reduce::topk_select(&x(), &inputs[0].shape(), *k, *largest)
                .into_iter()
                .map(f64::from)
                .collect()
        }
        Op::RadixCount(_) | Op::RadixScatter(_) => {
            unreachable!(
                "radix passes are a lowering for CPU adapters (schedule::split_long_sorts); the CPU reference runs traced graphs only"
            )
        }
        Op::MergeRuns { .. } => {
            unreachable!(
                "merges of sorted runs are a lowering for the GPU (schedule::split_long_sorts); the CPU reference runs traced graphs only"
            )
        }
        Op::Matmul => {
            let (a, b) = (inputs[0], inputs[1]);
            reduce::matmul(&a.to_f64(), &b.to_f64(), &a.shape(), &b.shape())
        }
        other => unreachable!("{} is not a kernel root", other.name()),
    }
}

fn select<T: Copy>(c: &ArrayD<bool>, a: &ArrayD<T>, b: &ArrayD<T>) -> ArrayD<T> {
    Zip::from(c)
        .and(a)
        .and(b)
        .map_collect(|&c, &a, &b| if c { a } else { b })
}

fn unary(u: UnaryOp, x: &Arr) -> Arr {
    match x {
        Arr::F32(a) => Arr::F32(a.mapv(|v| unary_f32(u, v))),
        Arr::I32(a) => Arr::I32(a.mapv(|v| match u {
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::Abs => v.wrapping_abs(),
            UnaryOp::Relu => v.max(0),
            UnaryOp::Sign => v.signum(),
            _ => v,
        })),
        Arr::U32(a) => Arr::U32(a.mapv(|v| match u {
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::Sign => v.min(1),
            _ => v,
        })),
        Arr::Bool(_) => unreachable!("unary ops on bool are promoted at trace time"),
    }
}

fn unary_f32(u: UnaryOp, v: f32) -> f32 {
    match u {
        UnaryOp::Neg => -v,
        UnaryOp::Abs => v.abs(),
        UnaryOp::Exp => v.exp(),
        UnaryOp::Log => v.ln(),
        UnaryOp::Sqrt => v.sqrt(),
        UnaryOp::Rsqrt => 1.0 / v.sqrt(),
        UnaryOp::Recip => 1.0 / v,
        UnaryOp::Sin => v.sin(),
        UnaryOp::Cos => v.cos(),
        UnaryOp::Tanh => v.tanh(),
        UnaryOp::Erf => libm::erf(f64::from(v)) as f32,
        UnaryOp::Gelu => {
            let x = f64::from(v);
            (0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
        }
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
        // NaN passes through (PyTorch).
        UnaryOp::Relu => {
            if v > 0.0 || v.is_nan() {
                v
            } else {
                0.0
            }
        }
        UnaryOp::Floor => v.floor(),
        UnaryOp::Ceil => v.ceil(),
        UnaryOp::Round => v.round_ties_even(),
        // sign(NaN) is 0 in PyTorch; sign(-0) is 0.
        UnaryOp::Sign => {
            if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
    }
}

fn compare<T: PartialOrd>(b: BinaryOp, x: T, y: T) -> bool {
    match b {
        BinaryOp::Eq => x == y,
        BinaryOp::Ne => x != y,
        BinaryOp::Lt => x < y,
        BinaryOp::Le => x <= y,
        BinaryOp::Gt => x > y,
        BinaryOp::Ge => x >= y,
        _ => unreachable!("not a comparison"),
    }
}

fn zip<T: Copy, U>(a: &ArrayD<T>, b: &ArrayD<T>, f: impl Fn(T, T) -> U) -> ArrayD<U> {
    Zip::from(a).and(b).map_collect(|&x, &y| f(x, y))
}

fn binary(op: BinaryOp, x: &Arr, y: &Arr) -> Arr {
    if op.is_comparison() {
        return Arr::Bool(match (x, y) {
            (Arr::F32(a), Arr::F32(b)) => zip(a, b, |p, q| compare(op, p, q)),
            (Arr::I32(a), Arr::I32(b)) => zip(a, b, |p, q| compare(op, p, q)),
            (Arr::U32(a), Arr::U32(b)) => zip(a, b, |p, q| compare(op, p, q)),
            (Arr::Bool(a), Arr::Bool(b)) => zip(a, b, |p, q| compare(op, p, q)),
            _ => unreachable!("operands share a dtype (promoted at trace time)"),
        });
    }
    match (x, y) {
        (Arr::F32(a), Arr::F32(b)) => Arr::F32(zip(a, b, |p, q| match op {
            BinaryOp::Add => p + q,
            BinaryOp::Sub => p - q,
            BinaryOp::Mul => p * q,
            BinaryOp::Div => p / q,
            BinaryOp::Pow => p.powf(q),
            // NaN if either is NaN (Rust's max/min return the other one).
            BinaryOp::Maximum if p.is_nan() || q.is_nan() => f32::NAN,
            BinaryOp::Minimum if p.is_nan() || q.is_nan() => f32::NAN,
            BinaryOp::Maximum => p.max(q),
            BinaryOp::Minimum => p.min(q),
            _ => unreachable!("comparisons handled above"),
        })),
        (Arr::I32(a), Arr::I32(b)) => Arr::I32(zip(a, b, |p, q| match op {
            BinaryOp::Add => p.wrapping_add(q),
            BinaryOp::Sub => p.wrapping_sub(q),
            BinaryOp::Mul => p.wrapping_mul(q),
            BinaryOp::Maximum => p.max(q),
            BinaryOp::Minimum => p.min(q),
            _ => unreachable!("{} on i32 is promoted to f32 at trace time", op.name()),
        })),
        (Arr::U32(a), Arr::U32(b)) => Arr::U32(zip(a, b, |p, q| match op {
            BinaryOp::Add => p.wrapping_add(q),
            BinaryOp::Sub => p.wrapping_sub(q),
            BinaryOp::Mul => p.wrapping_mul(q),
            BinaryOp::Maximum => p.max(q),
            BinaryOp::Minimum => p.min(q),
            _ => unreachable!("{} on u32 is promoted to f32 at trace time", op.name()),
        })),
        _ => unreachable!("arithmetic operands share a non-bool dtype (promoted at trace time)"),
    }
}

fn cast(x: &Arr, to: DType) -> Arr {
    match (x, to.compute()) {
        (Arr::F32(a), DType::F32) => Arr::F32(a.clone()),
        (Arr::F32(a), DType::I32) => Arr::I32(a.mapv(|v| v as i32)),
        (Arr::F32(a), DType::U32) => Arr::U32(a.mapv(|v| v as u32)),
        (Arr::F32(a), DType::Bool) => Arr::Bool(a.mapv(|v| v != 0.0)),
        (Arr::I32(a), DType::F32) => Arr::F32(a.mapv(|v| v as f32)),
        (Arr::I32(a), DType::I32) => Arr::I32(a.clone()),
        (Arr::I32(a), DType::U32) => Arr::U32(a.mapv(|v| v as u32)),
        (Arr::I32(a), DType::Bool) => Arr::Bool(a.mapv(|v| v != 0)),
        (Arr::U32(a), DType::F32) => Arr::F32(a.mapv(|v| v as f32)),
        (Arr::U32(a), DType::I32) => Arr::I32(a.mapv(|v| v as i32)),
        (Arr::U32(a), DType::U32) => Arr::U32(a.clone()),
        (Arr::U32(a), DType::Bool) => Arr::Bool(a.mapv(|v| v != 0)),
        (Arr::Bool(a), DType::F32) => Arr::F32(a.mapv(|v| v as u32 as f32)),
        (Arr::Bool(a), DType::I32) => Arr::I32(a.mapv(|v| v as i32)),
        (Arr::Bool(a), DType::U32) => Arr::U32(a.mapv(|v| v as u32)),
        (Arr::Bool(a), DType::Bool) => Arr::Bool(a.clone()),
        (_, DType::F16 | DType::BF16 | DType::I64 | DType::U8) => {
            unreachable!("not a compute dtype")
        }
    }
}
