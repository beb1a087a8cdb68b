#!/usr/bin/env python3
"""Writes tests/golden/augment.json: a batch augmented as lazywgpu's
`data::augment::Compose` does it (RandomCrop, RandomHorizontalFlip,
Normalize), with the random draws replayed here from splitmix64 and the
pixel work done by PyTorch; and one epoch's batch order of
`data::shuffled_batches` (what `DataLoader::shuffle` uses).
tests/augment.rs reads it.

Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/golden_augment.py     # writes tests/golden/augment.json

The functions below are the reference for replaying lazywgpu's draws in a
PyTorch training script: `compose_rng(seed, step)`, then each transform's
draws in order (`crop_draws`, `flip_draws`).
"""
import json
import os

import torch
import torch.nn.functional as F

MASK = (1 << 64) - 1
STEP_MIX = 0xA0761D6478BD642F
EPOCH_MIX = 0xD1B54A32D192ED03
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "augment.json")


class SplitMix64:
    """lazywgpu::data::SplitMix64."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def permutation(self, n):
        p = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.next_u64() % (i + 1)
            p[i], p[j] = p[j], p[i]
        return p


def shuffled_batches(n, batch_size, seed, epoch, drop_last):
    """lazywgpu::data::shuffled_batches."""
    order = SplitMix64(seed ^ ((epoch * EPOCH_MIX) & MASK)).permutation(n)
    batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    return [b for b in batches if not drop_last or len(b) == batch_size]


def compose_rng(seed, step):
    """The generator of batch `step` (augment::Compose::rng)."""
    return SplitMix64(seed ^ (((step + 1) * STEP_MIX) & MASK))


def crop_draws(rng, b, h, w, size, padding):
    """RandomCrop's (top, left) per image."""
    rows, cols = h + 2 * padding - size + 1, w + 2 * padding - size + 1
    out = []
    for _ in range(b):
        top = rng.next_u64() % rows
        left = rng.next_u64() % cols
        out.append((top, left))
    return out


def flip_draws(rng, b, p):
    """RandomHorizontalFlip's decision per image."""
    return [(rng.next_u64() >> 11) * 2.0**-53 < p for _ in range(b)]


def augment(x, crops, flips, size, padding, mean, std):
    """The pixel work, in PyTorch, for given draws."""
    xp = F.pad(x, (padding, padding, padding, padding))
    out = torch.stack([xp[i, :, t:t + size, l:l + size] for i, (t, l) in enumerate(crops)])
    out = torch.stack([o.flip(-1) if f else o for o, f in zip(out, flips)])
    m = torch.tensor(mean).view(1, -1, 1, 1)
    s = torch.tensor(std).view(1, -1, 1, 1)
    return (out - m) / s


def main():
    b, c, h, w = 5, 3, 6, 5
    size, padding, p = 4, 2, 0.5
    mean, std = [0.1, 0.2, 0.3], [0.5, 1.0, 2.0]
    seed = 2024
    x = torch.tensor([((i * 37) % 101) / 100.0 for i in range(b * c * h * w)],
                     dtype=torch.float32).view(b, c, h, w)
    steps = []
    for step in [0, 1, 7]:
        rng = compose_rng(seed, step)
        crops = crop_draws(rng, b, h, w, size, padding)
        flips = flip_draws(rng, b, p)
        y = augment(x, crops, flips, size, padding, mean, std)
        steps.append({
            "step": step,
            "crops": [list(cr) for cr in crops],
            "flips": flips,
            "output": {"shape": list(y.shape), "data": y.flatten().tolist()},
        })
    golden = {
        "torch": torch.__version__,
        "seed": seed,
        "size": size,
        "padding": padding,
        "p": p,
        "mean": mean,
        "std": std,
        "input": {"shape": [b, c, h, w], "data": x.flatten().tolist()},
        "steps": steps,
        "shuffle": {"n": 10, "batch_size": 4, "seed": 5, "epoch": 3,
                    "batches": shuffled_batches(10, 4, 5, 3, False)},
    }
    with open(OUT, "w") as f:
        json.dump(golden, f)
        f.write("\n")


if __name__ == "__main__":
    main()
