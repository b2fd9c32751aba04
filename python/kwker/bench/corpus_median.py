"""Median inputs: torch.median / nanmedian (with dim and of whole tensors) as robust statistics,
median filters, federated aggregation, background estimation and data cleaning call them.

Sizes keep one torch run at one thread well under 0.5 s on a current Xeon core. Windows shorter
than 16 elements (3x3 filters) are rows Kwker leaves to torch.
"""

from __future__ import annotations

import functools

import torch

from .corpus import BenchInput

FAMILY = "median"
entry = functools.partial(BenchInput, FAMILY)


def build_features(samples, features, dtype=torch.float32):
    """A (samples x features) design matrix: skewed, as raw features are."""
    return lambda gen: ((torch.randn(samples, features, generator=gen).exp() * 100).to(dtype),)


def build_activations(rows, width, dtype=torch.float32):
    return lambda gen: (torch.randn(rows, width, generator=gen).to(dtype),)


def build_client_updates(clients, params):
    """Federated learning: each client's flattened model update (coordinate-wise median aggregation)."""
    return lambda gen: (torch.randn(clients, params, generator=gen) * 1e-3,)


def build_signal_windows(length, window):
    """Sliding windows of a noisy 1-D signal, as Tensor.unfold gives them (a strided view)."""
    def build(gen):
        t = torch.linspace(0, 100, length)
        return ((torch.sin(t) + 0.3 * torch.randn(length, generator=gen)).unfold(0, window, 1),)

    return build


def build_image_patches(side, kernel):
    """k x k neighbourhoods of a grey image (a median filter through F.unfold): (pixels, k * k)."""
    def build(gen):
        image = torch.rand(1, 1, side, side, generator=gen)
        patches = torch.nn.functional.unfold(image, kernel, padding=kernel // 2)  # (1, k*k, pixels)
        return (patches[0].t(),)

    return build


def build_frames(frames, height, width):
    """A video's frames (uint8 quantised to float): per-pixel median over time is the background."""
    def build(gen):
        background = torch.rand(1, height * width, generator=gen) * 255
        noise = torch.randn(frames, height * width, generator=gen) * 8
        return ((background + noise).round().clamp(0, 255),)

    return build


def build_sensor_series(sensors, hours, missing):
    """Hourly sensor readings with gaps (NaN) for nanmedian."""
    def build(gen):
        x = torch.randn(sensors, hours, generator=gen).cumsum(-1) * 0.1 + 20
        x[torch.rand(sensors, hours, generator=gen) < missing] = float("nan")
        return (x,)

    return build


def build_latencies_us(n):
    """Request latencies in microseconds (int64, log-normal)."""
    return lambda gen: ((torch.randn(n, generator=gen) * 0.7 + 8).exp().to(torch.int64),)


def build_token_losses(batch, seq):
    """Per-token cross-entropy losses of a batch (median loss per sequence for data filtering)."""
    return lambda gen: (torch.rand(batch, seq, generator=gen).mul(-1).add(1).log().neg() * 2,)


def median_absolute_deviation(x):
    median = x.median(dim=-1, keepdim=True).values
    return (x - median).abs().median(dim=-1).values


INPUTS = [
    entry("robust-scaler-100000x64-dim0", "median dim=0", "sklearn-style RobustScaler: per-feature median of 100k samples",
          build_features(100_000, 64), lambda x: torch.median(x, dim=0)),
    entry("robust-scaler-20000x512-dim0-f64", "median dim=0", "RobustScaler on float64 features, 20k x 512",
          build_features(20_000, 512, torch.float64), lambda x: torch.median(x, dim=0)),
    entry("fedavg-median-32x262144", "median dim=0", "coordinate-wise median aggregation of 32 client updates (256k params)",
          build_client_updates(32, 262_144), lambda u: u.median(dim=0)),
    entry("signal-median-filter-w31", "median dim=-1", "1-D median filter, window 31, over a 256k-sample signal (unfold)",
          build_signal_windows(262_144, 31), lambda w: w.median(dim=-1)),
    entry("image-median-filter-5x5", "median dim=-1", "5x5 median filter of a 512x512 image (F.unfold patches)",
          build_image_patches(512, 5), lambda p: p.median(dim=-1)),
    entry("image-median-filter-3x3", "median dim=-1", "3x3 median filter of a 512x512 image (rows of 9)",
          build_image_patches(512, 3), lambda p: p.median(dim=-1)),
    entry("video-background-64x256x256", "median dim=0", "background estimation: per-pixel median of 64 frames",
          build_frames(64, 256, 256), lambda f: f.median(dim=0)),
    entry("token-loss-median-4096x512", "median dim=-1", "per-sequence median token loss, batch 4096 x 512",
          build_token_losses(4096, 512), lambda l: l.median(dim=-1)),
    entry("activation-median-bf16-2048x4096", "median dim=-1", "per-token median of bf16 hidden states (outlier analysis)",
          build_activations(2048, 4096, torch.bfloat16), lambda h: h.median(dim=-1)),
    entry("mad-8192x1024", "2x median dim=-1 keepdim", "median absolute deviation per row (robust z-scores)",
          build_activations(8192, 1024), median_absolute_deviation),
    entry("calibration-median-1m", "median()", "median of 1M activations (quantisation calibration)",
          build_activations(1, 1 << 20), lambda x: torch.median(x)),
    entry("latency-median-i64-1m", "median()", "median of 1M int64 request latencies (us)",
          build_latencies_us(1 << 20), lambda x: x.median()),
    entry("sensors-nanmedian-1024x8760", "nanmedian dim=-1", "yearly median of hourly sensor readings with 5% gaps",
          build_sensor_series(1024, 8760, 0.05), lambda x: x.nanmedian(dim=-1)),
    entry("sensors-nanmedian-all-1m", "nanmedian()", "median of 1M readings with 20% missing (NaN)",
          build_sensor_series(1, 1 << 20, 0.2), lambda x: torch.nanmedian(x)),
    entry("sensors-nanmedian-dim0-8760x128", "nanmedian dim=0", "per-sensor median over time, sensors as columns",
          lambda gen: (build_sensor_series(128, 8760, 0.05)(gen)[0].t().contiguous(),), lambda x: x.nanmedian(dim=0)),
    entry("token-loss-median-out", "median dim=-1 out=", "per-sequence median loss into preallocated buffers",
          lambda gen: (*build_token_losses(1024, 2048)(gen), torch.zeros(1024), torch.zeros(1024, dtype=torch.long)),
          lambda l, v, i: torch.median(l, dim=-1, out=(v, i))),
]
