#!/usr/bin/env python3
"""PyTorch's peak memory for one training step of PyTorch's MNIST example
network (batch 64, dropout, Adadelta lr 1.0) and for its evaluation batch
(1,000 digits under no_grad), and for one training step of the ResNet of
examples/resnet.rs (tools/resnet_reference.py's model: batch 64, the
batch cropped and normalised in the step, SGD with Nesterov momentum and
weight decay) and of the diffusion U-Net of examples/diffusion.rs (its
default width 16 on 28x28 digits, batch 16, noise MSE, AdamW lr 2e-3, the
EMA of the weights updated in the step), on the CPU: the bytes held
before the step (parameters, gradients, optimiser state, the batch) plus
the highest level its own allocations reach during the step, from every
allocation and free the profiler saw, in time order (those inside an op
included). Compare with the `mnist`, `resnet` and `diffusion` examples'
"peak device memory" lines: lazywgpu counts every buffer and scratch
texture it allocates the same way, parameters included.

    python3 tools/torch_memory.py            # every allocation
    python3 tools/torch_memory.py --op-end   # the level at op ends only

`--op-end` is the measure used before 2026-11-27: it takes the level at
the end of each op, so what an op allocates and frees within itself (a
convolution's column buffers) never counts, a lower bound. Run by hand
where PyTorch is installed (CI does not run it), in the same sitting.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(__file__))
from diffusion_reference import UNet  # noqa: E402


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def memory_timeline(run):
    """The allocations (+bytes) and frees (-bytes) made by `run` on the
    CPU, in time order, each event as the allocator saw it: those inside
    an op (a convolution's column buffers, its backward's temporaries)
    included. (PyTorch's own per-op CPU totals also count MKLDNN/IDEEP
    device events; ideep allocates through the CPU allocator, whose
    events these are.)"""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    cpu = torch._C._autograd.DeviceType.CPU
    events = [e for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]" and e.device_type() == cpu]
    events.sort(key=lambda e: e.start_ns())
    return [e.nbytes() for e in events]


def op_end_level(run):
    """The former measure, kept for comparison: the level taken at the
    end of each op (an op's total allocations less its frees), so what an
    op allocates and frees inside itself never counts."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    events = [e for e in prof.events() if e.self_cpu_memory_usage != 0]
    events.sort(key=lambda e: e.time_range.start)
    return [e.self_cpu_memory_usage for e in events]


# Which measure `peak_of` takes: "allocations" (every allocation, as
# lazywgpu counts every buffer and scratch texture it allocates, within
# a kernel or not) or "op-end" (the level at op ends only).
MEASURE = "allocations"


def peak_of(run):
    """The highest level the allocations made by `run` reach above what
    was held before it (a running sum of the profiler's memory events)."""
    changes = (memory_timeline if MEASURE == "allocations" else op_end_level)(run)
    level = peak = 0
    for change in changes:
        level += change
        peak = max(peak, level)
    return peak


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = cnn()
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    x = torch.randn(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        loss = F.nll_loss(F.log_softmax(model(x), 1), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):  # gradients and optimiser state exist from here
        step()
    # zero_grad(set_to_none=True) frees the gradients at the step's start,
    # so they count in the step's own allocations, not in what is held.
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    held = tensor_bytes(params) + tensor_bytes(state) + tensor_bytes([x, y])
    train = held + peak_of(step)

    model.eval()
    xe = torch.randn(1000, 1, 28, 28)
    with torch.no_grad():
        model(xe)
        held_eval = tensor_bytes(params) + tensor_bytes(state) + tensor_bytes([xe])
        evaluation = held_eval + peak_of(lambda: model(xe).argmax(1))
    mb = 1e6
    measure = ("every allocation counted" if MEASURE == "allocations"
               else "levels at op ends only")
    print(f"PyTorch {torch.__version__}, CPU, {torch.get_num_threads()} threads; {measure}")
    print(f"training step (batch 64): peak {train / mb:.2f} MB "
          f"({held / mb:.1f} MB parameters, optimiser state and batch held before it)")
    print(f"evaluation (batch 1000, no_grad): peak {evaluation / mb:.2f} MB")
    print(f"ResNet training step (batch 64): peak {resnet_step() / mb:.2f} MB")
    unet_peak, unet_params = unet_step()
    print(f"U-Net training step (batch {UNET_BATCH}): peak {unet_peak / mb:.2f} MB "
          f"({unet_params} parameters)")


def resnet_step():
    """The peak of a ResNet training step, as the CNN's above."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from resnet_reference import (MEAN, PADDING, SIZE, STD, ResNet, augment,
                                  compose_rng, crop_draws, trainer)
    torch.manual_seed(0)
    model = ResNet()
    step = trainer(model, 125)
    x = torch.rand(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))

    def augmented_step(s):
        # The example's step: the loader's batch cropped with padding and
        # normalised (examples/resnet.rs does it on the device, in the step).
        crops = crop_draws(compose_rng(0, s), 64, 28, 28, SIZE, PADDING)
        return step(augment(x, crops, [False] * 64, SIZE, PADDING, MEAN, STD), y)

    for s in range(3):
        augmented_step(s)
    # The parameters and SGD's momentum buffers (one of each parameter's
    # size, inside the trainer's optimiser), BatchNorm's buffers, the batch.
    params = list(model.parameters())
    held = 2 * tensor_bytes(params) + tensor_bytes(list(model.buffers()))
    held += tensor_bytes([x, y])
    return held + peak_of(lambda: augmented_step(3))


# examples/diffusion.rs's defaults: --width 16 (GroupNorm's groups
# min(8, width)), --batch-size 16, --lr 2e-3, --ema-decay 0.995,
# --timesteps 1000, on MNIST's 1x28x28 digits.
UNET_BATCH, UNET_T = 16, 1000


def unet_step():
    """The peak of a training step of the diffusion example's U-Net, as
    the CNN's above, and its parameter count."""
    torch.manual_seed(0)
    model = UNet()  # tools/diffusion_reference.py's, the example's names
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.01)
    # The linear beta schedule's tables, as Schedule::linear's.
    betas = torch.linspace(1e-4, 0.02, UNET_T, dtype=torch.float64)
    alpha_bar = torch.cumprod(1.0 - betas, 0)
    sqrt_ab = alpha_bar.sqrt().float()
    sqrt_1m_ab = (1.0 - alpha_bar).sqrt().float()
    # The EMA's average starts at the weights, as lazywgpu's Ema.
    shadow = [p.detach().clone() for p in model.parameters()]
    updates = 0
    images = torch.rand(UNET_BATCH, 1, 28, 28)

    def step():
        nonlocal updates
        # The example's step: [0, 1] -> [-1, 1], timesteps and noise drawn
        # in the step, the noise MSE, AdamW, then the EMA update.
        x0 = images * 2.0 - 1.0
        opt.zero_grad()
        t = (torch.rand(UNET_BATCH) * UNET_T).floor().clamp(max=UNET_T - 1)
        noise = torch.randn_like(x0)
        idx = t.long()
        x_t = (x0 * sqrt_ab[idx].reshape(-1, 1, 1, 1)
               + noise * sqrt_1m_ab[idx].reshape(-1, 1, 1, 1))
        loss = F.mse_loss(model(x_t, t), noise)
        loss.backward()
        opt.step()
        decay = min(0.995, (1.0 + updates) / (10.0 + updates))
        with torch.no_grad():
            for e, p in zip(shadow, model.parameters()):
                e.lerp_(p, 1.0 - decay)  # decay * e + (1 - decay) * p, in place
        updates += 1
        return loss.item()

    for _ in range(3):
        step()
    # The parameters, AdamW's two moments (and its step counters), the
    # average, the schedule's tables and the batch. (The example samples
    # with the trained model after copying the average into it, so it
    # holds no second U-Net while training.)
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    held = tensor_bytes(params) + tensor_bytes(state) + tensor_bytes(shadow)
    held += tensor_bytes([sqrt_ab, sqrt_1m_ab, images])
    return held + peak_of(step), sum(p.numel() for p in params)


if __name__ == "__main__":
    if "--op-end" in sys.argv[1:]:
        MEASURE = "op-end"
    main()
