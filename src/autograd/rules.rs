//! The backward rule of every differentiable op. Each function is called
//! by the op right after it records its output, returns at once when no
//! input requires a gradient, and otherwise records a closure that builds
//! the input gradients from the output gradient `g` with ordinary (lazy)
//! tensor ops. Inputs that do not require a gradient get none computed.

use super::{is_grad_enabled, record, save, wants};
use crate::dtype::DType;
use crate::graph::op::{BinaryOp, ReduceOp, UnaryOp};
use crate::tensor::{Operand, Tensor, convert_scalar};

/// `g` summed over the dims that broadcasting added or stretched, so that
/// it has `shape` again (the gradient of a broadcast).
#[track_caller]
pub(crate) fn sum_to(g: &Tensor, shape: &[usize]) -> Tensor {
    if g.shape() == shape {
        return g.clone();
    }
    let lead = g.rank() - shape.len();
    let axes: Vec<isize> = (0..g.rank())
        .filter(|&d| d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1))
        .map(|d| d as isize)
        .collect();
    let summed = if axes.is_empty() {
        g.clone()
    } else {
        g.sum(axes, true)
    };
    summed.reshape(shape.to_vec())
}

/// Gradients of elementwise unary ops.
#[track_caller]
pub(crate) fn unary(op: UnaryOp, x: &Tensor, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    // Save only what the rule reads (a saved value is a live handle, which
    // a step must store): the input, the output, or neither.
    let reads_input = matches!(
        op,
        UnaryOp::Abs | UnaryOp::Log | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Erf | UnaryOp::Gelu
    );
    let reads_output = matches!(
        op,
        UnaryOp::Exp
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Recip
            | UnaryOp::Tanh
            | UnaryOp::Sigmoid
            | UnaryOp::Relu
    );
    let xs = reads_input.then(|| save(x));
    let y = reads_output.then(|| save(out));
    record(op.name(), out, &[x], move |g| {
        let x = || xs.as_ref().expect("input saved for this op");
        let y = || y.as_ref().expect("output saved for this op");
        let gx = match op {
            UnaryOp::Neg => -g,
            UnaryOp::Abs => g * x().sign(),
            UnaryOp::Exp => g * y(),
            UnaryOp::Log => g / x(),
            UnaryOp::Sqrt => g / (y() * 2.0),
            UnaryOp::Rsqrt => g * (y() * y() * y()) * -0.5,
            UnaryOp::Recip => -(g * y() * y()),
            UnaryOp::Sin => g * x().cos(),
            UnaryOp::Cos => -(g * x().sin()),
            UnaryOp::Tanh => g * (-(y() * y()) + 1.0),
            UnaryOp::Sigmoid => g * y() * (-y() + 1.0),
            // PyTorch's threshold_backward on the result: zero where
            // relu(x) <= 0 (exactly where x <= 0), so NaN passes the
            // gradient through. The output, not the input, is kept: the
            // next layer holds it anyway.
            UnaryOp::Relu => y().le(0.0f32).where_cond(0.0f32, g),
            // d/dx erf(x) = 2/sqrt(pi) * exp(-x^2).
            UnaryOp::Erf => g * (-(x() * x())).exp() * std::f32::consts::FRAC_2_SQRT_PI,
            // d/dx x Phi(x) = Phi(x) + x phi(x), recomputed from x alone.
            UnaryOp::Gelu => {
                let x = x();
                let cdf = ((x * std::f32::consts::FRAC_1_SQRT_2).erf() + 1.0) * 0.5;
                let pdf = (x * x * -0.5).exp()
                    * (0.5 * std::f32::consts::FRAC_2_SQRT_PI * std::f32::consts::FRAC_1_SQRT_2);
                g * (cdf + x * pdf)
            }
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Sign => g.zeros_like(),
        };
        vec![Some(gx)]
    });
}

/// Gradients of elementwise binary ops (with broadcasting undone). A
/// scalar right-hand side gets no gradient of its own.
#[track_caller]
pub(crate) fn binary(op: BinaryOp, a: &Tensor, rhs: &Operand, out: &Tensor) {
    let b_t = match rhs {
        Operand::Tensor(t) => Some(t),
        Operand::Scalar(..) => None,
    };
    let need_a = a.requires_grad();
    let need_b = b_t.is_some_and(|t| t.requires_grad());
    // Every op is traced through here: decide without allocating.
    if op.is_comparison() || !is_grad_enabled() || !(need_a || need_b) {
        return;
    }
    let inputs: Vec<&Tensor> = std::iter::once(a).chain(b_t).collect();
    let a_shape = a.shape().to_vec();
    let b_shape = b_t.map(|t| t.shape().to_vec());
    // Save only the operands the rule reads for the gradients it makes.
    let (reads_a, reads_b) = match op {
        BinaryOp::Add | BinaryOp::Sub => (false, false),
        BinaryOp::Mul => (need_b, need_a),
        BinaryOp::Div => (false, true),
        _ => (true, true),
    };
    let sa = reads_a.then(|| save(a));
    let sb = reads_b.then(|| match rhs {
        Operand::Tensor(t) => save(t),
        &Operand::Scalar(d, bits) => Tensor::scalar(
            f32::from_bits(convert_scalar(bits, d, DType::F32)),
            a.device(),
        ),
    });
    let y = matches!(op, BinaryOp::Div | BinaryOp::Pow).then(|| save(out));
    record(op.name(), out, &inputs, move |g| {
        let a = || sa.as_ref().expect("left operand saved for this op");
        let b = || sb.as_ref().expect("right operand saved for this op");
        let y = || y.as_ref().expect("output saved for this op");
        let (ga, gb): (Option<Tensor>, Option<Tensor>) = match op {
            BinaryOp::Add => (need_a.then(|| g.clone()), need_b.then(|| g.clone())),
            BinaryOp::Sub => (need_a.then(|| g.clone()), need_b.then(|| -g)),
            BinaryOp::Mul => (need_a.then(|| g * b()), need_b.then(|| g * a())),
            BinaryOp::Div => (need_a.then(|| g / b()), need_b.then(|| -(g * y() / b()))),
            BinaryOp::Pow => pow_grads(g, (a(), b(), y()), (need_a, need_b)),
            BinaryOp::Maximum | BinaryOp::Minimum => {
                extremum_grads(op, g, (a(), b()), (need_a, need_b))
            }
            _ => (None, None),
        };
        let ga = ga.map(|t| sum_to(&t, &a_shape));
        let mut grads = vec![ga];
        if let Some(bs) = &b_shape {
            grads.push(gb.map(|t| sum_to(&t, bs)));
        }
        grads
    });
}

/// The gradients of `y = a^b` that are needed (`need`), from the output
/// gradient `g`.
fn pow_grads(
    g: &Tensor,
    (a, b, y): (&Tensor, &Tensor, &Tensor),
    (need_a, need_b): (bool, bool),
) -> (Option<Tensor>, Option<Tensor>) {
    (
        need_a.then(|| {
            // d/da a^b = b a^(b-1), which is 0 where b == 0.
            let d = b * a.pow(b - 1.0);
            g * b.eq(0.0f32).where_cond(0.0f32, &d)
        }),
        need_b.then(|| {
            // d/db a^b = a^b ln a; PyTorch takes 0 where a == 0
            // and b >= 0 (0^-2 gives inf * -inf = -inf).
            let d = y * a.log();
            let zero_base = a.eq(0.0f32).where_cond(b.ge(0.0f32), false);
            g * zero_base.where_cond(0.0f32, &d)
        }),
    )
}

/// The gradients of `maximum(a, b)` (`minimum` when `op` is `Minimum`)
/// that are needed (`need`), from the output gradient `g`.
fn extremum_grads(
    op: BinaryOp,
    g: &Tensor,
    (a, b): (&Tensor, &Tensor),
    (need_a, need_b): (bool, bool),
) -> (Option<Tensor>, Option<Tensor>) {
    // Ties split the gradient evenly, as PyTorch does; where
    // either is NaN (so is the result) both get all of it.
    let wins = |p: &Tensor, q: &Tensor| {
        let strict = if op == BinaryOp::Maximum {
            p.gt(q)
        } else {
            p.lt(q)
        };
        let share = strict.cast(DType::F32) + p.eq(q).cast(DType::F32) * 0.5;
        let either_nan = p.ne(p).where_cond(true, q.ne(q));
        either_nan.where_cond(1.0f32, &share)
    };
    (
        need_a.then(|| g * wins(a, b)),
        need_b.then(|| g * wins(b, a)),
    )
}

/// Gradient of `clamp(x, min, max)`: `g` where `min < x < max`, else 0
/// (PyTorch 2.15's rule: 0 at the bounds themselves and at NaN).
#[track_caller]
pub(crate) fn clamp(x: &Tensor, min: f32, max: f32, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let xs = save(x);
    record("clamp", out, &[x], move |g| {
        let inside = xs.gt(min).where_cond(xs.lt(max), false);
        vec![Some(inside.where_cond(g, 0.0f32))]
    });
}

/// Gradient of `std = sqrt(var)` with respect to `var`: `g / (2 std)`,
/// and 0 where `std` is 0 (PyTorch's rule; the plain sqrt rule gives NaN
/// there, for a constant or one-element slice).
#[track_caller]
pub(crate) fn std_from_var(var: &Tensor, out: &Tensor) {
    if !wants(&[var]) {
        return;
    }
    let y = save(out);
    record("std", out, &[var], move |g| {
        vec![Some(y.eq(0.0f32).where_cond(0.0f32, &(g / (&y * 2.0))))]
    });
}

/// Gradient of `cond ? a : b` (the condition gets none).
#[track_caller]
/// Scalar branches (`None`) get no gradient.
pub(crate) fn where_cond(cond: &Tensor, a: Option<&Tensor>, b: Option<&Tensor>, out: &Tensor) {
    let inputs: Vec<&Tensor> = a.into_iter().chain(b).collect();
    if !wants(&inputs) {
        return;
    }
    let needs = |t: Option<&Tensor>| t.filter(|t| t.requires_grad()).map(|t| t.shape().to_vec());
    let (sa, sb) = (needs(a), needs(b));
    let (has_a, has_b) = (a.is_some(), b.is_some());
    let c = save(cond);
    record("where", out, &inputs, move |g| {
        // One gradient per tensor input, in order.
        let mut grads = Vec::with_capacity(2);
        if has_a {
            grads.push(sa.as_ref().map(|s| sum_to(&c.where_cond(g, 0.0f32), s)));
        }
        if has_b {
            grads.push(sb.as_ref().map(|s| sum_to(&c.where_cond(0.0f32, g), s)));
        }
        grads
    });
}

/// Gradient of a cast (float to float only; other casts cut the graph).
#[track_caller]
pub(crate) fn cast(x: &Tensor, out: &Tensor) {
    if !wants(&[x]) || !out.dtype().is_float() {
        return;
    }
    let dt = x.dtype();
    record("cast", out, &[x], move |g| vec![Some(g.cast(dt))]);
}

/// Gradients of sum, prod, max and min over `axes` (resolved, ascending).
#[track_caller]
pub(crate) fn reduce(op: ReduceOp, x: &Tensor, axes: &[usize], out: &Tensor) {
    if op.is_arg() || !wants(&[x]) {
        return;
    }
    let x_shape = x.shape().to_vec();
    let keep: Vec<usize> = x_shape
        .iter()
        .enumerate()
        .map(|(d, &s)| if axes.contains(&d) { 1 } else { s })
        .collect();
    let dims: Vec<isize> = axes.iter().map(|&d| d as isize).collect();
    let xs = (op != ReduceOp::Sum).then(|| save(x));
    let y = (op != ReduceOp::Sum).then(|| save(out));
    record(op.name(), out, &[x], move |g| {
        let g = g.reshape(keep.clone());
        let gx = match op {
            ReduceOp::Sum => g.expand(x_shape.clone()),
            ReduceOp::Prod => {
                // The product of the other elements. Without zeros that
                // is y / x; with one zero, the zero's gradient is the
                // product of the rest and every other one's is 0; with
                // two or more, all are 0. (An infinite element among
                // finite others still gives y / x = nan, where PyTorch
                // gives the product of the others.)
                let x = xs.as_ref().expect("saved");
                let y = y.as_ref().expect("saved").reshape(keep.clone());
                let is_zero = x.eq(0.0f32);
                let zeros = is_zero.cast(DType::F32).sum(dims.clone(), true);
                // `rest * 0` rather than 0: the others' product is NaN
                // when one of them is NaN or infinite.
                let rest = is_zero.where_cond(1.0f32, x).prod(dims.clone(), true);
                let rest_zero = &rest * 0.0;
                let at_zero = zeros.eq(1.0f32).where_cond(&rest, &rest_zero);
                let elsewhere = zeros.eq(0.0f32).where_cond(&(&y / x), &rest_zero);
                g * is_zero.where_cond(&at_zero, &elsewhere)
            }
            _ => {
                // Max/min: split evenly among the elements that attain it.
                let x = xs.as_ref().expect("saved");
                let y = y.as_ref().expect("saved").reshape(keep.clone());
                let hit = x.eq(&y).cast(DType::F32);
                let count = hit.sum(dims.clone(), true);
                hit * (g / count)
            }
        };
        vec![Some(gx)]
    });
}

/// Gradient of softmax / log_softmax along `axis`.
#[track_caller]
pub(crate) fn softmax(x: &Tensor, axis: isize, log: bool, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let y = save(out);
    let name = if log { "log_softmax" } else { "softmax" };
    record(name, out, &[x], move |g| {
        if y.rank() == 0 {
            return vec![Some(g * 0.0)];
        }
        let gx = if log {
            g - y.exp() * g.sum([axis], true)
        } else {
            &y * (g - (g * &y).sum([axis], true))
        };
        vec![Some(gx)]
    });
}

/// Gradient of `normalize_rows`: one fused kernel from the saved input
/// and the output gradient.
#[track_caller]
pub(crate) fn normalize(x: &Tensor, (eps, rms): (f32, bool), out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let xs = save(x);
    let name = if rms { "rms_normalize" } else { "normalize" };
    record(name, out, &[x], move |g| {
        vec![Some(xs.normalize_rows_backward(g, (eps, rms)))]
    });
}

/// Gradients of fused attention: the probabilities are recomputed from the
/// saved q and k (the forward never stored them), then the usual rules of
/// softmax and the two products.
#[track_caller]
pub(crate) fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f32,
    causal: bool,
    out: &Tensor,
) {
    if !wants(&[q, k, v]) {
        return;
    }
    let (nq, nk, nv) = (q.requires_grad(), k.requires_grad(), v.requires_grad());
    let (qs, ks, vs) = (save(q), save(k), save(v));
    record("attention", out, &[q, k, v], move |g| {
        let p = qs.attention_scores(&ks, scale, causal).softmax(-1);
        let dp = g.matmul(&vs.transpose(-2, -1));
        let ds = &p * (&dp - (&dp * &p).sum([-1], true));
        vec![
            nq.then(|| ds.matmul(&ks) * scale),
            nk.then(|| ds.transpose(-2, -1).matmul(&qs) * scale),
            nv.then(|| p.transpose(-2, -1).matmul(g)),
        ]
    });
}

/// Gradients of `matmul` with PyTorch's 1-D and batch-broadcast rules.
#[track_caller]
pub(crate) fn matmul(a: &Tensor, b: &Tensor, out: &Tensor) {
    if !wants(&[a, b]) {
        return;
    }
    let (na, nb) = (a.requires_grad(), b.requires_grad());
    let b_transposed = is_transposed_view(b);
    // 1-D operands as matrices: a vector on the left is a row, on the
    // right a column (PyTorch's rule).
    let as_matrix = |t: &Tensor, left: bool| -> Vec<usize> {
        match (t.shape(), left) {
            ([k], true) => vec![1, *k],
            ([k], false) => vec![*k, 1],
            (s, _) => s.to_vec(),
        }
    };
    let (a_shape, b_shape) = (a.shape().to_vec(), b.shape().to_vec());
    let (a2_shape, b2_shape) = (as_matrix(a, true), as_matrix(b, false));
    // a's gradient reads b and b's reads a: save only those.
    let sa = nb.then(|| save(a).reshape(a2_shape.clone()));
    let sb = na.then(|| save(b).reshape(b2_shape.clone()));
    record("matmul", out, &[a, b], move |g| {
        let (m, n) = (a2_shape[a2_shape.len() - 2], b2_shape[b2_shape.len() - 1]);
        // The output with its 1-D dims restored: batch + [m, n].
        let lead = g.rank() - usize::from(a_shape.len() >= 2) - usize::from(b_shape.len() >= 2);
        let mut g_shape = g.shape()[..lead].to_vec();
        g_shape.extend([m, n]);
        let g2 = g.reshape(g_shape);
        let ga = sb.as_ref().map(|b2| {
            let full = g2.matmul(&b2.transpose(-1, -2));
            sum_to(&full, &a2_shape).reshape(a_shape.clone())
        });
        let gb = sa.as_ref().map(|a2| {
            // When b is a transposed view (a Linear layer's `w.t()`),
            // compute its gradient transposed, (g^T a)^T: the matmul then
            // writes w's gradient in w's own layout, so the optimiser's
            // update reads it at the same index and fuses as its epilogue.
            let full = if b_transposed {
                g2.transpose(-1, -2).matmul(a2).transpose(-1, -2)
            } else {
                a2.transpose(-1, -2).matmul(&g2)
            };
            sum_to(&full, &b2_shape).reshape(b_shape.clone())
        });
        vec![ga, gb]
    });
}

/// Whether `t` is a view that reads a row-major matrix transposed (its
/// last two dims swapped), as `w.t()` does.
fn is_transposed_view(t: &Tensor) -> bool {
    let r = t.rank();
    if r < 2 || !t.is_view() {
        return false;
    }
    let l = t.layout_in_base();
    let (rows, cols) = (t.shape()[r - 2], t.shape()[r - 1]);
    rows > 1 && cols > 1 && l.strides[r - 2] == 1 && l.strides[r - 1] == rows
}

/// Gradient of any op that keeps the elements in row-major order
/// (reshape, view, flatten, squeeze, unsqueeze).
#[track_caller]
pub(crate) fn reshape(name: &'static str, x: &Tensor, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let shape = x.shape().to_vec();
    record(name, out, &[x], move |g| {
        vec![Some(g.reshape(shape.clone()))]
    });
}

/// Gradient of `permute(perm)`: the inverse permutation.
#[track_caller]
pub(crate) fn permute(x: &Tensor, perm: &[usize], out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let mut inv = vec![0isize; perm.len()];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k as isize;
    }
    record("permute", out, &[x], move |g| {
        vec![Some(g.permute(inv.clone()))]
    });
}

/// Gradient of `expand`: sums over the broadcast dims.
#[track_caller]
pub(crate) fn expand(x: &Tensor, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let shape = x.shape().to_vec();
    record("expand", out, &[x], move |g| vec![Some(sum_to(g, &shape))]);
}

/// Gradient of a view that picks a subset of the elements (slice, select,
/// diagonal): zeros of the input's shape with the same view of them
/// overwritten by `g`.
#[track_caller]
pub(crate) fn subset_view(
    name: &'static str,
    x: &Tensor,
    out: &Tensor,
    view: impl Fn(&Tensor) -> Tensor + Send + Sync + 'static,
) {
    if !wants(&[x]) {
        return;
    }
    let shape = x.shape().to_vec();
    let dev = x.device().clone();
    record(name, out, &[x], move |g| {
        let z = Tensor::zeros(shape.clone(), &dev);
        view(&z).copy_(g);
        vec![Some(z)]
    });
}

/// Gradient of constant padding (`pads` covers every dim): the interior.
#[track_caller]
pub(crate) fn pad(x: &Tensor, pads: &[(usize, usize)], out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let shape = x.shape().to_vec();
    let pads = pads.to_vec();
    record("pad", out, &[x], move |g| {
        let mut gx = g.clone();
        for (d, (&(before, _), &size)) in pads.iter().zip(&shape).enumerate() {
            if gx.shape()[d] != size {
                gx = gx.narrow(d as isize, before, size);
            }
        }
        vec![Some(gx)]
    });
}

/// Gradient of `flip(axes)`: the same flip.
#[track_caller]
pub(crate) fn flip(x: &Tensor, axes: &[usize], out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let dims: Vec<isize> = axes.iter().map(|&d| d as isize).collect();
    record("flip", out, &[x], move |g| vec![Some(g.flip(dims.clone()))]);
}

/// Gradients of `cumsum` (the reverse running sum of `g`) and `cumprod`
/// (before a line's first zero, `revsum(g * y) / x` over the positions
/// before it; at the first zero, `revsum(g * y')` with `y'` the running
/// product with that zero taken as one; 0 after it, as PyTorch's).
#[track_caller]
pub(crate) fn scan(op: ReduceOp, x: &Tensor, axis: usize, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    if op == ReduceOp::Sum {
        record("cumsum", out, &[x], move |g| {
            vec![Some(g.reverse_cumsum(axis))]
        });
        return;
    }
    let (xs, ys) = (save(x), save(out));
    record("cumprod", out, &[x], move |g| {
        let a = axis as isize;
        let zero = xs.eq(0.0f32);
        let zeros_so_far = zero.cumsum(a);
        // Before a line's first zero only the products up to it count
        // (later ones hold that zero: their terms are 0, NaN and
        // infinities after it included, as PyTorch's).
        let before = zeros_so_far.eq(0i32);
        let first_zero = zero.logical_and(&zeros_so_far.eq(1i32));
        let gy = g * &ys;
        let plain = before.where_cond(&gy, 0.0f32).reverse_cumsum(axis) / &xs;
        let ones_at_zero = first_zero.where_cond(1.0f32, &xs).cumprod(a);
        let at_zero = (g * &ones_at_zero).reverse_cumsum(axis);
        let other = first_zero.where_cond(&at_zero, 0.0f32);
        vec![Some(before.where_cond(&plain, &other))]
    });
}

/// Gradient of `gather(axis, index)`: a scatter-add of `g` into zeros.
#[track_caller]
pub(crate) fn gather(x: &Tensor, axis: usize, index: &Tensor, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let shape = x.shape().to_vec();
    let dev = x.device().clone();
    let idx = save(index);
    record("gather", out, &[x], move |g| {
        let z = Tensor::zeros(shape.clone(), &dev);
        vec![Some(z.scatter_add(axis as isize, &idx, g))]
    });
}

/// Gradient of `index_select(axis, index)` (`index` 1-D): `g` added back
/// at the selected entries by an `index_add`, which the GPU sums by rows
/// through the index's sorted order (an embedding's gradient).
#[track_caller]
pub(crate) fn index_select(x: &Tensor, axis: usize, index: &Tensor, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let shape = x.shape().to_vec();
    let dev = x.device().clone();
    let idx = save(index);
    record("index_select", out, &[x], move |g| {
        let z = Tensor::zeros(shape.clone(), &dev);
        vec![Some(z.index_add(axis as isize, &idx, g))]
    });
}

/// Gradients of `scatter_add(axis, index, src)`: `g` for the base, `g`
/// gathered at `index` for `src`.
#[track_caller]
pub(crate) fn scatter_add(base: &Tensor, axis: usize, index: &Tensor, src: &Tensor, out: &Tensor) {
    if !wants(&[base, src]) {
        return;
    }
    let (nb, ns) = (base.requires_grad(), src.requires_grad());
    let idx = save(index);
    record("scatter_add", out, &[base, src], move |g| {
        vec![
            nb.then(|| g.clone()),
            ns.then(|| g.gather(axis as isize, &idx)),
        ]
    });
}
