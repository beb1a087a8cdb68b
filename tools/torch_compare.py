#!/usr/bin/env python3
"""PyTorch's side of the comparison suite (`examples/compare.rs`): the same
workloads, in eager mode and under torch.compile, on the CPU or a CUDA GPU,
timed as compare.rs times them (medians after warm-up, each run ending in a
synchronisation or a read). Run by hand where PyTorch is installed (CI does
not run it), in the same sitting as `compare` or `tools/gpu-bench.sh`:

    python3 tools/torch_compare.py --device cpu --threads 2
    python3 tools/torch_compare.py --device cuda --json torch-cuda.json
    python3 tools/torch_compare.py --device cuda --no-compile --quick

Workloads (PERFORMANCE.md defines W1-W7):
  W1  ((x*2+1).tanh() - x).sigmoid()*x + 0.5 on 4M f32
  W2  sum of 16M f32, read back
  W3  softmax over the last axis of 4096 x 1024 f32
  W4  matmul 1024^3 f32 (no TF32: PyTorch's default "highest" precision),
      and the extra rows 4096^3 f32, 1024^3 and 4096^3 f16 and bf16
  W5  one MLP training step: 784-128-10, ReLU, batch 64, cross-entropy, SGD
  W7  one training step of the baby GPT (tools/gpt_reference.py's model:
      batch 12 x 64, AdamW, clipping at 1.0)
  CNN one training step of PyTorch's MNIST example network (batch 64,
      dropout, Adadelta lr 1.0)
Prints a markdown table; --json FILE writes the medians in seconds.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference as ref  # noqa: E402


def timer(device, runs, warmup=3):
    """A function that returns the median seconds of `fn()` over `runs`."""

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def measure(fn):
        for _ in range(warmup):
            fn()
        sync()
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    return measure


def w1(x):
    return ((x * 2.0 + 1.0).tanh() - x).sigmoid() * x + 0.5


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
        nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


def mlp():
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def train_step(model, opt, x, y, compiled):
    forward = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()

    return step


def gpt_step(dev, compiled):
    model = ref.Gpt(65).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    forward = torch.compile(model) if compiled else model
    x = torch.randint(0, 65, (12, ref.BLOCK), device=dev)
    y = torch.randint(0, 65, (12, ref.BLOCK), device=dev)

    def step():
        loss = forward(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def rows(dev, runs, compiled, big):
    """(name, seconds, unit figure) for each workload in one mode."""
    measure = timer(dev, runs)
    wrap = torch.compile if compiled else (lambda f: f)
    out = []
    x1 = torch.rand(4_194_304, device=dev)
    f1 = wrap(w1)
    t = measure(lambda: f1(x1))
    out.append(("W1 chain 4M f32", t, f"{4_194_304 * 8 / t / 1e9:.2f} GB/s"))
    x2 = torch.rand(16_777_216, device=dev)
    f2 = wrap(lambda x: x.sum())
    t = measure(lambda: f2(x2).item())
    out.append(("W2 sum 16M f32", t, f"{16_777_216 * 4 / t / 1e9:.2f} GB/s read"))
    x3 = torch.randn(4096, 1024, device=dev)
    f3 = wrap(lambda x: x.softmax(-1))
    out.append(("W3 softmax 4096x1024", measure(lambda: f3(x3)), ""))
    sizes = [(1024, torch.float32, "W4 matmul 1024^3")]
    sizes += [(1024, torch.float16, "matmul 1024^3 f16"), (1024, torch.bfloat16, "matmul 1024^3 bf16")]
    if big:
        sizes += [(4096, torch.float32, "matmul 4096^3 f32"), (4096, torch.float16, "matmul 4096^3 f16"),
                  (4096, torch.bfloat16, "matmul 4096^3 bf16")]
    for n, dtype, name in sizes:
        if dev.type == "cpu" and dtype != torch.float32 and n > 1024:
            continue
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        fm = wrap(torch.matmul)
        t = measure(lambda: fm(a, b))
        out.append((name, t, f"{2 * n**3 / t / 1e9:.1f} GFLOP/s"))
    logits = torch.randn(8, 50_257, device=dev)
    million = torch.randn(1 << 20, device=dev)
    for name, fn in [("topk 8x50257 k=50", lambda: torch.topk(logits, 50, dim=-1).values),
                     ("argsort 2^20", lambda: torch.argsort(million, stable=True)),
                     ("cumsum 8x50257", lambda: torch.cumsum(logits, -1))]:
        f = wrap(fn)
        t = measure(lambda: f())
        out.append((name, t, f"{t * 1e3:.2f} ms"))
    torch.manual_seed(0)
    model = mlp().to(dev)
    x = torch.randn(64, 784, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    t = measure(train_step(model, torch.optim.SGD(model.parameters(), lr=0.01), x, y, compiled))
    out.append(("W5 MLP train step", t, f"{1 / t:.0f} steps/s"))
    t = measure(gpt_step(dev, compiled))
    out.append(("W7 GPT train step", t, f"{1 / t:.2f} steps/s"))
    model = cnn().to(dev)
    x = torch.randn(64, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    t = measure(train_step(model, torch.optim.Adadelta(model.parameters(), lr=1.0), x, y, compiled))
    out.append(("MNIST CNN train step", t, f"{1 / t:.1f} steps/s"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    ap.add_argument("--quick", action="store_true", help="5 runs per figure instead of 11")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--no-big", action="store_true", help="skip the 4096^3 matmuls")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    runs = 5 if args.quick else 11
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    modes = [("eager", False)] + ([] if args.no_compile else [("torch.compile", True)])
    table = {}
    for mode, compiled in modes:
        print(f"{mode} ...", file=sys.stderr)
        for row, t, fig in rows(dev, runs, compiled, not args.no_big):
            table.setdefault(row, {})[mode] = (t, fig)
    print(f"PyTorch {torch.__version__} on {name}; medians of {runs} runs after 3 warm-ups.\n")
    print("| workload | " + " | ".join(m for m, _ in modes) + " |")
    print("| --- |" + " --- |" * len(modes))
    for row, cells in table.items():
        text = [f"{cells[m][0] * 1e3:.3f} ms ({cells[m][1]})" if m in cells else "—" for m, _ in modes]
        print(f"| {row} | " + " | ".join(text) + " |")
    if args.json:
        doc = {"torch": torch.__version__, "device": name, "runs": runs,
               "rows": {row: {m: c[0] for m, c in cells.items()} for row, cells in table.items()}}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
