"""kthvalue inputs: percentiles, trimmed statistics, pruning thresholds and k-th neighbour distances
as training tricks, calibration and classical ML compute them with torch.kthvalue.

Sizes keep one torch run at one thread well under 0.5 s on a current Xeon core. Integer and
quantised inputs hold many equal values: there Kwker replays torch's quickselect (about torch's
speed).
"""

from __future__ import annotations

import functools

import torch

from .corpus import BenchInput
from .corpus_median import build_activations, build_features

FAMILY = "kthvalue"
entry = functools.partial(BenchInput, FAMILY)


def percentile_k(n, q):
    return max(1, min(n, int(round(q * n))))


def build_gradient_norms(n):
    """History of gradient norms (AutoClip clips at a percentile of them)."""
    return lambda gen: (torch.randn(n, generator=gen).abs().add(1).log(),)


def build_weights(n):
    return lambda gen: (torch.randn(n, generator=gen).abs(),)


def build_distances(points, dims=16):
    def build(gen):
        x = torch.randn(points, dims, generator=gen)
        return (torch.cdist(x, x),)

    return build


def build_pixels(channels, pixels):
    """uint8 image channels (percentile contrast stretching): 256 values, heavy ties."""
    return lambda gen: (torch.randint(0, 256, (channels, pixels), generator=gen, dtype=torch.uint8),)


INPUTS = [
    entry("autoclip-p10-1m", "kthvalue k=10%", "AutoClip: 10th percentile of 1M recorded gradient norms",
          build_gradient_norms(1 << 20), lambda g: torch.kthvalue(g, percentile_k(1 << 20, 0.1))),
    entry("prune-threshold-1m", "kthvalue k=n/2", "magnitude pruning threshold: median |w| of 1M weights",
          build_weights(1 << 20), lambda w: w.kthvalue(1 << 19)),
    entry("calibration-p9999-4096x4096-dim0", "kthvalue dim=0 k=99.99%",
          "int8 calibration: per-channel 99.99th percentile over 4096 tokens",
          build_activations(4096, 4096), lambda x: torch.kthvalue(x, percentile_k(4096, 0.9999), dim=0)),
    entry("winsorize-4096x512-p5", "kthvalue k=5%", "per-sample winsorisation at the 5th percentile",
          build_activations(4096, 512), lambda x: torch.kthvalue(x, percentile_k(512, 0.05), dim=-1)),
    entry("winsorize-4096x512-p95-keepdim", "kthvalue k=95% keepdim", "upper winsorisation bound, kept dims",
          build_activations(4096, 512), lambda x: torch.kthvalue(x, percentile_k(512, 0.95), dim=-1, keepdim=True)),
    entry("core-distance-2048-k10", "kthvalue k=10", "HDBSCAN/LOF core distance: 10th nearest of 2048 points",
          build_distances(2048), lambda d: torch.kthvalue(d, 10, dim=-1)),
    entry("feature-quartile-100000x64-dim0", "kthvalue dim=0 k=n/4", "first quartile of 64 features over 100k samples",
          build_features(100_000, 64), lambda x: torch.kthvalue(x, 25_000, dim=0)),
    entry("feature-quartile-f64-20000x512-dim0", "kthvalue dim=0 k=n/4", "first quartile of float64 features",
          build_features(20_000, 512, torch.float64), lambda x: torch.kthvalue(x, 5_000, dim=0)),
    entry("activation-p1-bf16-2048x4096", "kthvalue k=1%", "1st percentile of bf16 hidden states per token (ties)",
          build_activations(2048, 4096, torch.bfloat16), lambda h: torch.kthvalue(h, percentile_k(4096, 0.01), dim=-1)),
    entry("contrast-stretch-u8-3x1m", "kthvalue k=2%", "percentile contrast stretch of a 1-megapixel RGB image (uint8)",
          build_pixels(3, 1 << 20), lambda p: torch.kthvalue(p, percentile_k(1 << 20, 0.02), dim=-1)),
    entry("trimmed-loss-f64-256x1000", "kthvalue k=90%", "trimmed loss: 90th percentile of per-example losses",
          build_activations(256, 1000, torch.float64), lambda l: torch.kthvalue(l, 900, dim=1)),
    entry("kth-out-1024x2048", "kthvalue out=", "percentile into preallocated buffers",
          lambda gen: (*build_activations(1024, 2048)(gen), torch.zeros(1024), torch.zeros(1024, dtype=torch.long)),
          lambda x, v, i: torch.kthvalue(x, 100, dim=-1, out=(v, i))),
]
