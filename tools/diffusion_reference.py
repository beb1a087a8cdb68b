#!/usr/bin/env python3
"""PyTorch's side of `examples/diffusion.rs`: the same U-Net
(examples/support/unet.rs), DDPM loss (examples/support/ddpm.rs: linear
betas 1e-4 to 0.02 over T = 1000, noise MSE), batches of the shipped MNIST
digits in the loader's order (tools/golden_augment.py), and AdamW at 2e-3
with lazywgpu's `AdamW::new` defaults, which are PyTorch's (betas 0.9,
0.999, eps 1e-8, decoupled weight decay 0.01).

Writes tests/golden/diffusion/ (read by tests/diffusion_example.rs):
  init.safetensors  the initial parameters (torch.manual_seed(0)), named
                    as the example's modules
  losses.json       the first STEPS losses from those weights with the
                    test's `Replay` timesteps and noise, and each step's
                    tolerance, measured from the same steps in f64 and on
                    one thread

--seeds N also trains the example's default run (100 steps of batch 16,
PyTorch's own generator for weights, timesteps and noise) from N seeds and
prints each final loss (mean of the last 50) and time; --png DIR samples a
6x6 grid from each run's EMA weights as the example does (25 steps, eta 1)
into DIR/torch-diffusion-seed{s}.png.

Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/diffusion_reference.py             # writes the golden files
    python3 tools/diffusion_reference.py --seeds 3 --png /tmp/torchpng
"""
import argparse
import copy
import json
import math
import os
import struct
import sys
import time
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from golden_augment import shuffled_batches  # noqa: E402
from gpt_reference import save_safetensors  # noqa: E402
from resnet_reference import read_idx  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
DATA = os.path.join(ROOT, "examples", "data", "mnist-10k")
OUT = os.path.join(ROOT, "tests", "golden", "diffusion")
STEPS = 20
BATCH, WIDTH, GROUPS, T, LR = 16, 16, 8, 1000, 2e-3
FULL_STEPS, TAIL, EMA_DECAY = 100, 50, 0.995
SAMPLE_STEPS, GRID = 25, 6
PARAMS = 146961
MASK = (1 << 64) - 1
# lazywgpu's AdamW::new(params, lr): PyTorch's defaults, weight decay decoupled.
ADAMW = dict(lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def timestep_embedding(t, dim):
    """The sines of t * 10000^(-i / (dim/2)), then the cosines, the
    frequencies computed in t's dtype as unet.rs does in f32."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=t.dtype) * -math.log(10000.0) / half)
    args = t[:, None] * freqs[None]
    return torch.cat([args.sin(), args.cos()], 1)


class ResBlock(nn.Module):
    """GroupNorm -> SiLU -> conv twice, the time embedding added after the
    first conv, a 1x1 conv on the skip path when the channels change."""

    def __init__(self, cin, cout, time_dim, groups):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.time_proj = nn.Linear(time_dim, cout)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_proj(temb)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + (x if self.skip is None else self.skip(x))


class AttnBlock(nn.Module):
    """Single-head self-attention over H*W positions (scale 1/sqrt(C))."""

    def __init__(self, channels, groups):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        self.qkv = nn.Conv2d(channels, 3 * channels, 1)
        self.proj = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        b, c, hh, ww = x.shape
        # [B, 3C, H, W] -> [3, B, HW, C]: queries, keys, values per position.
        qkv = self.qkv(self.norm(x)).reshape(b, 3, c, hh * ww).permute(1, 0, 3, 2)
        h = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return x + self.proj(h.permute(0, 2, 1).reshape(b, c, hh, ww))


class Up(nn.Module):
    """Nearest 2x up-sampling, then a 3x3 conv."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class UNet(nn.Module):
    """unet.rs's noise-predicting U-Net, its attribute names the Rust
    model's (so the state_dict's names are the example's parameters)."""

    def __init__(self, channels=1, base=WIDTH, groups=GROUPS):
        super().__init__()
        c, g, td = base, groups, 4 * base
        self.base = base
        self.time_mlp = nn.Sequential(nn.Linear(c, td), nn.SiLU(), nn.Linear(td, td))
        self.stem = nn.Conv2d(channels, c, 3, padding=1)
        self.down0 = ResBlock(c, c, td, g)
        self.downsample0 = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.down1 = ResBlock(c, 2 * c, td, g)
        self.downsample1 = nn.Conv2d(2 * c, 2 * c, 3, stride=2, padding=1)
        self.mid1 = ResBlock(2 * c, 2 * c, td, g)
        self.mid_attn = AttnBlock(2 * c, g)
        self.mid2 = ResBlock(2 * c, 2 * c, td, g)
        self.upsample1 = Up(2 * c)
        self.up1 = ResBlock(4 * c, 2 * c, td, g)
        self.upsample0 = Up(2 * c)
        self.up0 = ResBlock(3 * c, c, td, g)
        self.out_norm = nn.GroupNorm(g, c)
        self.out_conv = nn.Conv2d(c, channels, 3, padding=1)

    def forward(self, x, t):
        temb = F.silu(self.time_mlp(timestep_embedding(t, self.base)))
        h0 = self.down0(self.stem(x), temb)
        h1 = self.down1(self.downsample0(h0), temb)
        h = self.mid1(self.downsample1(h1), temb)
        h = self.mid2(self.mid_attn(h), temb)
        h = self.up1(torch.cat([self.upsample1(h), h1], 1), temb)
        h = self.up0(torch.cat([self.upsample0(h), h0], 1), temb)
        return self.out_conv(F.silu(self.out_norm(h)))


def schedule():
    """Schedule::linear: alpha_bar in f64 (Python floats), and the f32
    tables of sqrt(alpha_bar) and sqrt(1 - alpha_bar)."""
    alpha_bar, prod = [], 1.0
    for t in range(T):
        prod *= 1.0 - (1e-4 + (0.02 - 1e-4) * (t / (T - 1)))
        alpha_bar.append(prod)
    sqrt_ab = torch.tensor([math.sqrt(a) for a in alpha_bar], dtype=torch.float32)
    sqrt_1m_ab = torch.tensor([math.sqrt(1.0 - a) for a in alpha_bar], dtype=torch.float32)
    return alpha_bar, sqrt_ab, sqrt_1m_ab


def uniform(stream, step, n):
    """Replay::uniform: splitmix64 (64-bit wrapping) of the counter
    stream * 2^56 + step * 2^32 + n, as a float in (0, 1)."""
    z = (((stream << 56) + (step << 32) + n) + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return (((z ^ (z >> 31)) >> 11) + 0.5) / 2.0**53


def replay(step, b, size):
    """tests/diffusion_example.rs's Replay draws of `step`: `b` timesteps
    floor(U * T) and `size` normals (Box-Muller's cosine, in f64), as f32."""
    t = [float(math.floor(uniform(1, step, i) * T)) for i in range(b)]
    z = [math.sqrt(-2.0 * math.log(uniform(2, step, 2 * i)))
         * math.cos(math.tau * uniform(2, step, 2 * i + 1)) for i in range(size)]
    return torch.tensor(t, dtype=torch.float32), torch.tensor(z, dtype=torch.float32)


def train_step(model, opt, tables, x0, t, noise):
    """One AdamW step on noise_prediction_loss (x_t = sqrt(ab_t) x0 +
    sqrt(1 - ab_t) noise, MSE of the predicted noise): the loss."""
    idx = t.long()
    x_t = x0 * tables[0][idx].view(-1, 1, 1, 1) + noise * tables[1][idx].view(-1, 1, 1, 1)
    opt.zero_grad()
    loss = F.mse_loss(model(x_t, t), noise)
    loss.backward()
    opt.step()
    return loss.item()


def replayed_losses(init, tables, inputs, dtype, threads):
    """The golden steps from `init` with the replayed draws `inputs`
    ((x0, t, noise) per step), in `dtype` on `threads` threads."""
    torch.set_num_threads(threads)
    model = UNet()
    model.load_state_dict(init)
    model.to(dtype)
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)
    tables = [tab.to(dtype) for tab in tables]
    return [train_step(model, opt, tables, *(v.to(dtype) for v in step)) for step in inputs]


def round_up(x):
    """`x` rounded up to two significant digits."""
    e = math.floor(math.log10(x)) - 1
    return float(f"{math.ceil(x / 10.0**e * (1 - 1e-12))}e{e}")


def golden(x, tables):
    """Writes init.safetensors and losses.json, with the tolerances."""
    torch.manual_seed(0)
    model = UNet()
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert sum(v.numel() for v in init.values()) == PARAMS, "not the example's U-Net"
    os.makedirs(OUT, exist_ok=True)
    save_safetensors(os.path.join(OUT, "init.safetensors"), init.items())
    order = shuffled_batches(len(x), BATCH, 0, 0, True)
    inputs = []
    for s in range(STEPS):
        x0 = x[order[s]] * 2.0 - 1.0
        t, noise = replay(s, BATCH, x0.numel())
        inputs.append((x0, t, noise.view_as(x0)))
    losses = replayed_losses(init, tables, inputs, torch.float32, 2)
    drift = {}
    for name, dtype, threads in [("f64", torch.float64, 2), ("one thread", torch.float32, 1)]:
        other = replayed_losses(init, tables, inputs, dtype, threads)
        drift[name] = [abs(o - g) / abs(g) for o, g in zip(other, losses)]
    torch.set_num_threads(2)
    # Ten times the largest drift so far, at least 1e-4.
    tolerance, worst = [], 0.0
    for i in range(STEPS):
        worst = max(worst, *(d[i] for d in drift.values()))
        tolerance.append(round_up(max(1e-4, 10 * worst)))
    maxima = ", ".join(f"{name} {max(d):.1e} (step {d.index(max(d))})"
                       for name, d in drift.items())
    note = (f"PyTorch {torch.__version__} on the CPU, f32, 2 threads. The same {STEPS} steps "
            f"in f64, or in f32 on one thread, differ from these losses by at most (relative) "
            f"{maxima}; tolerance[i] = max(1e-4, 10 x the largest of those differences at "
            f"any step <= i), rounded up to two significant digits.")
    with open(os.path.join(OUT, "losses.json"), "w") as f:
        json.dump({"torch": torch.__version__, "seed": 0, "batch": BATCH, "timesteps": T,
                   "lr": LR, "losses": losses, "tolerance": tolerance,
                   "drift_f64": drift["f64"], "drift_one_thread": drift["one thread"],
                   "note": note}, f)
        f.write("\n")
    print("losses:", ", ".join(f"{v:.5f}" for v in losses))
    for name, d in list(drift.items()) + [("tolerance", tolerance)]:
        print(f"{name}:", ", ".join(f"{v:.1e}" for v in d))
    print(note)


@torch.no_grad()
def sample(model, alpha_bar, n, eta=1.0):
    """diffusion.rs's sample(): SAMPLE_STEPS timesteps from T-1 down to 0,
    DDIM's update with noise `eta`, the predicted image clipped to [-1, 1]."""
    steps = min(SAMPLE_STEPS, T)
    ts = [((steps - 1 - i) * (T - 1)) // max(steps - 1, 1) for i in range(steps)]
    x = torch.randn(n, 1, 28, 28)
    for i, t in enumerate(ts):
        ab = alpha_bar[t]
        ab_prev = alpha_bar[ts[i + 1]] if i + 1 < len(ts) else 1.0
        sigma = eta * math.sqrt((1.0 - ab_prev) / (1.0 - ab) * (1.0 - ab / ab_prev))
        direction = math.sqrt(max(1.0 - ab_prev - sigma * sigma, 0.0))
        eps = model(x, torch.full((n,), float(t)))
        x0 = ((x - eps * math.sqrt(1.0 - ab)) * (1.0 / math.sqrt(ab))).clamp(-1.0, 1.0)
        eps = (x - x0 * math.sqrt(ab)) * (1.0 / math.sqrt(1.0 - ab))
        x = x0 * math.sqrt(ab_prev) + eps * direction
        if sigma > 0.0:
            x = x + torch.randn(n, 1, 28, 28) * sigma
    return x


def write_png(path, images, side):
    """diffusion.rs's grid(): `side` images a row, a 2-pixel border, bytes
    round((v + 1) * 127.5); written as an 8-bit grey PNG."""
    n, _, h, w = images.shape
    pad = 2
    gw, gh = side * (w + pad) + pad, -(-n // side) * (h + pad) + pad
    grid = torch.zeros(gh, gw, dtype=torch.uint8)
    # Rounded half up (Rust's round() for these non-negative values), clamped.
    pixels = ((images[:, 0] + 1.0) * 127.5 + 0.5).floor().clamp(0, 255).to(torch.uint8)
    for k in range(n):
        oy, ox = pad + (k // side) * (h + pad), pad + (k % side) * (w + pad)
        grid[oy:oy + h, ox:ox + w] = pixels[k]
    raw = b"".join(b"\x00" + bytes(row) for row in grid.tolist())  # filter 0 per row

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", gw, gh, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def full_run(seed, x, alpha_bar, tables, png_dir):
    """The example's default run from `seed`: its final loss and seconds."""
    torch.manual_seed(seed)
    model = UNet()
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)
    shadow = [p.detach().clone() for p in model.parameters()]
    # The loader's batches, epoch after epoch (shuffled, drop_last).
    epochs = FULL_STEPS // (len(x) // BATCH) + 1
    order = [b for e in range(epochs) for b in shuffled_batches(len(x), BATCH, seed, e, True)]
    losses = []
    start = time.time()
    for n in range(FULL_STEPS):
        x0 = x[order[n]] * 2.0 - 1.0
        # Timesteps, then noise, as ddpm.rs's diffusion_loss draws them.
        t = (torch.rand(BATCH) * T).floor().clamp(max=T - 1)
        losses.append(train_step(model, opt, tables, x0, t, torch.randn_like(x0)))
        decay = min(EMA_DECAY, (1.0 + n) / (10.0 + n))
        with torch.no_grad():  # lazywgpu's Ema: decay * ema + (1 - decay) * p
            for e, p in zip(shadow, model.parameters()):
                e.mul_(decay).add_(p * (1.0 - decay))
    secs = time.time() - start
    if png_dir:
        ema_model = copy.deepcopy(model)
        with torch.no_grad():
            for q, e in zip(ema_model.parameters(), shadow):
                q.copy_(e)
        os.makedirs(png_dir, exist_ok=True)
        write_png(os.path.join(png_dir, f"torch-diffusion-seed{seed}.png"),
                  sample(ema_model, alpha_bar, GRID * GRID), GRID)
    tail = losses[-TAIL:]
    return sum(tail) / len(tail), secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=0, help="full runs to time and score")
    ap.add_argument("--png", metavar="DIR", help="sample each full run's EMA weights into DIR")
    args = ap.parse_args()
    torch.set_num_threads(2)
    # The training digits [N, 1, 28, 28] in [0, 1], as the loader's (bytes / 255).
    x = (read_idx("train-images-idx3-ubyte").float() / 255.0).unsqueeze(1)
    alpha_bar, sqrt_ab, sqrt_1m_ab = schedule()
    golden(x, (sqrt_ab, sqrt_1m_ab))
    for seed in range(args.seeds):
        final, secs = full_run(seed, x, alpha_bar, (sqrt_ab, sqrt_1m_ab), args.png)
        print(f"seed {seed}: loss {final:.4f} (mean of the last {TAIL}), {secs:.1f} s for "
              f"{FULL_STEPS} steps ({torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
