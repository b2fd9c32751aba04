"""The optimizer section of `python -m kwker bench`: one torch.optim step on real model shapes, timed
three ways side by side (torch's default path, torch's fused=True, the default path on Kwker) at each
thread count asked for, and Kwker's parameters and state checked bit for bit against torch's default.

Every variant has its own copy of the parameters and the same gradients; the timed steps alternate
default, fused, Kwker so that drifts of the machine fall on all three alike. fused=True is torch's own
one-pass kernel: faster than its default path but not bit-identical to it (its scalar tails round
differently), so it is timed and not checked.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from typing import Callable

import torch

from .. import torch_ops as kto
from .exactness import first_difference


@dataclasses.dataclass(frozen=True)
class OptimizerWorkload:
    name: str
    origin: str
    shapes: Callable[[], list[tuple[int, ...]]]   # the model's parameter shapes
    make: Callable[..., torch.optim.Optimizer]    # make(params, **fused_or_not)


def mlp_shapes() -> list[tuple[int, ...]]:
    """784-1024-512-10 MLP: 1.33M parameters in 6 tensors."""
    sizes = (784, 1024, 512, 10)
    return [s for fan_in, fan_out in zip(sizes, sizes[1:]) for s in ((fan_out, fan_in), (fan_out,))]


def nanogpt_shapes(layers=6, width=128, vocab=65, block=256) -> list[tuple[int, ...]]:
    """A character-level GPT (nanoGPT's shakespeare-char layout at 6 layers of 128): 1.23M parameters
    in 77 tensors, most of them small."""
    shapes = [(vocab, width), (block, width)]
    for _ in range(layers):
        shapes += [(width,), (width,), (3 * width, width), (3 * width,), (width, width), (width,),
                   (width,), (width,), (4 * width, width), (4 * width,), (width, 4 * width), (width,)]
    return shapes + [(width,), (width,), (vocab, width)]


def resnet18_shapes() -> list[tuple[int, ...]]:
    """torchvision's resnet18: 11.69M parameters in 62 tensors."""
    def bn(c):
        return [(c,), (c,)]

    shapes = [(64, 3, 7, 7), *bn(64)]
    channels = 64
    for width in (64, 128, 256, 512):
        for block in range(2):
            downsample = block == 0 and width != channels
            shapes += [(width, channels, 3, 3), *bn(width), (width, width, 3, 3), *bn(width)]
            if downsample:
                shapes += [(width, channels, 1, 1), *bn(width)]
            channels = width
    return shapes + [(1000, 512), (1000,)]


WORKLOADS = (
    OptimizerWorkload("adamw-mlp-1.3M", "MNIST-style MLP classifier, AdamW defaults (lr 1e-3, wd 0.01)",
                      mlp_shapes, lambda ps, **kw: torch.optim.AdamW(ps, lr=1e-3, **kw)),
    OptimizerWorkload("adamw-nanogpt-1.2M", "character-level GPT training (nanoGPT shakespeare-char "
                      "recipe: lr 1e-3, betas (0.9, 0.99), wd 0.1)", nanogpt_shapes,
                      lambda ps, **kw: torch.optim.AdamW(ps, lr=1e-3, betas=(0.9, 0.99),
                                                         weight_decay=0.1, **kw)),
    OptimizerWorkload("sgd-resnet18-11.7M", "ImageNet ResNet-18 (torchvision reference recipe: lr 0.1, "
                      "momentum 0.9, wd 1e-4)", resnet18_shapes,
                      lambda ps, **kw: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-4, **kw)),
)

EXACTNESS_STEPS = 5
WARMUP_STEPS = 3


def _parameters(shapes, seed: int) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    params = []
    for shape in shapes:
        p = torch.nn.Parameter(torch.randn(shape, generator=gen) * 0.05)
        p.grad = torch.randn(shape, generator=gen) * 1e-3
        params.append(p)
    return params


def _state(optimizer, params) -> list[torch.Tensor]:
    return [p.detach() for p in params] + [t for p in params for t in optimizer.state[p].values()
                                           if isinstance(t, torch.Tensor)]


def check_exact(workload: OptimizerWorkload) -> str | None:
    """None when EXACTNESS_STEPS steps on Kwker leave parameters and state bit for bit as torch's
    default path does (gradients change every step); else the first difference."""
    results = []
    for switch in (kto.disabled, kto.accelerated):
        params = _parameters(workload.shapes(), seed=1)
        optimizer = workload.make(params)
        gen = torch.Generator().manual_seed(2)
        with switch():
            for _ in range(EXACTNESS_STEPS):
                for p in params:
                    p.grad = torch.randn(p.shape, generator=gen) * 1e-3
                optimizer.step()
        results.append(_state(optimizer, params))
    return first_difference(results[0], results[1], where="parameters and state")


def time_steps(workload: OptimizerWorkload, min_runs: int, min_time_s: float) -> dict:
    """Median step time (ms) of each variant, timed alternately, and Kwker's share of the parameters."""
    variants = {"default": (kto.disabled, {}), "fused": (kto.disabled, {"fused": True}),
                "kwker": (kto.accelerated, {})}
    steppers = {}
    for name, (switch, options) in variants.items():
        params = _parameters(workload.shapes(), seed=1)
        steppers[name] = (switch, workload.make(params, **options))
    times: dict[str, list[float]] = {name: [] for name in variants}
    gc.collect()
    gc.disable()
    try:
        for name, (switch, optimizer) in steppers.items():
            with switch():
                for _ in range(WARMUP_STEPS):
                    optimizer.step()
        started = time.perf_counter()
        while True:
            for name, (switch, optimizer) in steppers.items():
                with switch():
                    t = time.perf_counter()
                    optimizer.step()
                    times[name].append(time.perf_counter() - t)
            runs = len(times["kwker"])
            enough = min(sum(ts) for ts in times.values()) >= min_time_s
            if runs >= min_runs and (enough or time.perf_counter() - started > 10 * min_time_s):
                break
    finally:
        gc.enable()
    switch, optimizer = steppers["kwker"]
    before = kto.stats()
    with switch():
        optimizer.step()
    served = sum(kto.stats()[f]["kwker"] - before[f]["kwker"] for f in ("adam", "sgd"))
    calls = sum(kto.stats()[f]["calls"] - before[f]["calls"] for f in ("adam", "sgd"))
    return {"ms": {name: statistics.median(ts) * 1e3 for name, ts in times.items()},
            "runs": len(times["kwker"]), "served": served / calls if calls else 0.0}  # of the parameters


def run_section(threads: tuple[int, ...], min_runs: int, min_time_s: float, names=None) -> dict:
    """Times every workload (or those named) at each thread count; prints the table as it goes."""
    previous_threads = torch.get_num_threads()
    rows, not_exact = [], []
    print(f"{'optimizer step':22} {'params':>7} {'thr':>3} {'default ms':>10} {'fused ms':>9} "
          f"{'kwker ms':>9} {'vs default':>10} {'vs fused':>8} {'exact':>5} {'served':>6}", flush=True)
    try:
        for workload in WORKLOADS:
            if names and not any(n in workload.name for n in names):
                continue
            torch.set_num_threads(1)
            difference = check_exact(workload)
            if difference is not None:
                not_exact.append(workload.name)
            count = sum(torch.Size(s).numel() for s in workload.shapes())
            for n in threads:
                torch.set_num_threads(n)
                timed = time_steps(workload, min_runs, min_time_s)
                ms = timed["ms"]
                row = {"name": workload.name, "origin": workload.origin, "parameters": count,
                       "tensors": len(workload.shapes()), "threads": n, **{f"{k}_ms": v for k, v in ms.items()},
                       "vs_default": ms["default"] / ms["kwker"], "vs_fused": ms["fused"] / ms["kwker"],
                       "exact": difference is None, "difference": difference, "served": timed["served"],
                       "runs": timed["runs"]}
                rows.append(row)
                print(f"{workload.name:22} {count / 1e6:6.2f}M {n:3} {ms['default']:10.3f} {ms['fused']:9.3f} "
                      f"{ms['kwker']:9.3f} {row['vs_default']:9.2f}x {row['vs_fused']:7.2f}x "
                      f"{'yes' if row['exact'] else 'NO':>5} {row['served']:6.0%}", flush=True)
    finally:
        torch.set_num_threads(previous_threads)
    return {"rows": rows, "not_exact": not_exact}
