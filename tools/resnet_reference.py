#!/usr/bin/env python3
"""PyTorch's side of `examples/resnet.rs`: the same network (torchvision's
BasicBlock ResNet on the small-image stem of examples/support/
resnet_model.rs, widths 8, 16, 32, 64, one block a stage), the same batches
of the shipped MNIST digits in the same order, the same random crops
(replayed from lazywgpu's seeded draws: tools/golden_augment.py), SGD with
Nesterov momentum 0.9 and weight decay 5e-4 under OneCycleLR (peak 0.2,
momentum not cycled), cross-entropy with label smoothing 0.1.

Writes tests/golden/resnet/ (read by tests/resnet_example.rs):
  init.safetensors  the initial parameters and buffers, torchvision's names
  losses.json       the first STEPS training losses from those weights

With --seeds N it also trains the example's default run (one epoch of 125
batches of 64) from N seeds and prints each test accuracy and run time,
the spread the example's own accuracy is compared with.

Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/resnet_reference.py            # writes the golden files
    python3 tools/resnet_reference.py --seeds 3  # and three full runs
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from golden_augment import augment, compose_rng, crop_draws, shuffled_batches  # noqa: E402
from gpt_reference import save_safetensors  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
DATA = os.path.join(ROOT, "examples", "data", "mnist-10k")
OUT = os.path.join(ROOT, "tests", "golden", "resnet")
STEPS = 20
BATCH = 64
WIDTHS = [8, 16, 32, 64]
PEAK_LR = 0.2
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-4
LABEL_SMOOTHING = 0.1
MEAN, STD = [0.1307], [0.3081]
SIZE, PADDING = 28, 2
EVAL_BATCH = 500


def conv(cin, cout, kernel, stride):
    c = nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False)
    nn.init.kaiming_normal_(c.weight, mode="fan_out", nonlinearity="relu")
    return c


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv(cin, cout, 3, stride)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = conv(cout, cout, 3, 1)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(y + identity)


class ResNet(nn.Module):
    def __init__(self, in_channels=1, widths=WIDTHS, blocks=(1, 1, 1, 1), classes=10):
        super().__init__()
        self.conv1 = conv(in_channels, widths[0], 3, 1)
        self.bn1 = nn.BatchNorm2d(widths[0])
        cin = widths[0]
        for i, (cout, n) in enumerate(zip(widths, blocks)):
            stage = []
            for b in range(max(n, 1)):
                stage.append(BasicBlock(cin, cout, 2 if i > 0 and b == 0 else 1))
                cin = cout
            setattr(self, f"layer{i + 1}", nn.Sequential(*stage))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for i in range(4):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def read_idx(name):
    with gzip.open(os.path.join(DATA, name + ".gz"), "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = struct.unpack(">" + "I" * dims, raw[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(raw[4 + 4 * dims:]), dtype=torch.uint8).view(*shape)


def load_mnist():
    x = read_idx("train-images-idx3-ubyte").float().div(255).unsqueeze(1)
    y = read_idx("train-labels-idx1-ubyte").long()
    xt = read_idx("t10k-images-idx3-ubyte").float().div(255).unsqueeze(1)
    yt = read_idx("t10k-labels-idx1-ubyte").long()
    return x, y, xt, yt


def batch_at(x, y, indices, step, seed):
    """The example's training batch `step`: the loader's images, cropped
    and normalised as lazywgpu's Compose(seed) draws them."""
    xb = x[indices]
    crops = crop_draws(compose_rng(seed, step), len(indices), 28, 28, SIZE, PADDING)
    return augment(xb, crops, [False] * len(indices), SIZE, PADDING, MEAN, STD), y[indices]


def trainer(model, total_steps):
    opt = torch.optim.SGD(model.parameters(), lr=PEAK_LR, momentum=MOMENTUM,
                          nesterov=True, weight_decay=WEIGHT_DECAY)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=PEAK_LR, total_steps=total_steps,
                                                cycle_momentum=False)

    def step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb, label_smoothing=LABEL_SMOOTHING)
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()
    return step


def accuracy(model, xt, yt):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(yt), EVAL_BATCH):
            xb = (xt[i:i + EVAL_BATCH] - MEAN[0]) / STD[0]
            correct += (model(xb).argmax(1) == yt[i:i + EVAL_BATCH]).sum().item()
    model.train()
    return correct / len(yt)


def full_run(seed, data):
    x, y, xt, yt = data
    torch.manual_seed(seed)
    model = ResNet()
    order = shuffled_batches(len(y), BATCH, seed, 1, True)
    step = trainer(model, len(order))
    start = time.time()
    losses = [step(*batch_at(x, y, idx, s, seed)) for s, idx in enumerate(order)]
    secs = time.time() - start
    return accuracy(model, xt, yt), losses[-1], secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=0, help="full runs to time and score")
    args = ap.parse_args()
    torch.set_num_threads(2)
    data = load_mnist()
    x, y, _, _ = data

    torch.manual_seed(0)
    model = ResNet()
    os.makedirs(OUT, exist_ok=True)
    named = {k: v.detach().clone() for k, v in model.state_dict().items()}
    save_safetensors(os.path.join(OUT, "init.safetensors"), named.items())
    order = shuffled_batches(len(y), BATCH, 0, 1, True)
    step = trainer(model, len(order))
    losses = [step(*batch_at(x, y, order[s], s, 0)) for s in range(STEPS)]
    with open(os.path.join(OUT, "losses.json"), "w") as f:
        json.dump({"torch": torch.__version__, "seed": 0, "batch": BATCH,
                   "total_steps": len(order), "losses": losses}, f)
        f.write("\n")
    print(f"{STEPS} losses: {losses[0]:.4f} .. {losses[-1]:.4f}")

    for seed in range(args.seeds):
        acc, last, secs = full_run(seed, data)
        print(f"seed {seed}: test accuracy {acc * 100:.2f} %, last loss {last:.4f}, "
              f"{secs:.1f} s for one epoch ({torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
