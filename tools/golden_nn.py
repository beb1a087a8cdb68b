#!/usr/bin/env python3
"""Writes tests/golden/nn.json: PyTorch's outputs and gradients for the
normalisation layers, grouped convolutions and losses (tests/golden_nn.rs
reads it).

Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/golden_nn.py          # writes tests/golden/nn.json

Each case has a `kind` (what to build), `args`, `inputs` (tensors, in the
format of tools/golden.py: shape, dtype, data, non-finite floats as
strings), `outputs` (the first is the layer's or loss's value; BatchNorm
cases add the running mean, variance and batch count after the steps)
and, where the first output is float, `grad_weight` and `grads`: the
gradient of `(out * grad_weight).sum()` for each float input (`null` for
integer inputs). Layer parameters (weights, biases) are inputs, so their
gradients are checked too.
"""
import json
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
GW = torch.Generator().manual_seed(4321)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "nn.json")
NAN, INF = float("nan"), float("inf")
cases = []


def enc(t):
    t = t.detach().cpu()
    dtype = {torch.float32: "f32", torch.int64: "i32", torch.int32: "i32"}[t.dtype]
    vals = []
    for v in t.flatten().tolist():
        if isinstance(v, float) and not math.isfinite(v):
            vals.append("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
        else:
            vals.append(v)
    return {"shape": list(t.shape), "dtype": dtype, "data": vals}


def run(kind, args, x):
    """PyTorch's version of tests/golden_nn.rs's `run`: the outputs."""
    if kind in ("batch_norm1d", "batch_norm2d"):
        two_d = kind == "batch_norm2d"
        c = x[0].shape[1]
        bn = (nn.BatchNorm2d if two_d else nn.BatchNorm1d)(
            c, eps=args["eps"], momentum=args["momentum"], affine=args["affine"],
            track_running_stats=args["track"])
        rest = x[1:]
        if args["affine"]:
            # The inputs themselves, so their gradients are taken.
            del bn.weight, bn.bias
            bn.weight, bn.bias = x[1], x[2]
            rest = x[3:]
        if args["track"] and args["running"]:
            bn.running_mean.copy_(rest[0])
            bn.running_var.copy_(rest[1])
            rest = rest[2:]
        # Earlier batches in training mode move the running statistics.
        bn.train(True)
        for earlier in rest:
            bn(earlier.detach())
        bn.train(args["training"])
        outs = [bn(x[0])]
        if args["track"]:
            outs += [bn.running_mean, bn.running_var, bn.num_batches_tracked]
        return outs
    if kind == "batch_norm_fn":
        rm, rv = x[3].clone(), x[4].clone()
        y = F.batch_norm(x[0], rm, rv, x[1], x[2], training=args["training"],
                         momentum=args["momentum"], eps=args["eps"])
        return [y, rm, rv]
    if kind == "group_norm":
        w, b = (x[1], x[2]) if args["affine"] else (None, None)
        return [F.group_norm(x[0], args["groups"], w, b, args["eps"])]
    if kind == "conv2d":
        b = x[2] if len(x) > 2 else None
        return [F.conv2d(x[0], x[1], b, tuple(args["stride"]), tuple(args["padding"]),
                         tuple(args["dilation"]), args["groups"])]
    if kind == "conv_transpose2d":
        b = x[2] if len(x) > 2 else None
        return [F.conv_transpose2d(x[0], x[1], b, tuple(args["stride"]), tuple(args["padding"]),
                                   tuple(args["output_padding"]), args["groups"], tuple(args["dilation"]))]
    if kind == "conv1d":
        b = x[2] if len(x) > 2 else None
        return [F.conv1d(x[0], x[1], b, args["stride"], args["padding"], args["dilation"], args["groups"])]
    if kind == "interpolate":
        size = tuple(args["size"]) if args["size"] else None
        scale = tuple(args["scale"]) if args["scale"] else None
        align = args["align_corners"] if args["mode"] == "bilinear" else None
        return [F.interpolate(x[0], size=size, scale_factor=scale, mode=args["mode"], align_corners=align)]
    if kind == "adaptive_avg_pool2d":
        return [F.adaptive_avg_pool2d(x[0], tuple(args["output"]))]
    if kind == "cross_entropy":
        w = x[2] if len(x) > 2 else None
        return [F.cross_entropy(x[0], x[1].long(), weight=w, ignore_index=args["ignore_index"],
                                reduction=args["reduction"], label_smoothing=args["smoothing"])]
    if kind == "bce_logits":
        w = x[2] if args["weight"] else None
        pw = x[-1] if args["pos_weight"] else None
        return [F.binary_cross_entropy_with_logits(x[0], x[1], weight=w, pos_weight=pw,
                                                   reduction=args["reduction"])]
    if kind == "l1":
        return [F.l1_loss(x[0], x[1])]
    if kind == "smooth_l1":
        return [F.smooth_l1_loss(x[0], x[1], beta=args["beta"])]
    if kind == "kl_div":
        return [F.kl_div(x[0], x[1], reduction=args["reduction"], log_target=args["log_target"])]
    raise ValueError(kind)


def add(name, kind, args, inputs, constant=()):
    """Case `name`; inputs at the indices in `constant` take no gradient."""
    inputs = [t.clone() for t in inputs]
    for i, t in enumerate(inputs):
        if t.is_floating_point() and i not in constant:
            t.requires_grad_(True)
    outs = run(kind, args, inputs)
    case = {"name": name, "kind": kind, "args": args,
            "inputs": [enc(t) for t in inputs], "outputs": [enc(o) for o in outs]}
    y = outs[0]
    if y.is_floating_point() and y.requires_grad:
        gw = (torch.randint(-8, 9, y.shape, generator=GW) / 8.0).float()
        (y * gw).sum().backward()
        grads = [None if t.grad is None else enc(t.grad) for t in inputs]
        case["grad_weight"] = enc(gw)
        case["grads"] = grads
    cases.append(case)


def randn(*s):
    return torch.randn(*s)


# --- BatchNorm ---
def bn_case(name, kind, shape, training=True, momentum=0.1, affine=True, track=True,
            earlier=0, running=False, eps=1e-5, special=None):
    c = shape[1]
    x = randn(*shape) * 2 + 0.5
    if special is not None:
        x[(0, 1) + (0,) * (len(shape) - 2)] = special
    inputs = [x]
    if affine:
        inputs += [randn(c) * 0.5 + 1, randn(c) * 0.5]
    if track and running:
        inputs += [randn(c) * 0.1, torch.rand(c) + 0.5]
    first_constant = len(inputs) - (2 if track and running else 0)
    inputs += [randn(*shape) * 3 - 1 for _ in range(earlier)]
    add(name, kind, {"training": training, "momentum": momentum, "affine": affine,
                     "track": track, "running": running, "eps": eps}, inputs,
        constant=range(first_constant, len(inputs)))


bn_case("bn2d_train", "batch_norm2d", (4, 3, 5, 6))
bn_case("bn2d_train_two_steps", "batch_norm2d", (3, 2, 4, 3), earlier=1)
bn_case("bn2d_eval", "batch_norm2d", (2, 3, 4, 5), training=False, running=True)
bn_case("bn2d_eval_after_training", "batch_norm2d", (2, 3, 4, 5), training=False, earlier=2)
bn_case("bn1d_cumulative", "batch_norm1d", (8, 4), momentum=None, affine=False, earlier=2)
bn_case("bn1d_3d_no_stats", "batch_norm1d", (5, 3, 7), training=False, track=False)
bn_case("bn1d_odd", "batch_norm1d", (3, 5, 1), momentum=0.3, eps=1e-3)
bn_case("bn2d_nan", "batch_norm2d", (2, 3, 3, 3), special=NAN)
bn_case("bn2d_empty_eval", "batch_norm2d", (0, 3, 2, 2), training=False, running=True)

for name, training in [("bn_fn_train", True), ("bn_fn_eval", False)]:
    add(name, "batch_norm_fn", {"training": training, "momentum": 0.2, "eps": 1e-4},
        [randn(3, 4, 5) * 2, randn(4), randn(4), randn(4) * 0.1, torch.rand(4) + 0.5],
        constant=(3, 4))

# --- GroupNorm ---
for name, shape, g, affine in [("gn_3_of_6", (2, 6, 4, 5), 3, True), ("gn_1", (3, 4, 3), 1, True),
                               ("gn_instance", (2, 5, 3, 3), 5, True), ("gn_no_affine", (2, 4, 7), 2, False),
                               ("gn_odd", (1, 9, 5, 1), 3, True)]:
    c = shape[1]
    inputs = [randn(*shape) * 1.5 + 0.3]
    if affine:
        inputs += [randn(c) * 0.5 + 1, randn(c) * 0.5]
    add(name, "group_norm", {"groups": g, "affine": affine, "eps": 1e-5}, inputs)
x = randn(2, 4, 3, 3)
x[1, 2, 0, 0] = NAN
add("gn_nan", "group_norm", {"groups": 2, "affine": True, "eps": 1e-5}, [x, randn(4), randn(4)])

# --- Grouped convolutions ---
for name, xs, ws, groups, stride, padding, dilation, bias in [
    ("conv_groups2", (2, 4, 7, 6), (6, 2, 3, 3), 2, (2, 1), (1, 1), (1, 2), True),
    ("conv_depthwise", (2, 3, 8, 8), (3, 1, 3, 3), 3, (1, 1), (1, 1), (1, 1), True),
    ("conv_depthwise_multiplier", (1, 2, 5, 6), (4, 1, 2, 3), 2, (1, 2), (0, 1), (1, 1), False),
    ("conv_depthwise_64", (1, 64, 5, 5), (64, 1, 3, 3), 64, (1, 1), (1, 1), (1, 1), False),
    ("conv_groups4_128", (1, 128, 4, 4), (8, 32, 3, 3), 4, (2, 2), (1, 1), (1, 1), True),
    ("conv_groups1", (2, 3, 6, 5), (4, 3, 3, 2), 1, (1, 1), (1, 0), (2, 1), True),
]:
    inputs = [randn(*xs), randn(*ws) * 0.3]
    if bias:
        inputs.append(randn(ws[0]))
    add(name, "conv2d", {"groups": groups, "stride": list(stride), "padding": list(padding),
                         "dilation": list(dilation)}, inputs)

# --- Transposed and 1-D convolutions ---
for name, xs, ws, groups, stride, padding, out_pad, dilation, bias in [
    ("convt_plain", (2, 3, 4, 5), (3, 2, 3, 3), 1, (1, 1), (0, 0), (0, 0), (1, 1), True),
    ("convt_stride2", (1, 4, 3, 4), (4, 3, 4, 4), 1, (2, 2), (1, 1), (0, 0), (1, 1), True),
    ("convt_out_pad", (2, 2, 3, 3), (2, 5, 3, 2), 1, (2, 3), (1, 0), (1, 2), (1, 1), False),
    ("convt_groups", (1, 4, 4, 3), (4, 3, 3, 3), 2, (2, 1), (0, 1), (1, 0), (1, 2), True),
    ("convt_big_padding", (1, 2, 5, 5), (2, 2, 2, 2), 1, (1, 1), (1, 1), (0, 0), (1, 1), True),
]:
    inputs = [randn(*xs), randn(*ws) * 0.3]
    if bias:
        inputs.append(randn(ws[1] * groups))
    add(name, "conv_transpose2d", {"groups": groups, "stride": list(stride), "padding": list(padding),
                                   "output_padding": list(out_pad), "dilation": list(dilation)}, inputs)
for name, xs, ws, groups, stride, padding, dilation in [
    ("conv1d_plain", (2, 3, 9), (4, 3, 3), 1, 1, 1, 1),
    ("conv1d_grouped_strided", (1, 4, 11), (6, 2, 2), 2, 2, 0, 3),
]:
    add(name, "conv1d", {"groups": groups, "stride": stride, "padding": padding, "dilation": dilation},
        [randn(*xs), randn(*ws) * 0.3, randn(ws[0])])

# --- Resizing and adaptive pooling ---
for name, xs, mode, size, scale, align in [
    ("nearest_x2", (1, 2, 3, 4), "nearest", None, (2.0, 2.0), False),
    ("nearest_size_down", (2, 1, 7, 5), "nearest", (3, 4), None, False),
    ("nearest_odd_scale", (1, 1, 5, 6), "nearest", None, (1.5, 0.75), False),
    ("bilinear_x2", (1, 2, 3, 4), "bilinear", None, (2.0, 2.0), False),
    ("bilinear_align", (2, 1, 4, 3), "bilinear", (7, 5), None, True),
    ("bilinear_down", (1, 1, 8, 6), "bilinear", (3, 4), None, False),
    ("bilinear_align_to_one", (1, 1, 4, 3), "bilinear", (1, 2), None, True),
]:
    add(name, "interpolate", {"mode": mode, "size": size and list(size), "scale": scale and list(scale),
                              "align_corners": align}, [randn(*xs)])
for name, xs, out in [("adaptive_global", (2, 3, 5, 7), (1, 1)), ("adaptive_even", (1, 2, 6, 4), (3, 2)),
                      ("adaptive_uneven", (2, 2, 7, 5), (3, 4)), ("adaptive_grow", (1, 1, 2, 3), (4, 5))]:
    add(name, "adaptive_avg_pool2d", {"output": list(out)}, [randn(*xs)])

# --- Losses ---
def ce_case(name, logits, target, weight=None, ignore=-100, reduction="mean", smoothing=0.0):
    inputs = [logits, target.to(torch.int32)]
    if weight is not None:
        inputs.append(weight)
    add(name, "cross_entropy", {"ignore_index": ignore, "reduction": reduction,
                                "smoothing": smoothing}, inputs, constant=(2,))


t = torch.tensor([0, 2, 1, -100, 4, 2])
ce_case("ce_plain", randn(6, 5), torch.tensor([0, 2, 1, 3, 4, 2]))
ce_case("ce_ignore_default", randn(6, 5) * 2, t)
ce_case("ce_weight_ignore", randn(6, 5), t, weight=torch.rand(5) + 0.2)
ce_case("ce_smoothing", randn(6, 5), torch.tensor([0, 2, 1, 3, 4, 2]), smoothing=0.1)
ce_case("ce_everything", randn(6, 5), t, weight=torch.rand(5) + 0.2, smoothing=0.25)
ce_case("ce_ignore_1_sum", randn(6, 5), torch.tensor([1, 0, 1, 3, 4, 1]), ignore=1, reduction="sum")
ce_case("ce_none", randn(6, 5), t, weight=torch.rand(5) + 0.2, reduction="none", smoothing=0.2)
ce_case("ce_spatial", randn(2, 4, 3, 5), torch.randint(0, 4, (2, 3, 5)), weight=torch.rand(4) + 0.5,
        smoothing=0.1)
ce_case("ce_unbatched", randn(7), torch.tensor(3))
ce_case("ce_all_ignored", randn(3, 4), torch.tensor([-100, -100, -100]))
big = randn(4, 6)
big[0, 1] = 80.0
big[2, 3] = -INF
ce_case("ce_extreme_logits", big, torch.tensor([1, 0, 3, 5]))

for name, reduction, weight, pos in [("bce_mean", "mean", False, False), ("bce_sum_weights", "sum", True, True),
                                     ("bce_none_pos", "none", False, True)]:
    x = randn(5, 3) * 3
    x[0, 0], x[1, 1] = 100.0, -100.0
    y = torch.rand(5, 3)
    y[2, 2] = 1.0
    inputs = [x, y]
    if weight:
        inputs.append(torch.rand(5, 3) + 0.5)
    if pos:
        inputs.append(torch.rand(3) * 3)
    add(name, "bce_logits", {"reduction": reduction, "weight": weight, "pos_weight": pos}, inputs,
        constant=range(1, len(inputs)))

add("l1", "l1", {}, [randn(4, 5), randn(4, 5)])
for beta in [1.0, 0.5, 0.0]:
    add(f"smooth_l1_{beta}", "smooth_l1", {"beta": beta}, [randn(4, 5), randn(4, 5)])
p = torch.softmax(randn(4, 5), -1)
p[0, 1] = 0.0
q = torch.log_softmax(randn(4, 5), -1)
for reduction in ["mean", "batchmean", "sum", "none"]:
    add(f"kl_{reduction}", "kl_div", {"reduction": reduction, "log_target": False}, [q, p])
add("kl_log_target", "kl_div", {"reduction": "batchmean", "log_target": True},
    [q, torch.log_softmax(randn(4, 5), -1)])

with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f)
print(f"wrote {len(cases)} cases to {OUT}")


# --- A ResNet-shaped state dict, saved as safetensors by PyTorch's names ---
def write_safetensors(path, tensors):
    """The safetensors format by hand (no numpy, no safetensors package):
    u64 header size, JSON header, little-endian data."""
    import struct
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if t.dtype == torch.int64:
            data = struct.pack(f"<{t.numel()}q", *t.flatten().tolist())
            dtype = "I64"
        else:
            data = struct.pack(f"<{t.numel()}f", *t.float().flatten().tolist())
            dtype = "F32"
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


class BasicBlock(nn.Module):
    """torchvision's BasicBlock, narrowed."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.layer1 = nn.Sequential(BasicBlock(4, 4, 1), BasicBlock(4, 8, 2))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        return self.fc(torch.flatten(self.avgpool(self.layer1(x)), 1))


net = TinyResNet()
for _ in range(3):  # moves the running statistics; num_batches_tracked = 3
    net(torch.randn(4, 3, 8, 8))
GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "..", "tests", "golden")
write_safetensors(os.path.join(GOLDEN_DIR, "tiny_resnet.safetensors"), dict(net.state_dict()))
x = torch.randn(2, 3, 8, 8)
with torch.no_grad():
    net.eval()
    eval_out = net(x)
    net.train()
    train_out = net(x)
with open(os.path.join(GOLDEN_DIR, "tiny_resnet.json"), "w") as f:
    json.dump({"torch": torch.__version__, "names": list(net.state_dict().keys()), "x": enc(x),
               "eval": enc(eval_out), "train": enc(train_out),
               "bn1_running_mean_after": enc(net.bn1.running_mean),
               "block2_bn2_running_var_after": enc(net.layer1[1].bn2.running_var),
               "num_batches_tracked_after": int(net.bn1.num_batches_tracked)}, f)
print("wrote tiny_resnet.safetensors and tiny_resnet.json")
