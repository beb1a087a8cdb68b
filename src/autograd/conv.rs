//! Backward rules of `conv2d`, `max_pool2d` and `avg_pool2d`. Their
//! forward passes read overlapping windows of the input, so the input
//! gradient needs the windows' contributions added back. For the pools
//! that is col2im: a sum of `KH * KW` strided placements that fuses into
//! one elementwise kernel. For the convolution it is a transposed
//! convolution, which reads the output gradient's windows in place: a
//! column gradient (`[N, C*KH*KW, OH*OW]`, 9 times the input for a 3x3
//! kernel) is never written.

use super::{record, save, wants};
use crate::tensor::Tensor;

/// Window geometry shared by the forward op and its gradient.
#[derive(Clone, Copy)]
pub(crate) struct Window {
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
}

/// `contrib` `[N, C, OH, OW, KH, KW]` (what each window element receives)
/// summed back onto the `[N, C, H, W]` input positions the windows read.
fn col2im(contrib: &Tensor, h: usize, w: usize, win: Window) -> Tensor {
    let s = contrib.shape();
    let (n, c, oh, ow, kh, kw) = (s[0], s[1], s[2], s[3], s[4], s[5]);
    let (hp, wp) = (h + 2 * win.padding.0, w + 2 * win.padding.1);
    let dev = contrib.device();
    let mut total: Option<Tensor> = None;
    for i in 0..kh {
        for j in 0..kw {
            // Each window offset lands on a strided grid of the padded
            // input: a scatter into zeros, never a read of another term, so
            // the sum stays one elementwise kernel of KH*KW selects.
            let part = contrib.select(5, j).select(4, i);
            let z = Tensor::zeros([n, c, hp, wp], dev);
            let (h0, w0) = (i * win.dilation.0, j * win.dilation.1);
            z.slice(2, h0, h0 + (oh - 1) * win.stride.0 + 1, win.stride.0)
                .slice(3, w0, w0 + (ow - 1) * win.stride.1 + 1, win.stride.1)
                .copy_(&part);
            total = Some(match total {
                None => z,
                Some(t) => t + z,
            });
        }
    }
    let total = total.expect("kernel has at least one element");
    if win.padding == (0, 0) {
        total
    } else {
        total
            .narrow(2, win.padding.0, h)
            .narrow(3, win.padding.1, w)
    }
}

/// Pads (positive) or crops (negative) dims 2 and 3 of `t` at both
/// ends, `(before, after)` each, with one padding of both: a convolution
/// reading its windows in place then folds one padding into its reads
/// (`Gen::split_operand`), where two nested ones would not fold.
pub(crate) fn pad_or_crop_hw(t: &Tensor, h: (isize, isize), w: (isize, isize)) -> Tensor {
    let mut cropped = t.clone();
    for (d, (before, after)) in [(2usize, h), (3, w)] {
        let size = cropped.shape()[d] as isize;
        let start = (-before).max(0) as usize;
        let end = (size + after.min(0)) as usize;
        if start > 0 || end < size as usize {
            cropped = cropped.narrow(d as isize, start, end - start);
        }
    }
    let pads = [h, w].map(|(b, a)| (b.max(0) as usize, a.max(0) as usize));
    if pads == [(0, 0); 2] {
        return cropped;
    }
    cropped.pad(&pads, 0.0f32)
}

/// Where one stride phase of a transposed convolution reads, along one
/// spatial dim: output positions `phase, phase + stride, ..` below the
/// output size take the kernel taps `first_tap, first_tap + stride, ..`,
/// each a stride-1 correlation of the input padded by
/// `pad` (negative: cropped) at both ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PhaseDim {
    /// Output positions of this phase.
    len: usize,
    /// The first kernel tap that lands on this phase.
    first_tap: usize,
    /// Padding of the input (before, after) for the stride-1 correlation.
    pad: (isize, isize),
}

impl PhaseDim {
    /// Phase `phase` of a transposed convolution (dilation 1) of an input
    /// of `input` positions into `out` positions with kernel size `k`,
    /// stride `s` and padding `p`; `None` when no input element reaches it
    /// (no positions, no taps, or only taps that fall outside the input).
    ///
    /// Output `y = phase + s * a` receives input `iy` through tap `i`
    /// where `iy * s + i = y + p`, so `i = r (mod s)` with `r = (phase + p)
    /// mod s`, and tap `r + s * t` reads `iy = q + a - t` with `q = (phase +
    /// p) div s`: a correlation with the taps reversed of the input padded
    /// by `taps - 1 - q` in front.
    fn new(phase: usize, input: usize, out: usize, k: usize, s: usize, p: usize) -> Option<Self> {
        let len = out.saturating_sub(phase).div_ceil(s);
        let (first_tap, q) = ((phase + p) % s, (phase + p) / s);
        let taps = k.saturating_sub(first_tap).div_ceil(s);
        if len == 0 || taps == 0 {
            return None;
        }
        // Input rows read: q - (taps - 1) ..= q + len - 1, within the input.
        let (lo, hi) = (q as isize - taps as isize + 1, (q + len) as isize - 1);
        if lo.max(0) > hi.min(input as isize - 1) {
            return None;
        }
        let before = taps as isize - 1 - q as isize;
        let after = (len + taps - 1) as isize - before - input as isize;
        Some(PhaseDim {
            len,
            first_tap,
            pad: (before, after),
        })
    }
}

/// A transposed convolution (dilation 1) of `x` `[N, C_in, H, W]` by
/// `kernel` `[C_out, C_in / groups, KH, KW]` (indexed as the forward
/// convolution it transposes: not flipped) into `[N, C_out, out.0,
/// out.1]`, as `stride.0 * stride.1` stride-1 convolutions, one per phase
/// of the output grid, interleaved. Spreading `x` by the stride instead
/// writes a tensor `stride²` times `x`'s size, mostly zeros, and
/// multiplies those zeros: the phases read `x` in place and do
/// `1 / stride²` of the work. `None` when no phase reads anything (an
/// output smaller than the padding).
pub(crate) fn transposed_conv_by_phases(
    x: &Tensor,
    kernel: &Tensor,
    bias: Option<&Tensor>,
    out: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    groups: usize,
) -> Option<Tensor> {
    let (n, h, w) = (x.shape()[0], x.shape()[2], x.shape()[3]);
    let (c_out, kh, kw) = (kernel.shape()[0], kernel.shape()[2], kernel.shape()[3]);
    let rows = |py| PhaseDim::new(py, h, out.0, kh, stride.0, padding.0);
    let cols = |px| PhaseDim::new(px, w, out.1, kw, stride.1, padding.1);
    let (most_rows, most_cols) = (out.0.div_ceil(stride.0), out.1.div_ceil(stride.1));
    let phases: Vec<Vec<Option<Tensor>>> = (0..stride.0)
        .map(|py| {
            (0..stride.1)
                .map(|px| {
                    let (r, c) = (rows(py)?, cols(px)?);
                    let taps = kernel
                        .slice(2, r.first_tap, kh, stride.0)
                        .slice(3, c.first_tap, kw, stride.1)
                        .flip([2, 3]);
                    let read = pad_or_crop_hw(x, r.pad, c.pad);
                    let y = read.conv2d_groups(&taps, bias, (1, 1), (0, 0), (1, 1), groups);
                    // Every phase as many positions as the first (the most).
                    let short = (most_rows - r.len, most_cols - c.len);
                    Some(if short == (0, 0) {
                        y
                    } else {
                        y.pad(&[short.0, short.1].map(|s| (0, s)), 0.0f32)
                    })
                })
                .collect()
        })
        .collect();
    let dtype = phases.iter().flatten().flatten().next()?.dtype();
    let empty = || match bias {
        Some(b) => b
            .cast(dtype)
            .reshape([1, c_out, 1, 1])
            .expand([n, c_out, most_rows, most_cols]),
        None => Tensor::zeros_dtype([n, c_out, most_rows, most_cols], dtype, x.device()),
    };
    // [N, C, A, B] per phase -> [N, C, A, s0, B, s1]: output (a * s0 + py,
    // b * s1 + px) is phase (py, px)'s (a, b).
    let by_row: Vec<Tensor> = phases
        .into_iter()
        .map(|row| {
            let row: Vec<Tensor> = row.into_iter().map(|p| p.unwrap_or_else(empty)).collect();
            Tensor::stack(&row.iter().collect::<Vec<_>>(), 4)
        })
        .collect();
    let grid = Tensor::stack(&by_row.iter().collect::<Vec<_>>(), 3);
    Some(
        grid.reshape([n, c_out, most_rows * stride.0, most_cols * stride.1])
            .narrow(2, 0, out.0)
            .narrow(3, 0, out.1),
    )
}

/// The gradient of `conv2d` with respect to its input: the transposed
/// convolution of `g` by the same weights (`ws` `[OC, C/G, KH, KW]` is
/// `conv_transpose2d`'s `[C_in, C_out/G, KH, KW]` with `C_in = OC`), the
/// input's rows and columns that the forward's last window left unread
/// given back as output padding. `(h, w)`: the input's size.
fn input_grad_by_transposed_conv(
    g: &Tensor,
    ws: &Tensor,
    (h, w): (usize, usize),
    win: Window,
    groups: usize,
) -> Tensor {
    let unread =
        |size: usize, s: usize, p: usize, d: usize, k: usize| (size + 2 * p - d * (k - 1) - 1) % s;
    let (kh, kw) = (ws.shape()[2], ws.shape()[3]);
    let output_padding = (
        unread(h, win.stride.0, win.padding.0, win.dilation.0, kh),
        unread(w, win.stride.1, win.padding.1, win.dilation.1, kw),
    );
    g.conv_transpose2d(
        ws,
        None,
        win.stride,
        win.padding,
        output_padding,
        groups,
        win.dilation,
    )
}

/// Parts of the batch that a convolution's weight gradient sums
/// separately (a batched matmul, then a sum over the parts), for a batch
/// of `n`, `l` output positions and `k` weights per output channel: the
/// most (a matmul per sample, the most parallel) whose partial gradients
/// together hold no more than the output gradient they are computed from
/// (`parts * k <= n * l`), a divisor of `n`. Per sample, a deep layer's
/// partial gradients (ResNet's last stage: 576 weights, 16 positions) are
/// 36 times its output gradient; folded into one contraction, none.
fn weight_grad_parts(n: usize, l: usize, k: usize) -> usize {
    let most = (n * l / k.max(1)).clamp(1, n.max(1));
    (1..=most).rev().find(|p| n.is_multiple_of(*p)).unwrap_or(1)
}

/// Gradients of `conv2d(x, weight, bias)` in `groups` groups.
pub(crate) fn conv2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    win: Window,
    groups: usize,
    out: &Tensor,
) {
    let mut inputs = vec![x, weight];
    inputs.extend(bias);
    if !wants(&inputs) {
        return;
    }
    let (nx, nw) = (x.requires_grad(), weight.requires_grad());
    let nb = bias.is_some_and(|b| b.requires_grad());
    let has_bias = bias.is_some();
    let (xs, ws) = (save(x), save(weight));
    record("conv2d", out, &inputs, move |g| {
        let (n, c, h, w) = (xs.shape()[0], xs.shape()[1], xs.shape()[2], xs.shape()[3]);
        let (oc, kh, kw) = (ws.shape()[0], ws.shape()[2], ws.shape()[3]);
        let (oh, ow) = (g.shape()[2], g.shape()[3]);
        let (l, k) = (oh * ow, (c / groups) * kh * kw);
        // The weight gradient is recorded first so that it runs first: its
        // partial sums are released before the input gradient, as large
        // as the input, is written (the MNIST CNN's conv2: 4.7 MB of
        // partials beside a 5.8 MB input gradient at the step's peak).
        let gw = nw.then(|| {
            let (cols, _, _) = xs.windows("conv2d", win, 0.0);
            let gw = if groups == 1 {
                // The batch folds into the contraction in `parts` parts:
                // [P, OC, N/P*L] @ [P, N/P*L, C*KH*KW], summed over P.
                let p = weight_grad_parts(n, l, k);
                let gp =
                    g.reshape([p, n / p, oc, l])
                        .permute([0, 2, 1, 3])
                        .reshape([p, oc, n / p * l]);
                // [N, C, OH, OW, KH, KW] -> [P, N/P*OH*OW, C*KH*KW]
                let cols = cols.permute([0, 2, 3, 1, 4, 5]).reshape([p, n / p * l, k]);
                gp.matmul(&cols)
            } else {
                // The output gradient with the groups as a batch dim
                // ([N, G, OC/G, L]), a sample a part.
                let gg = g.reshape([n, groups, oc / groups, l]);
                // [N, C, OH, OW, KH, KW] -> [N, G, C/G*KH*KW, OH*OW], read transposed
                let cols = cols.permute([0, 1, 4, 5, 2, 3]).reshape([n, groups, k, l]);
                gg.matmul(&cols.transpose(-1, -2))
            };
            gw.sum([0], false).reshape([oc, c / groups, kh, kw])
        });
        let gx = nx.then(|| input_grad_by_transposed_conv(g, &ws, (h, w), win, groups));
        let mut grads = vec![gx, gw];
        if has_bias {
            grads.push(nb.then(|| g.sum([0, 2, 3], false)));
        }
        grads
    });
}

/// Gradient of `max_pool2d`: each window's output gradient goes to the
/// first maximum of the window (as PyTorch's indices do).
pub(crate) fn max_pool2d(x: &Tensor, win: Window, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let xs = save(x);
    record("max_pool2d", out, &[x], move |g| {
        let (h, w) = (xs.shape()[2], xs.shape()[3]);
        let (kh, kw) = win.kernel;
        let (windows, oh, ow) = xs.windows("max_pool2d", win, f32::NEG_INFINITY);
        let (n, c) = (xs.shape()[0], xs.shape()[1]);
        let flat = windows.reshape([n, c, oh, ow, kh * kw]);
        let first = flat.argmax(-1, true);
        if tiles_its_input(win) {
            return vec![Some(tiled_max_pool_grad(g, &first, (h, w), win.kernel))];
        }
        let slots = Tensor::arange(0, (kh * kw) as i32, 1, xs.device());
        // A select, not a product with a 0/1 mask: a NaN or infinite
        // gradient reaches the maximum only (`0 * NaN` would reach the
        // whole window).
        let contrib = (slots.eq(&first))
            .where_cond(g.unsqueeze(-1), 0.0f32)
            .reshape([n, c, oh, ow, kh, kw]);
        vec![Some(col2im(&contrib, h, w, win))]
    });
}

/// Whether the windows tile the input (stride equal to the kernel, no
/// padding or dilation): each input element is then in one window at
/// most, and its gradient is one read of that window's.
fn tiles_its_input(win: Window) -> bool {
    win.stride == win.kernel && win.padding == (0, 0) && win.dilation == (1, 1)
}

/// The input gradient of a max pool whose windows tile the input: at
/// each input element, its window's output gradient `g` where the
/// element is the window's first maximum (`first`, its slot in the
/// window, `[N, C, OH, OW, 1]`), else zero; zero past the last window.
/// One read of `g` an element, where the sum of a placement per window
/// slot (`col2im`) evaluated `g`, and what it is computed from (a
/// dropout's mask regenerated, in the MNIST CNN), once per slot: 170 ms
/// of a 1.0 s step on lavapipe. A NaN in `g` reaches only the maximum,
/// as PyTorch's scatter of `g` to the pooling indices does.
fn tiled_max_pool_grad(
    g: &Tensor,
    first: &Tensor,
    (h, w): (usize, usize),
    (kh, kw): (usize, usize),
) -> Tensor {
    let s = g.shape();
    let (n, c, oh, ow) = (s[0], s[1], s[2], s[3]);
    // Each output element broadcast over its window: [N, C, OH*KH, OW*KW].
    let up = |t: &Tensor| {
        (t.reshape([n, c, oh, ow]))
            .repeat_interleave(kh, Some(2))
            .repeat_interleave(kw, Some(3))
    };
    // Each input element's slot in its window.
    let dev = g.device();
    let rows = Tensor::arange(0, kh as i32, 1, dev).reshape([1, kh, 1, 1]);
    let cols = Tensor::arange(0, kw as i32, 1, dev).reshape([1, 1, 1, kw]);
    let slot = (rows * kw as i32 + cols)
        .expand([oh as isize, kh as isize, ow as isize, kw as isize])
        .reshape([oh * kh, ow * kw]);
    let grad = slot.eq(up(first)).where_cond(up(g), 0.0f32);
    grad.pad(
        &[(0, 0), (0, 0), (0, h - oh * kh), (0, w - ow * kw)],
        0.0f32,
    )
}

/// Gradient of `avg_pool2d` (padding counted in the average).
pub(crate) fn avg_pool2d(x: &Tensor, win: Window, out: &Tensor) {
    if !wants(&[x]) {
        return;
    }
    let (h, w) = (x.shape()[2], x.shape()[3]);
    record("avg_pool2d", out, &[x], move |g| {
        let (kh, kw) = win.kernel;
        let s = g.shape().to_vec();
        let contrib = (g * (1.0 / (kh * kw) as f32))
            .reshape([s[0], s[1], s[2], s[3], 1, 1])
            .expand([s[0], s[1], s[2], s[3], kh, kw]);
        vec![Some(col2im(&contrib, h, w, win))]
    });
}

#[cfg(test)]
mod tests {
    use super::weight_grad_parts;

    /// The partial weight gradients never outgrow the output gradient,
    /// and the parts divide the batch.
    #[test]
    fn weight_gradient_parts_hold_no_more_than_the_output_gradient() {
        // ResNet's first stage at batch 64: a part per sample (72 weights
        // a channel against 784 positions).
        assert_eq!(weight_grad_parts(64, 784, 72), 64);
        // Its last stage: one contraction over the whole batch.
        assert_eq!(weight_grad_parts(64, 16, 576), 1);
        // 64 * 100 / 576 = 11: the largest divisor of 64 below is 8.
        assert_eq!(weight_grad_parts(64, 100, 576), 8);
        for n in [1usize, 3, 7, 12, 64] {
            for (l, k) in [(1, 9), (16, 576), (784, 9), (49, 4608)] {
                let p = weight_grad_parts(n, l, k);
                assert!(n.is_multiple_of(p), "{p} parts of {n}");
                assert!(p == 1 || p * k <= n * l, "n {n} l {l} k {k}: {p}");
            }
        }
        assert_eq!(weight_grad_parts(0, 16, 9), 1);
    }
}
