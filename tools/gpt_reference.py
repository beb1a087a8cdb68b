#!/usr/bin/env python3
"""PyTorch reference for examples/gpt.rs: nanoGPT's "baby GPT" recipe on
examples/data/shakespeare-char, written so that lazywgpu can be compared
step for step. Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/gpt_reference.py --iters 20 --golden      # tests/golden/gpt_*
    python3 tools/gpt_reference.py --iters 2000 --seed 1337 # full run, timing

--golden writes tests/golden/gpt_init.safetensors (the initial weights,
under lazywgpu's parameter names, Linear weights [out, in]) and
tests/golden/gpt_losses.json (the training loss of each iteration).
The full run prints train/val losses every 250 iterations, the final
validation loss, steps/s and wall time (2 threads, as the machine has).

Batches: start offsets from splitmix64 seeded 1337, one next() % (len - 64)
per sequence; validation: 20 batches from splitmix64 seeded 4242, the same
at every evaluation. Learning rate: nanoGPT's get_lr (warm-up 100, cosine
to 1e-4 at 2000). AdamW (0.9, 0.99), eps 1e-8, weight decay 0.1 on rank >= 2
only; gradient clipping at 1.0.
"""
import argparse
import gzip
import json
import math
import os
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(__file__), "..")
MASK = (1 << 64) - 1
BLOCK, BATCH, C, LAYERS, HEADS = 64, 12, 128, 4, 4


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(C, 3 * C, bias=False)
        self.proj = nn.Linear(C, C, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        heads = lambda z: z.view(b, t, HEADS, C // HEADS).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, C))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(C, 4 * C, bias=False)
        self.proj = nn.Linear(4 * C, C, bias=False)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(C, bias=False)
        self.attn = Attn()
        self.ln2 = nn.LayerNorm(C, bias=False)
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, C)
        self.wpe = nn.Embedding(BLOCK, C)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(C, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * LAYERS))
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe.weight[:t]
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def get_lr(it, warmup=100, total=2000, lr=1e-3, min_lr=1e-4):
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > total:
        return min_lr
    ratio = (it - warmup) / (total - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def batch(data, offsets):
    x = torch.stack([data[o:o + BLOCK] for o in offsets])
    y = torch.stack([data[o + 1:o + BLOCK + 1] for o in offsets])
    return x, y


def save_safetensors(path, named):
    """A safetensors file of `named` ((name, tensor) pairs, F32 or I64)."""
    kinds = {torch.float32: ("F32", "f"), torch.int64: ("I64", "q")}
    header, blobs, offset = {}, [], 0
    for name, t in named:
        dtype, code = kinds[t.dtype]
        raw = struct.pack(f"<{t.numel()}{code}", *t.detach().flatten().tolist())
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--golden", action="store_true")
    ap.add_argument("--eval-interval", type=int, default=250)
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    with gzip.open(os.path.join(ROOT, "examples/data/shakespeare-char/input.txt.gz"), "rt", encoding="ascii") as f:
        text = f.read()
    vocab = sorted(set(text))
    stoi = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]
    model = Gpt(len(vocab))
    print(f"{sum(p.numel() for p in model.parameters())} parameters, vocab {len(vocab)}")
    if args.golden:
        save_safetensors(os.path.join(ROOT, "tests/golden/gpt_init.safetensors"), model.named_parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    rng = SplitMix64(1337)
    vrng = SplitMix64(4242)
    val_offsets = [[vrng.next() % (len(val) - BLOCK) for _ in range(BATCH)] for _ in range(20)]

    def val_loss():
        model.eval()
        with torch.no_grad():
            loss = sum(model(*batch(val, o)).item() for o in val_offsets) / len(val_offsets)
        model.train()
        return loss

    losses = []
    start = time.time()
    train_time = 0.0
    for it in range(args.iters + 1):
        if not args.golden and it % args.eval_interval == 0:
            print(f"iter {it}: val loss {val_loss():.4f}", flush=True)
        if it == args.iters:
            break
        t0 = time.time()
        for g in opt.param_groups:
            g["lr"] = get_lr(it)
        x, y = batch(train, [rng.next() % (len(train) - BLOCK) for _ in range(BATCH)])
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        train_time += time.time() - t0
    wall = time.time() - start
    if args.golden:
        with open(os.path.join(ROOT, "tests/golden/gpt_losses.json"), "w") as f:
            json.dump({"torch": torch.__version__, "seed": args.seed, "losses": losses}, f)
        print("losses:", " ".join(f"{l:.4f}" for l in losses))
    else:
        print(f"final train loss {losses[-1]:.4f}; {args.iters / train_time:.1f} steps/s; wall {wall:.1f} s")


if __name__ == "__main__":
    main()
