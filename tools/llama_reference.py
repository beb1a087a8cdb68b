#!/usr/bin/env python3
"""PyTorch reference for lazywgpu's Llama (src/nn/llama_model.rs): a tiny
Llama-shaped decoder (RMSNorm, rotary embeddings in Hugging Face's
half-split layout, grouped-query causal attention, a SwiGLU MLP, untied
head) written here in plain PyTorch with Hugging Face's arithmetic, trained
on examples/data/shakespeare-char so lazywgpu can be compared step for step.
Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/llama_reference.py     # writes tests/golden/llama_*
    python3 tools/llama_reference.py --example-run   # examples/llama.rs's default run, three seeds

It writes tests/golden/llama_hf/ (the initial weights, rounded to bf16, in
Hugging Face's sharded bf16 layout: two shards and
model.safetensors.index.json, under its names, Linear weights [out, in])
and tests/golden/llama.json: the config, the f32 training loss of each of
20 iterations from those weights, the losses of the same 20 iterations
under bf16 autocast (a fresh run from the same weights); then, from the
weights after 300 iterations of the f32 recipe (saved as
tests/golden/llama_trained.safetensors): the logits under teacher forcing
over the validation split's first 200 tokens, and 24 tokens generated
greedily from its first 8 (each step recomputes the whole sequence: no
cache) with each step's margin between the two largest logits.

Batches: start offsets from splitmix64 seeded 1337, one next() % (len - 32)
per sequence, 8 sequences of 32. AdamW lr 1e-3, betas (0.9, 0.95), eps
1e-8, weight decay 0.1 on rank >= 2 only; gradient clipping at 1.0.
"""
import gzip
import json
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

# The batch sampler and the f32 writer are gpt_reference.py's (this folder).
from gpt_reference import SplitMix64, save_safetensors

ROOT = os.path.join(os.path.dirname(__file__), "..")
CFG = dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0)
BATCH, BLOCK, ITERS, PROMPT, NEW, TRAINED, FORCED = 8, 32, 20, 8, 24, 300, 200


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.h, self.kv, self.d = h, kv, c["hidden_size"] // h
        self.q_proj = nn.Linear(c["hidden_size"], h * self.d, bias=False)
        self.k_proj = nn.Linear(c["hidden_size"], kv * self.d, bias=False)
        self.v_proj = nn.Linear(c["hidden_size"], kv * self.d, bias=False)
        self.o_proj = nn.Linear(h * self.d, c["hidden_size"], bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        g = self.h // self.kv
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.h * self.d))


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = Mlp(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Block(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = Body(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
        d = c["hidden_size"] // c["num_attention_heads"]
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        t = torch.arange(c["max_position_embeddings"], dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos(), emb.sin()

    def forward(self, ids):
        t = ids.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))


def save_sharded_bf16(folder, named, shards=2):
    """Hugging Face's sharded layout in bf16: model-0000k-of-0000n.safetensors
    and model.safetensors.index.json (weight_map: name -> shard)."""
    os.makedirs(folder, exist_ok=True)
    named = list(named)
    per = (len(named) + shards - 1) // shards
    weight_map, total = {}, 0
    for k in range(shards):
        part = named[k * per:(k + 1) * per]
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
        for name, t in part:
            bits = t.detach().bfloat16().view(torch.int16).flatten().tolist()
            raw = struct.pack(f"<{len(bits)}h", *bits)
            header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
            blobs.append(raw)
            offset += len(raw)
            weight_map[name] = file
            total += len(raw)
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(folder, file), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)


def train(model, data, autocast, iters=None):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    rng = SplitMix64(1337)
    losses = []
    v = model.lm_head.weight.shape[0]
    for _ in range(iters or ITERS):
        offs = [rng.next() % (len(data) - BLOCK) for _ in range(BATCH)]
        x = torch.stack([data[o:o + BLOCK] for o in offs])
        y = torch.stack([data[o + 1:o + BLOCK + 1] for o in offs])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, v), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def example_run(seeds):
    """examples/llama.rs's default run in PyTorch, once per seed: its
    model (width 128, 4 layers, 4 query and 2 key/value heads, MLP 352),
    300 iterations of 16 x 64 tokens (batches from splitmix64 seeded
    1337), AdamW lr 3e-3, betas (0.9, 0.95), weight decay 0.1 on
    matrices, clipping at 1.0; then the mean loss over 20 validation
    batches (splitmix64 seeded 4242) and the training time."""
    import time
    with gzip.open(os.path.join(ROOT, "examples/data/shakespeare-char/input.txt.gz"), "rt", encoding="ascii") as f:
        text = f.read()
    vocab = sorted(set(text))
    stoi = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train_data, val = data[:n], data[n:]
    cfg = dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=1024, rms_norm_eps=1e-5, rope_theta=10000.0,
               vocab_size=len(vocab))
    batch, block = 16, 64
    for seed in seeds:
        torch.manual_seed(seed)
        model = Llama(cfg)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
        rng = SplitMix64(1337)
        start = time.time()
        for _ in range(300):
            offs = [rng.next() % (len(train_data) - block) for _ in range(batch)]
            x = torch.stack([train_data[o:o + block] for o in offs])
            y = torch.stack([train_data[o + 1:o + block + 1] for o in offs])
            loss = F.cross_entropy(model(x).view(-1, len(vocab)), y.view(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        secs = time.time() - start
        vrng = SplitMix64(4242)
        total = 0.0
        with torch.no_grad():
            for _ in range(20):
                offs = [vrng.next() % (len(val) - block) for _ in range(batch)]
                x = torch.stack([val[o:o + block] for o in offs])
                y = torch.stack([val[o + 1:o + block + 1] for o in offs])
                total += F.cross_entropy(model(x).view(-1, len(vocab)), y.view(-1)).item()
        print(f"seed {seed}: final train loss {loss.item():.4f}, validation loss {total / 20:.4f}, "
              f"{300 / secs:.2f} steps/s ({secs:.1f} s)")


def main():
    import sys
    if "--example-run" in sys.argv:
        torch.set_num_threads(2)
        example_run([1, 2, 3])
        return
    torch.set_num_threads(2)
    torch.manual_seed(0)
    with gzip.open(os.path.join(ROOT, "examples/data/shakespeare-char/input.txt.gz"), "rt", encoding="ascii") as f:
        text = f.read()
    vocab = sorted(set(text))
    stoi = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train_data, val = data[:n], data[n:]
    cfg = dict(CFG, vocab_size=len(vocab))
    model = Llama(cfg)
    # The initial weights as a bf16 checkpoint in Hugging Face's sharded
    # layout; training starts from those bf16 values, held in f32.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().float())
    init = {k: v.clone() for k, v in model.state_dict().items()}
    save_sharded_bf16(os.path.join(ROOT, "tests/golden/llama_hf"), model.named_parameters())
    losses = train(model, train_data, autocast=False)
    model.load_state_dict(init)
    train(model, train_data, autocast=False, iters=TRAINED)
    save_safetensors(os.path.join(ROOT, "tests/golden/llama_trained.safetensors"), model.named_parameters())
    ids = val[:PROMPT].unsqueeze(0)
    margins = []
    with torch.no_grad():
        forced = model(val[:FORCED].unsqueeze(0))[0]
        for _ in range(NEW):
            last = model(ids)[:, -1]
            top2 = last.topk(2, dim=-1).values[0]
            margins.append((top2[0] - top2[1]).item())
            nxt = last.argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    generated = ids[0, PROMPT:].tolist()
    model.load_state_dict(init)
    bf16_losses = train(model, train_data, autocast=True)
    out = {"torch": torch.__version__, "config": cfg, "losses": losses, "bf16_autocast_losses": bf16_losses,
           "prompt": val[:PROMPT].tolist(), "generated": generated, "margins": margins,
           "forced_ids": val[:FORCED].tolist(), "forced_logits": [round(v, 6) for v in forced.flatten().tolist()]}
    with open(os.path.join(ROOT, "tests/golden/llama.json"), "w") as f:
        json.dump(out, f, indent=1)
    print("f32 losses:", " ".join(f"{l:.4f}" for l in losses))
    print("bf16 autocast:", " ".join(f"{l:.4f}" for l in bf16_losses))
    print("generated:", generated)


if __name__ == "__main__":
    main()
