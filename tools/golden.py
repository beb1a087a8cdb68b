#!/usr/bin/env python3
"""Writes tests/golden/ops.json: fixed inputs and PyTorch's outputs for every
op lazywgpu has, so the Rust tests can check semantics that the CPU
reference might get wrong the same way as the GPU.

Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/golden.py            # writes tests/golden/ops.json

Inputs are stored in the file too, so nothing has to be regenerated
identically on the Rust side. Non-finite floats are written as the strings
"nan", "inf" and "-inf" (JSON has no literal for them).
"""
import json
import math
import os

import torch

torch.manual_seed(0)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "ops.json")
cases = []


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


def case(name, op, inputs, out, **args):
    cases.append({"name": name, "op": op, "args": args, "inputs": [enc(i) for i in inputs], "expected": enc(out)})


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

import torch.nn.functional as F

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
case("one_hot", "one_hot", [labels], F.one_hot(labels.long(), 5).float(), num_classes=5)
mask = p2 > 0.5
case("masked_fill", "masked_fill", [p2, mask], p2.masked_fill(mask, 9.0), value=9.0)
img = rnd(2, 3, 9, 8)
wt = rnd(4, 3, 3, 2)
bias = rnd(4)
case("conv2d_basic", "conv2d", [img, wt, bias], F.conv2d(img, wt, bias), stride=[1, 1], padding=[0, 0], dilation=[1, 1])
case("conv2d_stride_pad_dil", "conv2d", [img, wt, bias], F.conv2d(img, wt, bias, stride=(2, 1), padding=(1, 2), dilation=(2, 1)), stride=[2, 1], padding=[1, 2], dilation=[2, 1])
case("max_pool2d", "max_pool2d", [img], F.max_pool2d(img, (3, 2), stride=(2, 2), padding=(1, 1)), kernel=[3, 2], stride=[2, 2], padding=[1, 1])
case("avg_pool2d", "avg_pool2d", [img], F.avg_pool2d(img, (2, 2), stride=(2, 2)), kernel=[2, 2], stride=[2, 2], padding=[0, 0])

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as fh:
    json.dump({"torch": torch.__version__, "cases": cases}, fh)
print(f"wrote {len(cases)} cases to {OUT} with torch {torch.__version__}")
