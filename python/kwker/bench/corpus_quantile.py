"""quantile / nanquantile inputs: quantile normalisation and clipping of activations, calibration
percentiles, robust statistics of features, sensor data with gaps, as training, quantisation and
data pipelines call them.

Sizes keep one torch run at one thread well under 0.5 s on a current Xeon core. Inputs hold no NaN
for quantile and no all-NaN row for nanquantile (those are torch's: see docs/quantile.md).
"""

from __future__ import annotations

import functools

import torch

from .corpus import BenchInput
from .corpus_median import build_sensor_series

FAMILY = "quantile"
entry = functools.partial(BenchInput, FAMILY)


def build_activations(rows, width, dtype=torch.float32):
    return lambda gen: (torch.randn(rows, width, generator=gen).to(dtype),)


def build_relu_activations(n):
    """Post-ReLU activations: half exact +0.0 (one zero sign), half positive."""
    return lambda gen: (torch.relu(torch.randn(n, generator=gen)),)


def build_features(samples, features, dtype=torch.float32):
    return lambda gen: ((torch.randn(samples, features, generator=gen).exp() * 100).to(dtype),)


Q3 = torch.tensor([0.25, 0.5, 0.75])
PERCENTILES = torch.linspace(0, 1, 101)
CLIP = torch.tensor([0.001, 0.999])

INPUTS = [
    entry("calibration-clip-1m", "quantile q=(.001,.999)", "activation clipping range for int8 calibration (1M values)",
          build_activations(1, 1 << 20), lambda x: torch.quantile(x.flatten(), CLIP)),
    entry("calibration-median-1m", "quantile q=0.5", "median of 1M activations (float q)",
          build_activations(1, 1 << 20), lambda x: torch.quantile(x.flatten(), 0.5)),
    entry("relu-percentile-99.9-1m", "quantile q=0.999", "99.9th percentile of post-ReLU activations (QAT range)",
          build_relu_activations(1 << 20), lambda x: torch.quantile(x, 0.999)),
    entry("quartiles-per-token-4096x1024", "quantile dim=-1 3q", "per-token quartiles of hidden states (outlier analysis)",
          build_activations(4096, 1024), lambda x: torch.quantile(x, Q3, dim=-1)),
    entry("robust-scaler-iqr-100000x32", "quantile dim=0 3q", "RobustScaler: per-feature quartiles of 100k samples",
          build_features(100_000, 32), lambda x: torch.quantile(x, Q3, dim=0)),
    entry("robust-scaler-iqr-f64", "quantile dim=0 3q f64", "RobustScaler on float64 features, 50k x 64",
          build_features(50_000, 64, torch.float64), lambda x: torch.quantile(x, Q3.double(), dim=0)),
    entry("percentiles-101-1m", "quantile 101 q", "all percentiles of 1M values (a quantile-normalisation table)",
          build_activations(1, 1 << 20), lambda x: torch.quantile(x.flatten(), PERCENTILES)),
    entry("winsorize-lower-higher-256x8192", "quantile dim=1 lower+higher", "winsorisation bounds per row (lower/higher modes)",
          build_activations(256, 8192), lambda x: (torch.quantile(x, 0.01, dim=1, interpolation="lower"),
                                                   torch.quantile(x, 0.99, dim=1, interpolation="higher"))),
    entry("nearest-midpoint-512x4096", "quantile dim=1 nearest+midpoint", "per-row deciles, nearest and midpoint modes",
          build_activations(512, 4096), lambda x: (torch.quantile(x, 0.1, dim=1, interpolation="nearest"),
                                                   torch.quantile(x, 0.9, dim=1, interpolation="midpoint"))),
    entry("sensors-nanquantile-512x8760", "nanquantile dim=-1 3q", "yearly quartiles of hourly sensor readings with 5% gaps",
          build_sensor_series(512, 8760, 0.05), lambda x: torch.nanquantile(x, Q3, dim=-1)),
    entry("sensors-nanquantile-all-1m", "nanquantile q=0.95", "95th percentile of 1M readings with 20% missing",
          build_sensor_series(1, 1 << 20, 0.2), lambda x: torch.nanquantile(x, 0.95)),
    entry("grad-norm-quantile-clip", "quantile q=0.9 keepdim", "adaptive gradient clipping: 90th percentile of 262k grad norms",
          lambda gen: (torch.randn(262_144, generator=gen).abs(),), lambda g: torch.quantile(g, 0.9, keepdim=True)),
    entry("quantile-out-256x4096", "quantile dim=1 out=", "per-row medians into a preallocated buffer",
          lambda gen: (*build_activations(256, 4096)(gen), torch.zeros(256)),
          lambda x, o: torch.quantile(x, 0.5, dim=1, out=o)),
]
