#!/usr/bin/env python3
"""Golden training run for tests/training.rs: PyTorch trains the 784-128-10
MLP with fixed initial weights on the first 20 batches (64 digits, file
order) of examples/data/mnist-10k with SGD (lr 0.05, momentum 0.9, weight
decay 1e-4), and writes

    tests/golden/mlp_init.safetensors   the initial weights (PyTorch names)
    tests/golden/mlp_sgd.json           the loss of every step, and sums of
                                        the final weights

The Rust test loads the same weights, trains on the same batches and must
match every loss within 1e-4 relative.

Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/golden_mlp.py              # writes the two files
    python3 tools/golden_mlp.py --accuracy   # also trains the example's
                                             # recipes and prints accuracy
"""
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "examples", "data", "mnist-10k")
OUT = os.path.join(ROOT, "tests", "golden")


def read_idx(name):
    with gzip.open(os.path.join(DATA, name + ".gz"), "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    return np.frombuffer(raw[4 + 4 * ndim :], dtype=np.uint8).reshape(dims)


def normalized(images):
    x = torch.from_numpy(images.astype(np.float32))
    return ((x / 255.0 - 0.1307) / 0.3081).reshape(-1, 1, 28, 28)


def write_safetensors(path, tensors):
    """The safetensors format by hand: u64 header size, JSON header, data."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def golden():
    torch.manual_seed(0)
    model = mlp()
    # lazywgpu's Sequential names parameters by layer index as PyTorch does.
    write_safetensors(os.path.join(OUT, "mlp_init.safetensors"), dict(model.state_dict()))
    x_all = normalized(read_idx("train-images-idx3-ubyte"))
    y_all = torch.from_numpy(read_idx("train-labels-idx1-ubyte").astype(np.int64))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    losses = []
    for step in range(20):
        x, y = x_all[step * 64 : (step + 1) * 64], y_all[step * 64 : (step + 1) * 64]
        opt.zero_grad()
        loss = F.nll_loss(F.log_softmax(model(x), dim=1), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = {name: {"sum": p.sum().item(), "sum_sq": (p * p).sum().item()} for name, p in model.state_dict().items()}
    with open(os.path.join(OUT, "mlp_sgd.json"), "w") as f:
        json.dump({"torch": torch.__version__, "batch": 64, "lr": 0.05, "momentum": 0.9,
                   "weight_decay": 1e-4, "losses": losses, "final": final}, f, indent=1)
    print("losses:", " ".join(f"{l:.5f}" for l in losses))


class Net(nn.Module):
    """PyTorch's MNIST example network."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = self.dropout1(torch.flatten(F.max_pool2d(x, 2), 1))
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def accuracy(kind, epochs):
    """The example's recipe: Adadelta lr 1.0, StepLR 0.7, batch 64, file order."""
    torch.manual_seed(0)
    model = Net() if kind == "cnn" else nn.Sequential(mlp(), nn.LogSoftmax(dim=1))
    x_tr, y_tr = normalized(read_idx("train-images-idx3-ubyte")), torch.from_numpy(read_idx("train-labels-idx1-ubyte").astype(np.int64))
    x_te, y_te = normalized(read_idx("t10k-images-idx3-ubyte")), torch.from_numpy(read_idx("t10k-labels-idx1-ubyte").astype(np.int64))
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    for epoch in range(1, epochs + 1):
        model.train()
        t0 = time.time()
        steps = len(x_tr) // 64
        for b in range(steps):
            opt.zero_grad()
            loss = F.nll_loss(model(x_tr[b * 64 : (b + 1) * 64]), y_tr[b * 64 : (b + 1) * 64])
            loss.backward()
            opt.step()
        rate = steps / (time.time() - t0)
        model.eval()
        with torch.no_grad():
            acc = (model(x_te).argmax(1) == y_te).float().mean().item()
        print(f"torch {torch.__version__} {kind} epoch {epoch}: test accuracy {acc * 100:.2f} %, {rate:.1f} train steps/s")
        sched.step()


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    golden()
    if "--accuracy" in sys.argv:
        accuracy("mlp", 3)
        accuracy("cnn", 2)
