#!/usr/bin/env python3
"""Writes tests/golden/optim.json: PyTorch's learning-rate schedules,
momentum cycling, SGD with parameter groups and an exponential moving
average of weights (tests/golden_optim.rs reads it).

Run by hand where PyTorch is installed (CI does not run it):

    python3 tools/golden_optim.py       # writes tests/golden/optim.json

Sections:

- `one_cycle`: OneCycleLR's rate and momentum (SGD's `momentum`) at every
  step from 0 to `total_steps`, cosine and linear, two and three phases.
- `multi_step`: MultiStepLR's rates of two parameter groups.
- `plateau`: ReduceLROnPlateau's rates of two groups after each metric of
  a fixed sequence; the metrics are strings (Python's repr) so that the
  Rust test parses exactly Python's doubles, some of them on the
  threshold's edge.
- `sgd_groups`: the parameters of a linear regression after each step of
  SGD over two parameter groups (momentum, dampening, Nesterov, weight
  decay, per-group values over the defaults).
- `momentum_cycling`: SGD, Adam and AdamW driven by OneCycleLR (rate and
  momentum / beta1) on `loss = sum(a * (w - t)^2)`: the parameters, rate
  and momentum after each step.
- `ema`: `ema = decay * ema + (1 - decay) * param` (timm's ModelEmaV2
  form; the average starts at the parameters) over a fixed sequence of
  parameter values, the decay changed half-way.

Tensors are {"shape": [...], "data": [...]} (f32 values, row-major).
"""
import json
import os
import warnings

import torch
from torch.optim.lr_scheduler import MultiStepLR, OneCycleLR, ReduceLROnPlateau

# The schedules are stepped without optimiser steps here.
warnings.filterwarnings("ignore")
torch.manual_seed(0)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "optim.json")


def enc(t):
    t = t.detach().cpu().to(torch.float32)
    return {"shape": list(t.shape), "data": t.flatten().tolist()}


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def group_values(opt, key):
    return [g[key] for g in opt.param_groups]


def momentum_of(opt):
    """SGD's momentum or Adam's beta1 of group 0."""
    g = opt.param_groups[0]
    return g["betas"][0] if "betas" in g else g["momentum"]


# --- OneCycleLR ---
def one_cycle_args(max_lr, total_steps, pct_start=0.3, anneal="cos", three_phase=False,
                   div_factor=25.0, final_div_factor=1e4, cycle_momentum=True,
                   base_momentum=0.85, max_momentum=0.95):
    return {"max_lr": max_lr, "total_steps": total_steps, "pct_start": pct_start,
            "anneal_strategy": anneal, "three_phase": three_phase, "div_factor": div_factor,
            "final_div_factor": final_div_factor, "cycle_momentum": cycle_momentum,
            "base_momentum": base_momentum, "max_momentum": max_momentum}


def one_cycle(opt, args):
    return OneCycleLR(opt, **args)


one_cycle_cases = []
for name, args in [
    ("cos", one_cycle_args(0.1, 20)),
    ("linear", one_cycle_args(0.5, 17, pct_start=0.25, anneal="linear")),
    ("cos_three_phase", one_cycle_args(0.1, 30, three_phase=True)),
    ("linear_three_phase", one_cycle_args(0.2, 25, pct_start=0.4, anneal="linear",
                                          three_phase=True, div_factor=10.0,
                                          final_div_factor=100.0, base_momentum=0.8,
                                          max_momentum=0.9)),
    ("no_momentum_cycle", one_cycle_args(1.0, 12, pct_start=0.5, cycle_momentum=False)),
    ("one_step", one_cycle_args(0.3, 1)),
]:
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.01, momentum=0.9)
    sched = one_cycle(opt, args)
    lrs, momenta = [opt.param_groups[0]["lr"]], [momentum_of(opt)]
    for _ in range(args["total_steps"]):
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        momenta.append(momentum_of(opt))
    one_cycle_cases.append({"name": name, "args": args, "lrs": lrs,
                            "momenta": momenta if args["cycle_momentum"] else None})

# --- MultiStepLR ---
multi_step_cases = []
for name, milestones, gamma, steps in [
    ("sorted", [3, 7], 0.1, 10),
    ("unsorted_repeated", [5, 2, 9, 5], 0.5, 12),
]:
    opt = torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": 0.3},
                           {"params": [torch.zeros(1, requires_grad=True)], "lr": 0.01}], lr=0.1)
    base_lrs = group_values(opt, "lr")
    sched = MultiStepLR(opt, milestones=milestones, gamma=gamma)
    lrs = [group_values(opt, "lr")]
    for _ in range(steps):
        sched.step()
        lrs.append(group_values(opt, "lr"))
    multi_step_cases.append({"name": name, "milestones": milestones, "gamma": gamma,
                             "base_lrs": base_lrs, "lrs": lrs})

# --- ReduceLROnPlateau ---
# A loss that improves, stalls, improves by less than the threshold and
# creeps; `max` cases read 2 - loss (an accuracy-like metric).
LOSS = [1.0, 0.9999, 0.8, 0.8, 0.79995, 0.81, 0.82, 0.7, 0.7, 0.7, 0.7, 0.69,
        0.6999, 0.5, 0.55, 0.56, 0.57, 0.58, 0.5, 0.49999, 0.4, 0.45, 0.46, 0.47,
        0.48, 0.49, 0.5, 0.51, 0.52, 0.53]
plateau_cases = []
for name, mode, kwargs in [
    ("min_rel_defaults", "min", {}),
    ("min_rel", "min", {"patience": 2, "factor": 0.5}),
    ("min_abs_cooldown", "min", {"patience": 1, "factor": 0.3, "threshold": 0.01,
                                 "threshold_mode": "abs", "cooldown": 2}),
    ("min_rel_min_lr", "min", {"patience": 0, "factor": 0.5, "min_lr": 0.004, "eps": 1e-3}),
    ("max_rel", "max", {"patience": 2, "factor": 0.5, "threshold": 0.01}),
    ("max_abs_cooldown", "max", {"patience": 1, "factor": 0.2, "threshold": 0.005,
                                 "threshold_mode": "abs", "cooldown": 3, "min_lr": 1e-4}),
]:
    opt = torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": 0.1},
                           {"params": [torch.zeros(1, requires_grad=True)], "lr": 0.02}], lr=0.1)
    base_lrs = group_values(opt, "lr")
    sched = ReduceLROnPlateau(opt, mode=mode, **kwargs)
    metrics = LOSS if mode == "min" else [2.0 - v for v in LOSS]
    lrs = []
    for m in metrics:
        sched.step(m)
        lrs.append(group_values(opt, "lr"))
    full = {"mode": mode, "factor": 0.1, "patience": 10, "threshold": 1e-4,
            "threshold_mode": "rel", "cooldown": 0, "min_lr": 0.0, "eps": 1e-8}
    full.update(kwargs)
    plateau_cases.append({"name": name, "args": full, "base_lrs": base_lrs,
                          "metrics": [repr(m) for m in metrics], "lrs": lrs})


# --- SGD with parameter groups on a linear regression ---
def regression_loss(w, b, x, y):
    return ((x @ w + b - y) ** 2).sum()


sgd_cases = []
x, y = randn(4, 3), randn(4, 2)
w0, b0 = randn(3, 2) * 0.5, randn(2) * 0.5
for name, defaults, groups in [
    ("momentum_dampening_decay",
     {"lr": 0.02, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.0, "nesterov": False},
     [{"lr": 0.05, "momentum": None, "weight_decay": 0.01},
      {"lr": None, "momentum": 0.5, "weight_decay": None}]),
    ("nesterov",
     {"lr": 0.02, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.001, "nesterov": True},
     [{"lr": None, "momentum": None, "weight_decay": 0.02},
      {"lr": 0.01, "momentum": 0.7, "weight_decay": None}]),
    ("momentum_in_one_group",
     {"lr": 0.03, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.05, "nesterov": False},
     [{"lr": None, "momentum": None, "weight_decay": None},
      {"lr": 0.04, "momentum": 0.0, "weight_decay": 0.0}]),
]:
    w = w0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    param_groups = []
    for p, g in zip([w, b], groups):
        d = {"params": [p]}
        d.update({k: v for k, v in g.items() if v is not None})
        param_groups.append(d)
    opt = torch.optim.SGD(param_groups, **defaults)
    steps = []
    for _ in range(6):
        opt.zero_grad()
        regression_loss(w, b, x, y).backward()
        opt.step()
        steps.append([enc(w), enc(b)])
    sgd_cases.append({"name": name, "defaults": defaults, "groups": groups,
                      "inputs": {"x": enc(x), "y": enc(y), "w": enc(w0), "b": enc(b0)},
                      "steps": steps})

# --- Momentum cycling: optimisers driven by OneCycleLR on a quadratic ---
A = torch.tensor([1.0, 0.5, 2.0, 0.25, 1.5])
T = torch.tensor([1.0, -2.0, 0.5, 3.0, -0.5])
W0 = torch.tensor([0.0, 1.0, -1.0, 2.0, 0.5])
cycling_cases = []
for name, optimizer, opt_args, args in [
    ("sgd", "sgd", {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.0, "nesterov": False},
     one_cycle_args(0.1, 10)),
    ("sgd_nesterov_three_phase", "sgd",
     {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.01, "nesterov": True},
     one_cycle_args(0.05, 9, anneal="linear", three_phase=True)),
    ("sgd_from_zero_momentum", "sgd",
     {"lr": 0.01, "momentum": 0.0, "weight_decay": 0.01, "nesterov": False},
     one_cycle_args(0.05, 8)),
    ("adam", "adam", {"lr": 0.01, "weight_decay": 0.01}, one_cycle_args(0.2, 10)),
    ("adamw_three_phase", "adamw", {"lr": 0.01, "weight_decay": 0.1},
     one_cycle_args(0.3, 12, anneal="linear", three_phase=True, base_momentum=0.8,
                    max_momentum=0.9)),
]:
    w = W0.clone().requires_grad_(True)
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer]
    opt = cls([w], **opt_args)
    sched = one_cycle(opt, args)
    params, lrs, momenta = [], [opt.param_groups[0]["lr"]], [momentum_of(opt)]
    for _ in range(args["total_steps"]):
        opt.zero_grad()
        (A * (w - T) ** 2).sum().backward()
        opt.step()
        sched.step()
        params.append(enc(w))
        lrs.append(opt.param_groups[0]["lr"])
        momenta.append(momentum_of(opt))
    cycling_cases.append({"name": name, "optimizer": optimizer, "opt_args": opt_args,
                          "schedule": args, "a": enc(A), "t": enc(T), "w": enc(W0),
                          "params": params, "lrs": lrs, "momenta": momenta})

# --- EMA of weights ---
shapes = [(3, 2), (4,)]
inits = [randn(*s) for s in shapes]
decays = [0.9, 0.9, 0.9, 0.5, 0.5, 0.99]
updates = [[randn(*s) for s in shapes] for _ in decays]
ema = [p.clone() for p in inits]
averages = []
for decay, values in zip(decays, updates):
    for e, p in zip(ema, values):
        e.copy_(e * decay + (1.0 - decay) * p)
    averages.append([enc(e) for e in ema])
ema_case = {"inits": [enc(p) for p in inits], "decays": decays,
            "updates": [[enc(p) for p in values] for values in updates], "averages": averages}

with open(OUT, "w") as f:
    json.dump({"torch": torch.__version__, "one_cycle": one_cycle_cases,
               "multi_step": multi_step_cases, "plateau": plateau_cases,
               "sgd_groups": sgd_cases, "momentum_cycling": cycling_cases, "ema": ema_case}, f)
print(f"wrote {OUT}: {len(one_cycle_cases)} one-cycle, {len(multi_step_cases)} multi-step, "
      f"{len(plateau_cases)} plateau, {len(sgd_cases)} SGD-group, "
      f"{len(cycling_cases)} momentum-cycling cases and the EMA")
