"""searchsorted / bucketize inputs: feature bucketizing, histogram bins, inverse-CDF sampling, ragged
batch bookkeeping, id remapping and quantisation levels, as data pipelines and models call them.

Sizes keep one torch run at one thread well under 0.5 s on a current Xeon core.
"""

from __future__ import annotations

import functools

import torch

from .corpus import BenchInput

FAMILY = "searchsorted"
entry = functools.partial(BenchInput, FAMILY)


def build_feature_bins(n, bins, dtype=torch.float32):
    """A skewed dense feature and its quantile bin edges (as a preprocessing layer computes them)."""
    def build(gen):
        x = (torch.randn(n, generator=gen) * 1.5).exp().to(dtype)
        edges = torch.quantile(x[:100_000].double(), torch.linspace(0, 1, bins + 2, dtype=torch.float64)[1:-1])
        return x, edges.to(dtype)

    return build


def build_histogram(n, bins):
    """float64 measurements and evenly spaced bin edges."""
    return lambda gen: (torch.randn(n, generator=gen, dtype=torch.float64), torch.linspace(-4, 4, bins + 1,
                                                                                           dtype=torch.float64))


def build_id_shards(n, shards):
    """int64 ids (Zipf-like) and the sorted range starts of the shards holding them."""
    def build(gen):
        ids = (torch.rand(n, generator=gen) ** 3 * 2**40).to(torch.int64)
        starts = torch.sort(torch.randint(0, 2**40, (shards,), generator=gen)).values
        return ids, starts

    return build


def build_vocab_cdf(vocab, draws):
    """Sampling tokens by inverse CDF: the cumulative softmax of one step's logits, uniform draws."""
    def build(gen):
        cdf = torch.softmax(torch.randn(vocab, generator=gen) * 3, 0).cumsum(0)
        return cdf, torch.rand(draws, generator=gen)

    return build


def build_nerf_pdf(rays, bins, samples):
    """NeRF hierarchical sampling (sample_pdf): per-ray CDFs of coarse weights and sorted uniforms."""
    def build(gen):
        weights = torch.rand(rays, bins, generator=gen) + 1e-5
        cdf = torch.cat([torch.zeros(rays, 1), (weights / weights.sum(-1, keepdim=True)).cumsum(-1)], -1)
        u = torch.sort(torch.rand(rays, samples, generator=gen), -1).values
        return cdf.contiguous(), u

    return build


def build_ragged_offsets(tokens, sequences):
    """A packed batch: cumulative sequence lengths and every token's position (token -> sequence id)."""
    def build(gen):
        lengths = torch.randint(1, 2 * tokens // sequences, (sequences,), generator=gen)
        offsets = lengths.cumsum(0)
        return offsets, torch.arange(int(offsets[-1]))

    return build


def build_timestamps(events, queries):
    """Event times (int64 ns, sorted) and query times to align (as-of join)."""
    def build(gen):
        events_ns = torch.sort(torch.randint(0, 10**12, (events,), generator=gen)).values
        return events_ns, torch.randint(0, 10**12, (queries,), generator=gen)

    return build


def build_vocab_remap(vocab, n):
    """Raw ids to positions in an unsorted vocabulary table, through its argsort (sorter=)."""
    def build(gen):
        table = torch.randperm(4 * vocab, generator=gen)[:vocab]
        ids = table[torch.randint(0, vocab, (n,), generator=gen)]
        return table, ids, torch.argsort(table)

    return build


def build_quant_levels(n, levels, dtype):
    """Activations and the midpoints between quantisation levels (NF4-style: normal quantiles)."""
    def build(gen):
        q = torch.linspace(0.02, 0.98, levels, dtype=torch.float64)
        codebook = torch.erfinv(2 * q - 1) * 2**0.5
        midpoints = ((codebook[1:] + codebook[:-1]) / 2).to(dtype)
        return torch.randn(n, generator=gen).to(dtype), midpoints

    return build


def build_pixels(n, levels):
    """uint8 pixels and the edges of a posterise / histogram-equalisation lookup."""
    def build(gen):
        return (torch.randint(0, 256, (n,), generator=gen, dtype=torch.uint8),
                torch.linspace(0, 255, levels + 1)[1:-1].round().to(torch.uint8))

    return build


def build_calibration_knots(n, knots):
    """Piecewise-linear (isotonic) calibration: sorted score knots, a batch of model scores."""
    def build(gen):
        return torch.sort(torch.rand(knots, generator=gen)).values, torch.rand(n, generator=gen)

    return build


INPUTS = [
    entry("feature-bucketize-1m-64", "bucketize", "dense feature into 64 quantile bins (recsys preprocessing), 1M rows",
          build_feature_bins(1 << 20, 64), lambda x, b: torch.bucketize(x, b)),
    entry("feature-bucketize-1m-256", "bucketize", "dense feature into 256 quantile bins, 1M rows",
          build_feature_bins(1 << 20, 256), lambda x, b: torch.bucketize(x, b)),
    entry("feature-bucketize-1m-1024", "bucketize", "dense feature into 1024 quantile bins, 1M rows",
          build_feature_bins(1 << 20, 1024), lambda x, b: torch.bucketize(x, b)),
    entry("feature-bucketize-1m-4096", "bucketize right", "dense feature into 4096 bins (right=True), 1M rows",
          build_feature_bins(1 << 20, 4096), lambda x, b: torch.bucketize(x, b, right=True)),
    entry("feature-bucketize-int32-out", "bucketize out_int32 out=", "bin ids as int32 into a preallocated buffer",
          lambda gen: (*build_feature_bins(1 << 20, 128)(gen), torch.zeros(1 << 20, dtype=torch.int32)),
          lambda x, b, o: torch.bucketize(x, b, out_int32=True, out=o)),
    entry("histogram-bins-f64-1m-100", "bucketize", "histogram bin of 1M float64 measurements, 100 bins",
          build_histogram(1 << 20, 100), lambda x, b: torch.bucketize(x, b)),
    entry("id-shard-i64-1m-64", "searchsorted right", "int64 ids to the shard owning their range (64 shards)",
          build_id_shards(1 << 20, 64), lambda ids, s: torch.searchsorted(s, ids, right=True)),
    entry("vocab-inverse-cdf-32000", "searchsorted", "inverse-CDF token sampling over a 32000 vocabulary, 8192 draws",
          build_vocab_cdf(32000, 8192), lambda cdf, u: torch.searchsorted(cdf, u)),
    entry("vocab-inverse-cdf-128256", "searchsorted", "inverse-CDF sampling over Llama-3's 128256 vocabulary, 8192 draws",
          build_vocab_cdf(128256, 8192), lambda cdf, u: torch.searchsorted(cdf, u)),
    entry("nerf-sample-pdf-4096x64x128", "searchsorted N-d right", "NeRF hierarchical sampling: 4096 rays, 64 bins, 128 samples",
          build_nerf_pdf(4096, 64, 128), lambda cdf, u: torch.searchsorted(cdf, u, right=True)),
    entry("ragged-token-to-seq-1m", "searchsorted right", "packed batch: sequence id of each of ~1M tokens (4096 offsets)",
          build_ragged_offsets(1 << 20, 4096), lambda off, pos: torch.searchsorted(off, pos, right=True)),
    entry("asof-join-i64-1m-100k", "searchsorted", "as-of join of 1M query times against 100k event times (int64 ns)",
          build_timestamps(100_000, 1 << 20), lambda ev, q: torch.searchsorted(ev, q)),
    entry("vocab-remap-sorter-1m", "searchsorted sorter=", "raw ids to rows of an unsorted 50k vocabulary (argsort sorter)",
          build_vocab_remap(50_000, 1 << 20), lambda t, ids, order: torch.searchsorted(t, ids, sorter=order)),
    entry("nf4-quantise-bf16-4m", "bucketize bf16", "4-bit (NF4-style) codes of 4M bf16 weights: 15 level midpoints",
          build_quant_levels(1 << 22, 16, torch.bfloat16), lambda x, m: torch.bucketize(x, m)),
    entry("fp16-quantise-256-levels", "bucketize f16", "8-bit non-uniform codes of 2M float16 activations",
          build_quant_levels(1 << 21, 256, torch.float16), lambda x, m: torch.bucketize(x, m)),
    entry("pixels-posterise-u8-4m", "bucketize uint8", "uint8 pixels of a 2048x2048 image into 16 levels",
          build_pixels(1 << 22, 16), lambda x, e: torch.bucketize(x, e)),
    entry("isotonic-calibration-1000", "searchsorted right", "isotonic calibration: 1M scores against 1000 knots",
          build_calibration_knots(1 << 20, 1000), lambda k, s: torch.searchsorted(k, s, right=True)),
]
