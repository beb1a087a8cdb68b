#!/usr/bin/env python3
"""Writes tests/golden/ops.json: fixed inputs and PyTorch's outputs for every
op lazywgpu has, so the Rust tests can check semantics that the CPU
reference might get wrong the same way as the GPU.

Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/golden.py            # writes tests/golden/ops.json

Inputs are stored in the file too, so nothing has to be regenerated
identically on the Rust side. Non-finite floats are written as the strings
"nan", "inf" and "-inf" (JSON has no literal for them).

Besides the ordinary cases there are three families:

* `nan_*`: NaN, infinity and signed-zero inputs (unary ops on special
  values, binary ops over every pair of a special-value set, pow's special
  cases, reductions/softmax over rows holding NaN and inf, clamp, where).
* `edge_*`: 0-dim and zero-size (empty) tensors for every op, where
  PyTorch accepts them (a case PyTorch rejects is not written; the script
  prints which).
* gradients: every case whose op is differentiable in lazywgpu and whose
  output is float also stores `grad_weight` (a fixed tensor `w` of the
  output's shape, values k/16 so they are exact in f32) and `grads`: the
  gradient of `(out * w).sum()` with respect to each input, `null` for
  integer/bool inputs (and for a float input PyTorch gives no gradient).

Every case is recomputed from its inputs by `torch_run`, which mirrors the
Rust side's `run` (tests/golden.rs), so the two stay in step: a case built
with an explicit output checks that the mirror reproduces it.
"""
import json
import math
import os
import sys
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
torch.manual_seed(0)
# Gradient weights come from their own generator so that adding cases (or
# gradients) never shifts the inputs of the cases after them.
GW = torch.Generator().manual_seed(1234)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "ops.json")
cases = []
skipped = []
NAN, INF = float("nan"), float("inf")

UNARY = ["neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "floor", "ceil", "sign",
         "log", "sqrt", "rsqrt", "reciprocal", "round", "erf"]
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow}
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
# Ops with no gradient in lazywgpu (integer/bool outputs or inputs only).
NO_GRAD = set(COMPARE) | {"argmax", "argmin", "cast_i32", "one_hot", "sort_indices", "argsort",
                           "topk_indices", "any", "all", "logical_and", "logical_or", "logical_xor",
                           "logical_not"}


def enc(t):
    t = t.detach().cpu()
    dtype = {torch.float32: "f32", torch.int64: "i32", torch.int32: "i32", torch.bool: "bool"}[t.dtype]
    vals = []
    for v in t.flatten().tolist():
        if isinstance(v, float) and not math.isfinite(v):
            vals.append("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
        elif isinstance(v, bool):
            vals.append(1 if v else 0)
        else:
            vals.append(v)
    return {"shape": list(t.shape), "dtype": dtype, "data": vals}


def enc_arg(v):
    """An op argument, with non-finite floats as strings (like `enc`)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def torch_run(op, args, x):
    """PyTorch's version of tests/golden.rs's `run`."""
    keep = args.get("keepdim", False)
    if op in UNARY:
        return getattr(torch, op)(x[0])
    if op in BINARY:
        return BINARY[op](x[0], x[1])
    if op in COMPARE:
        return getattr(torch, op)(x[0], x[1])
    if op == "where":
        return torch.where(x[0], x[1], x[2])
    if op == "cast_i32":
        return x[0].to(torch.int32)
    if op == "clamp":
        return torch.clamp(x[0], args["min"], args["max"])
    if op in ("sum", "mean"):
        return getattr(x[0], op)(dim=args["axes"], keepdim=keep)
    if op == "logsumexp":
        return torch.logsumexp(x[0], dim=args["axes"], keepdim=keep)
    if op in ("var", "std"):
        return getattr(x[0], op)(dim=args["axes"], keepdim=keep, correction=args["correction"])
    if op == "max":
        return x[0].amax(dim=args["axes"], keepdim=keep)
    if op == "min":
        return x[0].amin(dim=args["axes"], keepdim=keep)
    if op == "prod":
        (axis,) = args["axes"]
        return x[0].prod(dim=axis, keepdim=keep)
    if op in ("argmax", "argmin"):
        return getattr(x[0], op)(dim=args["axis"], keepdim=keep)
    if op == "softmax":
        return torch.softmax(x[0], dim=args["axis"])
    if op == "log_softmax":
        return torch.log_softmax(x[0], dim=args["axis"])
    if op == "matmul":
        return x[0] @ x[1]
    if op == "matmul_t":
        return x[0].t() @ x[1]
    if op == "permute_reshape":
        return x[0].permute(2, 0, 1).reshape(10, 12)
    if op == "permute":
        return x[0].permute(args["dims"])
    if op == "reshape":
        return x[0].reshape(args["shape"])
    if op == "slice":
        idx = [slice(None)] * args["dim"] + [slice(args["start"], args["end"], args["step"])]
        return x[0][tuple(idx)]
    if op == "diagonal":
        return torch.diagonal(x[0], offset=args["offset"], dim1=args["dim1"], dim2=args["dim2"])
    if op == "select":
        return x[0].select(args["dim"], args["index"])
    if op == "pad":
        flat = []
        for lo, hi in reversed(args["pads"]):
            flat += [lo, hi]
        return F.pad(x[0], tuple(flat), value=args["value"])
    if op == "cat":
        return torch.cat(list(x), dim=args["axis"])
    if op == "stack":
        return torch.stack(list(x), dim=args["axis"])
    if op == "flip":
        return torch.flip(x[0], dims=args["dims"])
    if op == "gather":
        return torch.gather(x[0], args["axis"], x[1].long())
    if op == "index_select":
        return torch.index_select(x[0], args["axis"], x[1].long())
    if op == "scatter_add":
        return x[0].scatter_add(args["axis"], x[1].long(), x[2])
    if op == "index_add":
        return x[0].index_add(args["axis"], x[1].long(), x[2])
    if op == "one_hot":
        return F.one_hot(x[0].long(), args["num_classes"])
    if op == "masked_fill":
        return x[0].masked_fill(x[1], args["value"])
    if op == "conv2d":
        return F.conv2d(x[0], x[1], x[2], stride=tuple(args["stride"]), padding=tuple(args["padding"]),
                        dilation=tuple(args["dilation"]))
    if op == "max_pool2d":
        return F.max_pool2d(x[0], tuple(args["kernel"]), stride=tuple(args["stride"]), padding=tuple(args["padding"]))
    if op == "avg_pool2d":
        return F.avg_pool2d(x[0], tuple(args["kernel"]), stride=tuple(args["stride"]), padding=tuple(args["padding"]))
    if op == "gelu":
        return F.gelu(x[0])
    if op == "gelu_tanh":
        return F.gelu(x[0], approximate="tanh")
    if op == "silu":
        return F.silu(x[0])
    if op == "tril":
        return torch.tril(x[0], args["diagonal"])
    if op == "triu":
        return torch.triu(x[0], args["diagonal"])
    if op == "layer_norm":
        w = x[1] if len(x) > 1 else None
        b = x[2] if len(x) > 2 else None
        return F.layer_norm(x[0], args["normalized_shape"], w, b, args["eps"])
    if op == "embedding":
        return F.embedding(x[0].long(), x[1])
    if op == "cumsum":
        return torch.cumsum(x[0], dim=args["axis"])
    if op == "cumprod":
        return torch.cumprod(x[0], dim=args["axis"])
    if op in ("sort_values", "sort_indices"):
        v, i = torch.sort(x[0], dim=args["axis"], descending=args["descending"], stable=True)
        return v if op == "sort_values" else i
    if op == "argsort":
        return torch.argsort(x[0], dim=args["axis"], descending=args["descending"], stable=True)
    if op in ("topk_values", "topk_indices"):
        v, i = torch.topk(x[0], args["k"], dim=args["axis"], largest=args["largest"], sorted=True)
        return v if op == "topk_values" else i
    if op == "rms_norm":
        w = x[1] if len(x) > 1 else None
        return F.rms_norm(x[0], args["normalized_shape"], w, args.get("eps"))
    if op in ("any", "all"):
        return getattr(x[0], op)(dim=args["axis"], keepdim=args["keepdim"])
    if op == "repeat_interleave":
        return torch.repeat_interleave(x[0], args["repeats"], dim=args.get("axis"))
    if op in ("logical_and", "logical_or", "logical_xor"):
        return getattr(torch, op)(x[0], x[1])
    if op == "logical_not":
        return torch.logical_not(x[0])
    if op == "sdpa":
        mask = x[3] if len(x) > 3 else None
        return F.scaled_dot_product_attention(x[0], x[1], x[2], attn_mask=mask, is_causal=args["causal"])
    raise ValueError(f"no mirror for op {op}")


def grad_weight(shape):
    """A fixed weight of `shape`: nonzero multiples of 1/16 in [-2, 2]."""
    k = torch.randint(1, 33, tuple(shape), generator=GW).float() / 16
    s = torch.randint(0, 2, tuple(shape), generator=GW).float() * 2 - 1
    return k * s


def gradients(op, args, inputs, out):
    """`grad_weight` and the gradients of `(out * w).sum()` per input, or None."""
    if op in NO_GRAD or out.dtype != torch.float32:
        return None
    xs = [i.detach().clone().requires_grad_(i.is_floating_point()) for i in inputs]
    y = torch_run(op, args, xs)
    if not y.requires_grad:
        return None
    w = grad_weight(y.shape)
    (y * w).sum().backward()
    grads = [enc(x.grad) if x.is_floating_point() and x.grad is not None else None for x in xs]
    return enc(w), grads


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        torch.nan_to_num(a.float(), nan=12345.0), torch.nan_to_num(b.float(), nan=12345.0))


def case(name, op, inputs, out=None, no_grad=False, **args):
    """Writes one case; `out` (if given) must be what `torch_run` gives.
    A case PyTorch rejects (it raises) is skipped, and listed at the end.
    `no_grad`: store no gradient (where PyTorch's depends on a choice it
    leaves unspecified, such as which of tied elements `topk` returns)."""
    assert all(c["name"] != name for c in cases), f"duplicate case {name}"
    try:
        got = torch_run(op, args, inputs)
        if out is not None:
            assert same(got, out), f"{name}: torch_run disagrees with the stored output"
        out = got
    except AssertionError:
        raise
    except Exception as e:  # PyTorch rejects this case: leave it out.
        if out is not None:
            raise
        skipped.append(f"{name}: {str(e).splitlines()[0][:100]}")
        return
    entry = {"name": name, "op": op, "args": {k: enc_arg(v) for k, v in args.items()}, "inputs": [enc(i) for i in inputs], "expected": enc(out)}
    try:
        g = None if no_grad else gradients(op, args, inputs, out)
    except Exception as e:  # PyTorch has no gradient here: forward only.
        skipped.append(f"{name} (gradient only): {str(e).splitlines()[0][:100]}")
        g = None
    if g is not None:
        entry["grad_weight"], entry["grads"] = g
    cases.append(entry)


def rnd(*shape, scale=2.0):
    return (torch.rand(*shape) * 2 - 1) * scale


x = rnd(3, 4)
pos = torch.rand(3, 4) * 3 + 0.1
for name in ["neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "floor", "ceil", "sign"]:
    case(name, name, [x], getattr(torch, name)(x))
for name in ["log", "sqrt", "rsqrt", "reciprocal"]:
    case(name, name, [pos], getattr(torch, name)(pos))
ties = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 3.7, -2.2, 0.0])
case("round_half_even", "round", [ties], torch.round(ties))

a = rnd(2, 3, 4)
b = rnd(3, 1)
for name, fn in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
                 ("maximum", torch.maximum), ("minimum", torch.minimum)]:
    case(name + "_broadcast", name, [a, b], fn(a, b))
base = torch.tensor([-2.0, -2.0, 0.0, 2.0, 1.5, 0.0, 4.0, -8.0])
expo = torch.tensor([2.0, 3.0, 0.0, -1.0, 2.5, -2.0, 0.5, 1.0 / 3.0])
case("pow_conventions", "pow", [base, expo], torch.pow(base, expo))
for name in ["eq", "ne", "lt", "le", "gt", "ge"]:
    p = torch.tensor([1.0, 2.0, 3.0, 4.0])
    q = torch.tensor([2.0, 2.0, 2.0, 5.0])
    case(name, name, [p, q], getattr(torch, name)(p, q))
cond = a > 0
case("where", "where", [cond, a, b], torch.where(cond, a, b))
f = torch.tensor([-2.7, -0.5, 0.0, 0.5, 2.7, 100.9])
case("cast_f32_i32", "cast_i32", [f], f.to(torch.int32))

r = rnd(3, 5, 4)
for axes, keep in [((1,), False), ((0, 2), True), ((2,), False), ((0, 1, 2), False)]:
    case(f"sum_{axes}_{keep}", "sum", [r], r.sum(dim=axes, keepdim=keep), axes=list(axes), keepdim=keep)
    case(f"mean_{axes}_{keep}", "mean", [r], r.mean(dim=axes, keepdim=keep), axes=list(axes), keepdim=keep)
    case(f"logsumexp_{axes}_{keep}", "logsumexp", [r], torch.logsumexp(r, dim=axes, keepdim=keep), axes=list(axes), keepdim=keep)
    for corr in [0, 1]:
        case(f"var_{axes}_{keep}_{corr}", "var", [r], r.var(dim=axes, keepdim=keep, correction=corr), axes=list(axes), keepdim=keep, correction=corr)
        case(f"std_{axes}_{keep}_{corr}", "std", [r], r.std(dim=axes, keepdim=keep, correction=corr), axes=list(axes), keepdim=keep, correction=corr)
for axis in [0, 1, 2]:
    case(f"max_{axis}", "max", [r], r.amax(dim=axis), axes=[axis], keepdim=False)
    case(f"min_{axis}", "min", [r], r.amin(dim=axis), axes=[axis], keepdim=False)
    case(f"prod_{axis}", "prod", [r * 0.5 + 1], (r * 0.5 + 1).prod(dim=axis), axes=[axis], keepdim=False)
    tied = torch.round(r * 2)
    case(f"argmax_{axis}", "argmax", [tied], tied.argmax(dim=axis), axis=axis, keepdim=False)
    case(f"argmin_{axis}", "argmin", [tied], tied.argmin(dim=axis), axis=axis, keepdim=False)
    case(f"softmax_{axis}", "softmax", [r * 3], torch.softmax(r * 3, dim=axis), axis=axis)
    case(f"log_softmax_{axis}", "log_softmax", [r * 3], torch.log_softmax(r * 3, dim=axis), axis=axis)

m1, m2 = rnd(5, 7), rnd(7, 3)
case("matmul_2d", "matmul", [m1, m2], m1 @ m2)
bm1, bm2 = rnd(2, 1, 4, 6), rnd(3, 6, 5)
case("matmul_batched_broadcast", "matmul", [bm1, bm2], bm1 @ bm2)
v = rnd(7)
case("matmul_vec_mat", "matmul", [v, m2], v @ m2)
case("matmul_mat_vec", "matmul", [m1, v], m1 @ v)
case("matmul_dot", "matmul", [v, v], v @ v)
case("matmul_transposed_view", "matmul_t", [m2, m2], m2.t() @ m2)

g = rnd(4, 6, 5)
case("permute_reshape", "permute_reshape", [g], g.permute(2, 0, 1).reshape(10, 12))
case("slice_step", "slice", [g], g[:, 1:6:2, :], dim=1, start=1, end=6, step=2)
case("diagonal", "diagonal", [g], torch.diagonal(g, offset=1, dim1=1, dim2=2), offset=1, dim1=1, dim2=2)
case("select", "select", [g], g.select(2, 3), dim=2, index=3)

p2 = rnd(2, 3, 4)
case("pad_last_two", "pad", [p2], F.pad(p2, (2, 1, 1, 0), value=-1.5), pads=[[1, 0], [2, 1]], value=-1.5)
c1, c2, c3 = rnd(2, 3), rnd(2, 1), rnd(2, 2)
case("cat_axis1", "cat", [c1, c2, c3], torch.cat([c1, c2, c3], dim=1), axis=1)
s1, s2 = rnd(3, 2), rnd(3, 2)
case("stack_axis1", "stack", [s1, s2], torch.stack([s1, s2], dim=1), axis=1)
case("flip", "flip", [g], torch.flip(g, dims=[0, 2]), dims=[0, 2])
src = rnd(4, 5)
gidx = torch.tensor([[0, 3, 1, 1, 2], [3, 3, 0, 2, 1]], dtype=torch.int32)
case("gather_axis0", "gather", [src, gidx], torch.gather(src, 0, gidx.long()), axis=0)
sel = torch.tensor([4, 0, 2, 2], dtype=torch.int32)
case("index_select_axis1", "index_select", [src, sel], torch.index_select(src, 1, sel.long()), axis=1)
base = rnd(3, 5)
sidx = torch.tensor([[0, 1, 2, 0, 0], [2, 0, 1, 1, 2]], dtype=torch.int32)
ssrc = rnd(2, 5)
case("scatter_add_axis0", "scatter_add", [base, sidx, ssrc], base.scatter_add(0, sidx.long(), ssrc), axis=0)
aidx = torch.tensor([1, 4, 1], dtype=torch.int32)
asrc = rnd(3, 3)
case("index_add_axis1", "index_add", [base, aidx, asrc], base.index_add(1, aidx.long(), asrc), axis=1)
labels = torch.tensor([3, 0, 1, 3], dtype=torch.int32)
case("one_hot", "one_hot", [labels], F.one_hot(labels.long(), 5), num_classes=5)
mask = p2 > 0.5
case("masked_fill", "masked_fill", [p2, mask], p2.masked_fill(mask, 9.0), value=9.0)
img = rnd(2, 3, 9, 8)
wt = rnd(4, 3, 3, 2)
bias = rnd(4)
case("conv2d_basic", "conv2d", [img, wt, bias], F.conv2d(img, wt, bias), stride=[1, 1], padding=[0, 0], dilation=[1, 1])
case("conv2d_stride_pad_dil", "conv2d", [img, wt, bias], F.conv2d(img, wt, bias, stride=(2, 1), padding=(1, 2), dilation=(2, 1)), stride=[2, 1], padding=[1, 2], dilation=[2, 1])
case("max_pool2d", "max_pool2d", [img], F.max_pool2d(img, (3, 2), stride=(2, 2), padding=(1, 1)), kernel=[3, 2], stride=[2, 2], padding=[1, 1])
case("avg_pool2d", "avg_pool2d", [img], F.avg_pool2d(img, (2, 2), stride=(2, 2)), kernel=[2, 2], stride=[2, 2], padding=[0, 0])


# ---------------------------------------------------------------------------
# NaN, infinity and signed zero (`nan_*`).

special = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 1.5, -2.5, 0.5, -0.5, 2.5])
for name in UNARY:
    case(f"nan_{name}", name, [special])
sv = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 2.0, -2.0])
for name in list(BINARY) + COMPARE:
    # Every ordered pair of special values: [7, 1] against [1, 7].
    case(f"nan_{name}_pairs", name, [sv.reshape(7, 1), sv.reshape(1, 7)])
# pow's special cases: signed zero, inf and nan bases and exponents,
# negative bases with integer and non-integer exponents.
pbase = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, INF, -INF, NAN, -8.0])
pexp = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -2.0, -3.0, 0.5, -0.5, 1.0 / 3.0, 2.5, INF, -INF, NAN])
case("nan_pow_table", "pow", [pbase.reshape(-1, 1), pexp.reshape(1, -1)])
# Reductions over rows that hold NaN and infinities:
#   row 0: a NaN in the middle; row 1: +inf and -inf (sum is nan);
#   row 2: all -inf; row 3: +inf twice (tie); row 4: NaN first and again;
#   row 5: finite with one -inf.
rd = torch.tensor([
    [1.0, 3.0, NAN, -1.0],
    [INF, 2.0, -INF, 0.0],
    [-INF, -INF, -INF, -INF],
    [INF, 1.0, 2.0, INF],
    [NAN, 2.0, NAN, 5.0],
    [-1.0, -INF, 0.5, 2.0],
])
for axis in [1, 0]:
    for name in ["sum", "mean", "logsumexp", "max", "min", "prod"]:
        case(f"nan_{name}_{axis}", name, [rd], axes=[axis], keepdim=False)
    for name in ["var", "std"]:
        for corr in [0, 1]:
            case(f"nan_{name}_{axis}_{corr}", name, [rd], axes=[axis], keepdim=False, correction=corr)
    for name in ["argmax", "argmin", "softmax", "log_softmax"]:
        extra = {"keepdim": False} if name.startswith("arg") else {}
        case(f"nan_{name}_{axis}", name, [rd], axis=axis, **extra)
case("nan_sum_all", "sum", [rd], axes=[0, 1], keepdim=False)
case("nan_max_all_inf", "max", [rd[1:4]], axes=[0, 1], keepdim=False)
# Infinities without NaN: argmax/argmin ties on +-inf pick the first.
ri = torch.tensor([[1.0, INF, INF, -INF], [-INF, -INF, 0.0, -INF]])
case("nan_argmax_inf_ties", "argmax", [ri], axis=1, keepdim=False)
case("nan_argmin_inf_ties", "argmin", [ri], axis=1, keepdim=False)
case("nan_softmax_inf", "softmax", [ri], axis=1)
case("nan_log_softmax_inf", "log_softmax", [ri], axis=1)
# clamp: NaN stays NaN; bounds hit exactly; min > max gives max.
case("nan_clamp", "clamp", [special], min=-2.5, max=1.5)
case("nan_clamp_point", "clamp", [special], min=0.0, max=0.0)
case("nan_clamp_min_gt_max", "clamp", [special], min=2.0, max=1.0)
case("clamp", "clamp", [rnd(3, 4)], min=-0.5, max=0.75)
wcond = torch.tensor([True, False, True, False, True, False, True])
wa = torch.tensor([NAN, 1.0, INF, NAN, -0.0, 2.0, NAN])
wb = torch.tensor([3.0, NAN, 4.0, -INF, 0.0, NAN, 5.0])
case("nan_where", "where", [wcond, wa, wb])
case("nan_masked_fill", "masked_fill", [wa, wcond], value=NAN)
ma = torch.tensor([[1.0, NAN], [INF, 0.0], [2.0, 3.0], [-INF, 1.0]])
mb = torch.tensor([[0.0, 1.0, 2.0], [1.0, INF, 0.0]])
case("nan_matmul", "matmul", [ma, mb])
pimg = torch.tensor([[1.0, NAN, 2.0, 3.0], [0.0, 1.0, -INF, -INF], [INF, 2.0, -INF, -INF], [4.0, 5.0, 6.0, NAN]]).reshape(1, 1, 4, 4)
case("nan_max_pool2d", "max_pool2d", [pimg], kernel=[2, 2], stride=[2, 2], padding=[0, 0])
case("nan_avg_pool2d", "avg_pool2d", [pimg], kernel=[2, 2], stride=[2, 2], padding=[0, 0])
case("nan_cat", "cat", [special[:3], special[3:]], axis=0)
case("nan_gather", "gather", [special, torch.tensor([0, 0, 1, 2, 4], dtype=torch.int32)], axis=0)

# ---------------------------------------------------------------------------
# Scans, sorts and the decoder's ops (issue 27): ties, NaN, infinities,
# zeros in products, k = 0 and k = n, every axis, 0-dim and empty inputs.
scan_x = rnd(3, 5, 4)
for ax in [0, 1, 2, -1]:
    case(f"cumsum_{ax}", "cumsum", [scan_x], axis=ax)
    case(f"cumprod_{ax}", "cumprod", [scan_x], axis=ax)
zeros_x = torch.tensor([[0.5, 0.0, 2.0, -1.5, 0.0], [1.5, -0.5, 2.0, 3.0, 0.0], [0.0, 1.0, 1.0, 1.0, 2.0]])
case("cumprod_zeros", "cumprod", [zeros_x], axis=1)
case("nan_cumsum", "cumsum", [torch.tensor([1.0, NAN, 2.0, INF, -INF, 3.0])], axis=0)
case("nan_cumprod", "cumprod", [torch.tensor([1.0, 2.0, INF, 0.0, NAN, 3.0])], axis=0)
case("cumsum_int", "cumsum", [torch.tensor([[3, -1, 4], [1, 5, -9]], dtype=torch.int32)], axis=1)
sort_ties = torch.tensor([[2.0, -1.0, 2.0, 0.0, -1.0, 2.0, 5.0], [0.0, -0.0, 1.0, 1.0, 1.0, -3.0, 0.0]])
sort_nan = torch.tensor([[1.0, NAN, -INF, 3.0, NAN, INF, 0.0, -2.0]])
sort_long = torch.randint(-20, 20, (3, 300)).float()
for tag, t in [("ties", sort_ties), ("nan", sort_nan), ("long", sort_long), ("3d", rnd(2, 3, 4))]:
    for desc in [False, True]:
        for ax in range(t.dim()):
            for op in ["sort_values", "sort_indices", "argsort"]:
                case(f"{op}_{tag}_{ax}_{int(desc)}", op, [t], axis=ax, descending=desc)
# PyTorch's topk returns tied elements in an unspecified order (not the
# stable one): with ties only the values are compared (not the indices or
# the gradient, which depend on that order); distinct values check all.
sort_distinct = torch.randperm(300).float().reshape(2, 150) - 75.0
sort_distinct_nan = torch.tensor([[1.0, NAN, -INF, 3.0, INF, 0.0, -2.0]])
for tag, t, ties in [("ties", sort_ties, True), ("nan", sort_nan, True), ("long", sort_long, True),
                     ("distinct", sort_distinct, False), ("distinct_nan", sort_distinct_nan, False)]:
    n = t.shape[-1]
    for k in sorted({0, 1, 3, n}):
        for largest in [True, False]:
            case(f"topk_values_{tag}_{k}_{int(largest)}", "topk_values", [t], no_grad=ties, k=k, axis=-1,
                 largest=largest)
            if not ties:
                case(f"topk_indices_{tag}_{k}_{int(largest)}", "topk_indices", [t], k=k, axis=-1, largest=largest)
case("sort_values_int", "sort_values", [torch.tensor([3, -1, 3, 0, 7], dtype=torch.int32)], axis=0, descending=True)
rms_x = rnd(4, 3, 8)
case("rms_norm", "rms_norm", [rms_x, rnd(8)], normalized_shape=[8], eps=1e-6)
case("rms_norm_2d", "rms_norm", [rms_x, rnd(3, 8)], normalized_shape=[3, 8], eps=1e-5)
case("rms_norm_default_eps", "rms_norm", [rms_x], normalized_shape=[8])
case("nan_rms_norm", "rms_norm", [torch.tensor([[1.0, NAN, 2.0], [0.0, 0.0, 0.0], [INF, 1.0, 2.0]])], normalized_shape=[3], eps=1e-5)
truth = torch.tensor([[0.0, NAN, 0.0], [0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])
for op in ["any", "all"]:
    for ax in [0, 1]:
        for keep in [False, True]:
            case(f"{op}_{ax}_{int(keep)}", op, [truth], axis=ax, keepdim=keep)
logic_b = torch.tensor([[True, False, True], [False, False, True], [True, True, False]])
for op in ["logical_and", "logical_or", "logical_xor"]:
    case(op, op, [truth, logic_b])
case("logical_not", "logical_not", [truth])
ri = rnd(2, 3)
case("repeat_interleave_0", "repeat_interleave", [ri], repeats=2, axis=0)
case("repeat_interleave_1", "repeat_interleave", [ri], repeats=3, axis=1)
case("repeat_interleave_flat", "repeat_interleave", [ri], repeats=2)
for tag, shape in [("0d", ()), ("empty", (0,)), ("empty_2x0", (2, 0))]:
    t = torch.full(shape, 1.5)
    for ax in ([0, -1] if shape == () else [0, -1]):
        case(f"edge_cumprod_{tag}_{ax}", "cumprod", [t], axis=ax)
        for op in ["sort_values", "sort_indices", "argsort"]:
            case(f"edge_{op}_{tag}_{ax}", op, [t], axis=ax, descending=False)
    case(f"edge_topk_values_{tag}_0", "topk_values", [t], k=0, axis=-1, largest=True)
    case(f"edge_rms_norm_{tag}", "rms_norm", [t], normalized_shape=list(shape[-1:]), eps=1e-5)

# 0-dim and empty tensors (`edge_*`). A case PyTorch rejects is skipped.

s0 = torch.tensor(1.5)
shapes = {"0d": (), "empty": (0,), "empty_2x0": (2, 0)}
for name in UNARY:
    for tag, shape in shapes.items():
        case(f"edge_{name}_{tag}", name, [torch.full(shape, 1.5)])
bin_pairs = {
    "0d": (torch.tensor(1.5), torch.tensor(-0.5)),
    "0d_vec": (torch.tensor(1.5), torch.tensor([1.0, -2.0, 3.0])),
    "empty": (torch.zeros(0), torch.zeros(0)),
    "empty_bcast": (rnd(2, 1), torch.zeros(0)),
    "empty_0d": (torch.zeros(0, 3), torch.tensor(2.0)),
}
for name in list(BINARY) + COMPARE:
    for tag, (p, q) in bin_pairs.items():
        case(f"edge_{name}_{tag}", name, [p, q])
case("edge_where_0d", "where", [torch.tensor(True), torch.tensor(1.5), torch.tensor(-2.0)])
case("edge_where_0d_cond", "where", [torch.tensor(False), rnd(2, 3), rnd(3)])
case("edge_where_empty", "where", [torch.zeros(2, 0, dtype=torch.bool), torch.zeros(2, 0), torch.zeros(1)])
case("edge_cast_i32_0d", "cast_i32", [torch.tensor(-2.7)])
case("edge_cast_i32_empty", "cast_i32", [torch.zeros(0, 3)])
case("edge_clamp_0d", "clamp", [torch.tensor(1.5)], min=-1.0, max=1.0)
case("edge_clamp_empty", "clamp", [torch.zeros(2, 0)], min=-1.0, max=1.0)

# Reductions on a 0-dim tensor: dim 0 and dim -1 are allowed.
for ax in [0, -1]:
    for keep in [False, True]:
        for name in ["sum", "mean", "logsumexp", "max", "min", "prod"]:
            case(f"edge_{name}_0d_{ax}_{keep}", name, [s0], axes=[ax], keepdim=keep)
        for name in ["var", "std"]:
            for corr in [0, 1]:
                case(f"edge_{name}_0d_{ax}_{keep}_{corr}", name, [s0], axes=[ax], keepdim=keep, correction=corr)
        for name in ["argmax", "argmin"]:
            case(f"edge_{name}_0d_{ax}_{keep}", name, [s0], axis=ax, keepdim=keep)
    for name in ["softmax", "log_softmax"]:
        case(f"edge_{name}_0d_{ax}", name, [s0], axis=ax)
# Reductions over an empty dim (sum 0, prod 1, mean/var/std nan,
# logsumexp -inf; max/min/argmax/argmin are errors and get skipped) and
# over a non-empty dim of an empty tensor (an empty result).
empties = {"2x0": torch.zeros(2, 0), "0x3": torch.zeros(0, 3), "0": torch.zeros(0)}
for tag, e in empties.items():
    for ax in range(e.dim()):
        for keep in [False, True]:
            for name in ["sum", "mean", "logsumexp", "max", "min", "prod"]:
                case(f"edge_{name}_{tag}_{ax}_{keep}", name, [e], axes=[ax], keepdim=keep)
            for name in ["var", "std"]:
                case(f"edge_{name}_{tag}_{ax}_{keep}", name, [e], axes=[ax], keepdim=keep, correction=1)
            for name in ["argmax", "argmin"]:
                case(f"edge_{name}_{tag}_{ax}_{keep}", name, [e], axis=ax, keepdim=keep)
        for name in ["softmax", "log_softmax"]:
            case(f"edge_{name}_{tag}_{ax}", name, [e], axis=ax)
    case(f"edge_sum_{tag}_last", "sum", [e], axes=[-1], keepdim=False)
for name in ["sum", "mean", "logsumexp", "var", "std"]:
    extra = {"correction": 0} if name in ("var", "std") else {}
    case(f"edge_{name}_0x3_all", name, [empties["0x3"]], axes=[0, 1], keepdim=False, **extra)

# matmul with an empty contraction (zeros) or an empty output.
for tag, (p, q) in {
    "k0": (rnd(3, 0), rnd(0, 4)),
    "m0": (rnd(0, 5), rnd(5, 3)),
    "n0": (rnd(3, 5), rnd(5, 0)),
    "dot_empty": (rnd(0), rnd(0)),
    "vec_mat_k0": (rnd(0), rnd(0, 4)),
    "mat_vec_k0": (rnd(3, 0), rnd(0)),
    "batch0": (rnd(0, 2, 3), rnd(3, 4)),
    "batched_k0": (rnd(2, 3, 0), rnd(2, 0, 4)),
    "0d": (torch.tensor(1.5), torch.tensor(2.0)),
}.items():
    case(f"edge_matmul_{tag}", "matmul", [p, q])
case("edge_matmul_t_k0", "matmul_t", [rnd(0, 3), rnd(0, 3)])

# Movement and indexing.
case("edge_permute_0d", "permute", [s0], dims=[])
case("edge_permute_empty", "permute", [torch.zeros(2, 0, 3)], dims=[2, 0, 1])
case("edge_reshape_0d_to_1", "reshape", [s0], shape=[1])
case("edge_reshape_1x1_to_0d", "reshape", [torch.tensor([[2.5]])], shape=[])
case("edge_reshape_empty", "reshape", [torch.zeros(2, 0, 3)], shape=[0, 5])
case("edge_slice_empty_input", "slice", [torch.zeros(2, 0, 3)], dim=2, start=1, end=3, step=1)
case("edge_slice_to_empty", "slice", [rnd(4, 5)], dim=1, start=2, end=2, step=1)
case("edge_slice_empty_1d", "slice", [torch.zeros(0)], dim=0, start=0, end=0, step=2)
case("edge_diagonal_empty", "diagonal", [torch.zeros(0, 3)], offset=0, dim1=0, dim2=1)
case("edge_diagonal_offset_past_end", "diagonal", [rnd(3, 3)], offset=5, dim1=0, dim2=1)
case("edge_diagonal_empty_batch", "diagonal", [torch.zeros(2, 0, 3)], offset=0, dim1=1, dim2=2)
case("edge_select_to_0d", "select", [torch.tensor([1.0, 2.5, -3.0])], dim=0, index=1)
case("edge_select_empty", "select", [torch.zeros(2, 0)], dim=0, index=1)
case("edge_select_empty_dim1", "select", [torch.zeros(0, 3)], dim=1, index=2)
case("edge_pad_empty_1d", "pad", [torch.zeros(0)], pads=[[1, 2]], value=0.5)
case("edge_pad_empty_2x0", "pad", [torch.zeros(2, 0)], pads=[[0, 0], [1, 1]], value=-1.0)
case("edge_pad_empty_0x3", "pad", [torch.zeros(0, 3)], pads=[[1, 1], [0, 0]], value=2.0)
case("edge_pad_0d", "pad", [s0], pads=[], value=0.0)
case("edge_cat_empty_part", "cat", [rnd(2, 3), torch.zeros(2, 0), rnd(2, 1)], axis=1)
case("edge_cat_empty_rows", "cat", [torch.zeros(0, 3), rnd(2, 3)], axis=0)
case("edge_cat_all_empty", "cat", [torch.zeros(0), torch.zeros(0)], axis=0)
case("edge_stack_0d", "stack", [torch.tensor(1.5), torch.tensor(-2.0)], axis=0)
case("edge_stack_0d_last", "stack", [torch.tensor(1.5), torch.tensor(-2.0)], axis=-1)
case("edge_stack_empty", "stack", [torch.zeros(0), torch.zeros(0)], axis=1)
case("edge_flip_0d", "flip", [s0], dims=[0])
case("edge_flip_empty", "flip", [torch.zeros(2, 0)], dims=[0, 1])
i0 = torch.tensor(0, dtype=torch.int32)
case("edge_gather_0d", "gather", [s0, i0], axis=0)
case("edge_gather_empty_index", "gather", [rnd(4, 5), torch.zeros(0, 5, dtype=torch.int32)], axis=0)
case("edge_gather_empty", "gather", [torch.zeros(2, 0), torch.zeros(2, 0, dtype=torch.int32)], axis=1)
case("edge_index_select_0d", "index_select", [s0, torch.tensor([0], dtype=torch.int32)], axis=0)
case("edge_index_select_0d_index", "index_select", [rnd(4), torch.tensor(2, dtype=torch.int32)], axis=0)
case("edge_index_select_empty_index", "index_select", [rnd(4, 5), torch.zeros(0, dtype=torch.int32)], axis=1)
case("edge_index_select_empty_src", "index_select", [torch.zeros(0, 3), torch.tensor([2, 0], dtype=torch.int32)], axis=1)
case("edge_scatter_add_empty", "scatter_add", [rnd(3, 5), torch.zeros(0, 5, dtype=torch.int32), torch.zeros(0, 5)], axis=0)
case("edge_scatter_add_0d", "scatter_add", [s0, i0, torch.tensor(2.0)], axis=0)
case("edge_index_add_empty", "index_add", [rnd(3, 5), torch.zeros(0, dtype=torch.int32), torch.zeros(3, 0)], axis=1)
case("edge_index_add_0d", "index_add", [s0, torch.tensor([0], dtype=torch.int32), torch.tensor(2.0)], axis=0)
case("edge_one_hot_empty", "one_hot", [torch.zeros(0, dtype=torch.int32)], num_classes=5)
case("edge_one_hot_0d", "one_hot", [torch.tensor(2, dtype=torch.int32)], num_classes=5)
case("edge_masked_fill_0d", "masked_fill", [s0, torch.tensor(True)], value=9.0)
case("edge_masked_fill_0d_mask", "masked_fill", [rnd(2, 3), torch.tensor(True)], value=9.0)
case("edge_masked_fill_empty", "masked_fill", [torch.zeros(2, 0), torch.zeros(2, 0, dtype=torch.bool)], value=9.0)
# conv2d and pools: PyTorch accepts a batch of 0 (and rejects 0 output
# channels or 0 channels in the pools). It also "accepts" 0 input channels
# but then returns 0 output channels whatever the weight says (the bias
# dropped), a quirk left out here.
cw, cb = rnd(4, 3, 3, 2), rnd(4)
case("edge_conv2d_batch0", "conv2d", [torch.zeros(0, 3, 5, 5), cw, cb], stride=[1, 1], padding=[0, 0], dilation=[1, 1])
case("edge_conv2d_out_channels0", "conv2d", [rnd(2, 3, 5, 5), torch.zeros(0, 3, 3, 2), torch.zeros(0)], stride=[1, 1], padding=[0, 0], dilation=[1, 1])
case("edge_max_pool2d_batch0", "max_pool2d", [torch.zeros(0, 3, 4, 4)], kernel=[2, 2], stride=[2, 2], padding=[0, 0])
case("edge_max_pool2d_channels0", "max_pool2d", [torch.zeros(2, 0, 4, 4)], kernel=[2, 2], stride=[2, 2], padding=[0, 0])
case("edge_avg_pool2d_batch0", "avg_pool2d", [torch.zeros(0, 3, 4, 4)], kernel=[2, 2], stride=[2, 2], padding=[0, 0])
case("edge_avg_pool2d_channels0", "avg_pool2d", [torch.zeros(2, 0, 4, 4)], kernel=[2, 2], stride=[2, 2], padding=[0, 0])
# ---------------------------------------------------------------------------
# Transformer ops (`tf_*`): erf and the activations built on it, triangles,
# layer norm, embedding and attention (causal, masked, lengths that are not
# multiples of any tile size).
tf_gen = torch.Generator().manual_seed(77)


def trnd(*shape, scale=2.0):
    return (torch.rand(*shape, generator=tf_gen) * 2 - 1) * scale


erf_points = torch.tensor([0.0, -0.0, 1e-7, -1e-5, 1e-3, 0.3, -0.49, 0.5, 0.51, -1.0, 1.7, 2.5, -3.9, 4.5, 6.0, -10.0])
case("tf_erf_points", "erf", [erf_points])
case("tf_erf", "erf", [trnd(4, 9, scale=4.0)])
for name in ["gelu", "gelu_tanh", "silu"]:
    case(f"tf_{name}", name, [trnd(3, 7, scale=5.0)])
    # PyTorch's CPU kernel gives gelu(+inf) = NaN (its value is +inf,
    # which lazywgpu returns), so +inf is left out of the exact form.
    special_in = [NAN, -INF, 0.0, -0.0, 1.0] + ([] if name == "gelu" else [INF])
    case(f"tf_{name}_nan", name, [torch.tensor(special_in)])
for name in ["tril", "triu"]:
    for d in [-1, 0, 2]:
        case(f"tf_{name}_{d}", name, [trnd(2, 3, 5)], diagonal=d)
    case(f"tf_{name}_tall", name, [trnd(6, 4)], diagonal=0)
    case(f"tf_{name}_empty", name, [torch.zeros(2, 0, 3)], diagonal=0)
ln_x = trnd(2, 3, 8)
case("tf_layer_norm_affine", "layer_norm", [ln_x, trnd(8) + 1, trnd(8)], normalized_shape=[8], eps=1e-5)
case("tf_layer_norm_weight_only", "layer_norm", [ln_x, trnd(8) + 1], normalized_shape=[8], eps=1e-5)
case("tf_layer_norm_plain", "layer_norm", [ln_x], normalized_shape=[8], eps=1e-5)
case("tf_layer_norm_2d", "layer_norm", [ln_x, trnd(3, 8) + 1, trnd(3, 8)], normalized_shape=[3, 8], eps=1e-3)
case("tf_layer_norm_constant_row", "layer_norm", [torch.full((2, 5), 3.0)], normalized_shape=[5], eps=1e-5)
emb_ids = torch.tensor([[0, 3, 3], [6, 1, 0]], dtype=torch.int32)
case("tf_embedding", "embedding", [emb_ids, trnd(7, 5)])
case("tf_embedding_1d", "embedding", [torch.tensor([2, 2, 2, 4], dtype=torch.int32), trnd(5, 3)])
for causal in [False, True]:
    tag = "causal" if causal else "full"
    case(f"tf_sdpa_{tag}_5x7", "sdpa", [trnd(2, 2, 5, 4), trnd(2, 2, 7, 4), trnd(2, 2, 7, 3)], causal=causal)
    case(f"tf_sdpa_{tag}_square_13", "sdpa", [trnd(1, 3, 13, 8), trnd(1, 3, 13, 8), trnd(1, 3, 13, 8)], causal=causal)
    case(f"tf_sdpa_{tag}_70", "sdpa", [trnd(1, 70, 6), trnd(1, 70, 6), trnd(1, 70, 5)], causal=causal)
keep = torch.rand(4, 6, generator=tf_gen) > 0.3
keep[:, 0] = True
case("tf_sdpa_bool_mask", "sdpa", [trnd(2, 4, 3), trnd(2, 6, 3), trnd(2, 6, 2), keep], causal=False)
case("tf_sdpa_float_mask", "sdpa", [trnd(2, 4, 3), trnd(2, 6, 3), trnd(2, 6, 2), trnd(4, 6)], causal=False)
for ax in [0, 1, -1]:
    case(f"tf_cumsum_{ax}", "cumsum", [trnd(3, 4, 5)], axis=ax)
case("tf_cumsum_int", "cumsum", [torch.tensor([[3, -1, 4], [1, 5, -9]], dtype=torch.int32)], axis=1)
case("tf_cumsum_nan", "cumsum", [torch.tensor([1.0, NAN, 2.0, INF, -INF])], axis=0)
case("tf_cumsum_transposed", "cumsum", [trnd(4, 3).t()], axis=1)
# 0-dim and empty inputs for the transformer ops.
for name in ["gelu", "gelu_tanh", "silu"]:
    for tag, shape in shapes.items():
        case(f"edge_{name}_{tag}", name, [torch.full(shape, 1.5)])
for tag, shape in {"0d": (), "empty": (0,), "empty_2x0": (2, 0)}.items():
    for ax in ([0, -1] if shape else [0, -1]):
        case(f"edge_cumsum_{tag}_{ax}", "cumsum", [torch.full(shape, 1.5)], axis=ax)
case("edge_tril_empty_rows", "tril", [torch.zeros(0, 4)], diagonal=1)
case("edge_triu_batch0", "triu", [torch.zeros(0, 3, 3)], diagonal=0)
case("edge_layer_norm_batch0", "layer_norm", [torch.zeros(0, 8), trnd(8), trnd(8)], normalized_shape=[8], eps=1e-5)
case("edge_layer_norm_transposed", "layer_norm", [trnd(6, 4).t()], normalized_shape=[6], eps=1e-5)
case("edge_embedding_empty_ids", "embedding", [torch.zeros(0, dtype=torch.int32), trnd(5, 3)])
case("edge_embedding_0d_id", "embedding", [torch.tensor(2, dtype=torch.int32), trnd(5, 3)])
case("edge_sdpa_batch0", "sdpa", [torch.zeros(0, 4, 3), torch.zeros(0, 5, 3), torch.zeros(0, 5, 2)], causal=False)
case("edge_sdpa_transposed_q", "sdpa", [trnd(2, 3, 4).transpose(1, 2), trnd(2, 6, 3), trnd(2, 6, 2)], causal=True)

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as fh:
    json.dump({"torch": torch.__version__, "cases": cases}, fh, allow_nan=False)
for s in skipped:
    print("skipped (PyTorch rejects):", s)
n_grads = sum(1 for c in cases if "grads" in c)
size = os.path.getsize(OUT)
print(f"wrote {len(cases)} cases ({n_grads} with gradients, {size} bytes) to {OUT} with torch {torch.__version__}")
