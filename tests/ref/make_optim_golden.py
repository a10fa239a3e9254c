#!/usr/bin/env python3
"""Writes tests/data/optim_golden.json: torch.optim / transformers reference values for the optimizer,
schedule and clipping tests (tests/lua/test_optim.lua). Reference side; never run by tests.

Parameters (float32, Hugging Face names, so the Lua side forms the same weight-decay groups):
  encoder.layer.0.attention.self.query.weight      [4, 3]  decayed
  encoder.layer.0.attention.self.query.bias        [4]     not decayed (name ends in "bias")
  encoder.layer.0.attention.output.LayerNorm.weight [3]    not decayed (LayerNorm)
Gradients: 10 fixed steps of seeded normals (stored). Groups follow transformers' Trainer
(get_decay_parameter_names): weight_decay on the first group only.

  optimizers.<case>: { config (the Lua optim table), schedule (optional), params (initial),
                       grads[step][name], after[step][name] (parameters after each step),
                       lr[step] (the lr the step used) }
  schedules.<case>:  { config (the Lua schedule table), base_lr, total_steps, lr[k] for k = 0..24 }
                       (LambdaLR: the lr of optimizer step k is base_lr * lambda(k))
  clip.<case>:       { max_norm, grads (in), total_norm, clipped (out) }   (torch.nn.utils.clip_grad_norm_)

Every number is a float32 value written as the nearest double (json's repr), so it reads back exactly.
Usage: /tmp/refvenv/bin/python tests/ref/make_optim_golden.py
"""
import json
import math
import os

import torch
import transformers
from transformers.optimization import Adafactor, get_scheduler

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "optim_golden.json")

NAMES = [
    ("encoder.layer.0.attention.self.query.weight", (4, 3)),
    ("encoder.layer.0.attention.self.query.bias", (4,)),
    ("encoder.layer.0.attention.output.LayerNorm.weight", (3,)),
]
STEPS = 10


def no_decay(name):
    return name.endswith("bias") or "layernorm" in name.lower() or "layer_norm" in name.lower()


def tolist(t):
    return t.detach().to(torch.float32).tolist()


gen = torch.Generator().manual_seed(1234)
INIT = {n: torch.randn(s, generator=gen) for n, s in NAMES}
GRADS = [{n: torch.randn(s, generator=gen) * (0.5 if "bias" in n else 1.0) for n, s in NAMES} for _ in range(STEPS)]


def make_params():
    return {n: torch.nn.Parameter(INIT[n].clone()) for n, _ in NAMES}


def groups(params, wd):
    return [
        {"params": [p for n, p in params.items() if not no_decay(n)], "weight_decay": wd},
        {"params": [p for n, p in params.items() if no_decay(n)], "weight_decay": 0.0},
    ]


def run(make_opt, config, schedule=None):
    params = make_params()
    opt = make_opt(params)
    sched = None
    if schedule:
        sched = get_scheduler(schedule["name"], opt, num_warmup_steps=schedule["warmup_steps"],
                              num_training_steps=STEPS)
    after, lrs = [], []
    for k in range(STEPS):
        for n, p in params.items():
            p.grad = GRADS[k][n].clone()
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched:
            sched.step()
        after.append({n: tolist(p) for n, p in params.items()})
    case = {
        "config": config,
        "params": {n: tolist(INIT[n]) for n, _ in NAMES},
        "grads": [{n: tolist(g[n]) for n, _ in NAMES} for g in GRADS],
        "after": after,
        "lr": lrs,
    }
    if schedule:
        case["schedule"] = {"name": schedule["name"], "warmup_steps": schedule["warmup_steps"], "total_steps": STEPS}
    return case


def optimizers():
    out = {}
    adamw = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
    out["adamw_wd"] = run(lambda p: torch.optim.AdamW(groups(p, 0.1), **adamw, amsgrad=False, foreach=False),
                          {"name": "adamw", "lr": 1e-2, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.1})
    out["adamw_nowd"] = run(lambda p: torch.optim.AdamW(groups(p, 0.0), **adamw, amsgrad=False, foreach=False),
                            {"name": "adamw", "lr": 1e-2, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0})
    out["adamw_linear_warmup"] = run(
        lambda p: torch.optim.AdamW(groups(p, 0.01), lr=1e-2, foreach=False),
        {"name": "adamw", "lr": 1e-2, "weight_decay": 0.01}, schedule={"name": "linear", "warmup_steps": 3})
    for nest in (False, True):
        key = "sgd_nesterov" if nest else "sgd_momentum"
        out[key] = run(lambda p: torch.optim.SGD(groups(p, 0.01), lr=0.05, momentum=0.9, nesterov=nest,
                                                 foreach=False),
                       {"name": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": nest, "weight_decay": 0.01})
    out["sgd_plain"] = run(lambda p: torch.optim.SGD(groups(p, 0.0), lr=0.1, foreach=False),
                           {"name": "sgd", "lr": 0.1, "weight_decay": 0.0})
    # transformers' defaults: relative step, parameter scale, no first moment, no weight decay
    out["adafactor_default"] = run(lambda p: Adafactor(groups(p, 0.0)),
                                   {"name": "adafactor", "weight_decay": 0.0})
    # what the Trainer builds for optim="adafactor": an explicit lr, no relative step, no scale
    out["adafactor_lr"] = run(
        lambda p: Adafactor(groups(p, 0.01), lr=1e-2, relative_step=False, scale_parameter=False, warmup_init=False),
        {"name": "adafactor", "lr": 1e-2, "weight_decay": 0.01, "relative_step": False, "scale_parameter": False,
         "warmup_init": False})
    out["adafactor_beta1_warmup_init"] = run(
        lambda p: Adafactor(groups(p, 0.0), beta1=0.9, warmup_init=True, clip_threshold=0.5),
        {"name": "adafactor", "weight_decay": 0.0, "beta1": 0.9, "warmup_init": True, "clip_threshold": 0.5})
    return out


def schedules():
    out = {}
    total, base = 20, 1e-3
    cases = {
        "constant": ("constant", {}, 0),
        "constant_warmup": ("constant_with_warmup", {}, 3),
        "linear_warmup_steps": ("linear", {}, 3),
        "linear_warmup_ratio": ("linear", {}, math.ceil(0.22 * total)),
        "cosine_warmup": ("cosine", {}, 4),
        "cosine_no_warmup": ("cosine", {}, 0),
        "polynomial_warmup": ("polynomial", {"power": 2.0, "lr_end": 1e-4}, 3),
        "polynomial_default": ("polynomial", {}, 2),
    }
    lua_cfg = {
        "constant": {"name": "constant"},
        "constant_warmup": {"name": "constant", "warmup_steps": 3},
        "linear_warmup_steps": {"name": "linear", "warmup_steps": 3},
        "linear_warmup_ratio": {"name": "linear", "warmup_ratio": 0.22},
        "cosine_warmup": {"name": "cosine", "warmup_steps": 4},
        "cosine_no_warmup": {"name": "cosine"},
        "polynomial_warmup": {"name": "polynomial", "warmup_steps": 3, "power": 2.0, "lr_end": 1e-4},
        "polynomial_default": {"name": "polynomial", "warmup_steps": 2},
    }
    for key, (name, kw, warm) in cases.items():
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=base)
        sched = get_scheduler(name, opt, num_warmup_steps=warm, num_training_steps=total,
                              scheduler_specific_kwargs=kw or None)
        lrs = []
        for _ in range(total + 5):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        out[key] = {"config": lua_cfg[key], "base_lr": base, "total_steps": total, "lr": lrs}
    return out


def clipping():
    out = {}
    for key, max_norm in (("clipped", 1.0), ("unclipped", 100.0)):
        gs = [GRADS[0][n].clone() for n, _ in NAMES]
        ps = [torch.nn.Parameter(INIT[n].clone()) for n, _ in NAMES]
        for p, g in zip(ps, gs):
            p.grad = g.clone()
        total = torch.nn.utils.clip_grad_norm_(ps, max_norm, foreach=False)
        out[key] = {"max_norm": max_norm, "grads": {n: tolist(g) for (n, _), g in zip(NAMES, gs)},
                    "total_norm": float(total), "clipped": {n: tolist(p.grad) for (n, _), p in zip(NAMES, ps)}}
    return out


def main():
    data = {
        "torch": torch.__version__, "transformers": transformers.__version__,
        "names": [n for n, _ in NAMES],
        "optimizers": optimizers(), "schedules": schedules(), "clip": clipping(),
    }
    with open(OUT, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT)} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
