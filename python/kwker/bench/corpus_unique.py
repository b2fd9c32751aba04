"""unique inputs: token-id deduplication, graph node-id relabelling, recsys id dedup, value counts of
labels and categorical codes, codebook analysis, as training and data pipelines call torch.unique.

Sizes keep one torch run at one thread well under 0.5 s on a current Xeon core.
"""

from __future__ import annotations

import functools

import torch

from .corpus import BenchInput

FAMILY = "unique"
entry = functools.partial(BenchInput, FAMILY)


def build_token_batch(batch, seq, vocab):
    """A batch of token ids, Zipf-like (frequent tokens repeat), as a tokenizer emits them."""
    def build(gen):
        ranks = (torch.rand(batch, seq, generator=gen) ** 4 * vocab).to(torch.int64)
        return (torch.randperm(vocab, generator=gen)[ranks],)

    return build


def build_edge_index(edges, nodes):
    """A graph's edge_index (2 x E) over `nodes` node ids, degree-skewed."""
    return lambda gen: ((torch.rand(2, edges, generator=gen) ** 2 * nodes).to(torch.int64),)


def build_hashed_ids(n, bits):
    """Hashed sparse-feature ids (recsys): int64 spread over 2^bits, with repeats."""
    def build(gen):
        pool = torch.randint(0, 2**bits, (n // 4,), generator=gen)
        return (pool[torch.randint(0, pool.numel(), (n,), generator=gen)],)

    return build


def build_labels(n, classes, dtype=torch.int64):
    return lambda gen: (torch.randint(0, classes, (n,), generator=gen).to(dtype),)


def build_bf16_weights(n):
    """bf16 weights (codebook / value-distribution analysis): about 2^12 distinct values, one zero sign."""
    return lambda gen: ((torch.randn(n, generator=gen) * 0.02).abs().add(1e-6).to(torch.bfloat16),)


def build_targets(n, distinct):
    """Regression targets with few distinct float values (ratings), as a float32 column."""
    def build(gen):
        levels = torch.arange(1, distinct + 1, dtype=torch.float32) * 0.5
        return (levels[torch.randint(0, distinct, (n,), generator=gen)],)

    return build


def build_sampled_nodes(n, nodes):
    """Node ids of a sampled mini-batch neighbourhood in a large graph (sparse over the id space)."""
    return lambda gen: (torch.randint(0, nodes, (n,), generator=gen),)


INPUTS = [
    entry("token-dedup-32x2048-v32000", "unique inverse", "distinct tokens of a 32 x 2048 batch (Llama-2 vocab), with inverse",
          build_token_batch(32, 2048, 32000), lambda t: torch.unique(t, return_inverse=True)),
    entry("token-dedup-8x4096-v128256", "unique inverse counts", "distinct tokens of an 8 x 4096 batch (Llama-3 vocab), counts",
          build_token_batch(8, 4096, 128256), lambda t: torch.unique(t, return_inverse=True, return_counts=True)),
    entry("token-dedup-sorted-false", "unique sorted=False", "Tensor.unique(sorted=False) of a 64 x 1024 token batch",
          build_token_batch(64, 1024, 50257), lambda t: t.unique(sorted=False)),
    entry("gnn-relabel-edges-2x1m-n500k", "unique inverse", "GNN node-id relabelling: edge_index 2 x 1M over 500k nodes",
          build_edge_index(1 << 20, 500_000), lambda e: torch.unique(e, return_inverse=True)),
    entry("gnn-sampled-nodes-300k-of-100m", "unique inverse", "nodes of a sampled neighbourhood: 300k ids in a 100M-node graph",
          build_sampled_nodes(300_000, 100_000_000), lambda n: torch.unique(n, return_inverse=True)),
    entry("recsys-hashed-ids-1m", "unique inverse", "dedup of 1M hashed sparse-feature ids (2^40) before the embedding lookup",
          build_hashed_ids(1 << 20, 40), lambda ids: torch.unique(ids, return_inverse=True)),
    entry("moe-expert-counts-1m-e64", "unique counts", "tokens per expert: unique counts of 1M MoE routing indices (64 experts)",
          build_labels(1 << 20, 64), lambda e: torch.unique(e, return_counts=True)),
    entry("imagenet-label-counts-1.2m", "unique counts", "class frequencies of 1.28M ImageNet labels",
          build_labels(1_281_167, 1000), lambda y: torch.unique(y, return_counts=True)),
    entry("categorical-codes-u8-4m", "unique counts", "value counts of a uint8 categorical column, 4M rows",
          build_labels(1 << 22, 200, torch.uint8), lambda c: torch.unique(c, return_counts=True)),
    entry("categorical-codes-i16-1m", "unique inverse", "re-encoding an int16 categorical column (codes to dense ids)",
          build_labels(1 << 20, 20000, torch.int16), lambda c: torch.unique(c, return_inverse=True)),
    entry("user-ids-i32-1m-of-10m", "unique inverse counts", "daily active users: 1M int32 events over 10M user ids",
          lambda gen: (torch.randint(0, 10_000_000, (1 << 20,), generator=gen, dtype=torch.int32),),
          lambda u: torch.unique(u, return_inverse=True, return_counts=True)),
    entry("bf16-weight-values-4m", "unique counts", "distinct values of 4M bf16 weights (codebook analysis)",
          build_bf16_weights(1 << 22), lambda w: torch.unique(w, return_counts=True)),
    entry("rating-targets-f32-1m", "unique inverse", "distinct float32 ratings (0.5 .. 5.0) of 1M targets, with inverse",
          build_targets(1 << 20, 10), lambda r: torch.unique(r, return_inverse=True)),
    entry("float-features-f32-1m", "unique", "distinct values of a continuous float32 feature (1M rows)",
          lambda gen: (torch.randn(1 << 20, generator=gen),), lambda x: torch.unique(x)),
    entry("gnn-edge-dedup-dim1-2x300k", "unique dim=1 inverse", "deduplicating a multigraph's edges: edge_index 2 x 300k",
          build_edge_index(300_000, 20_000), lambda e: torch.unique(e, dim=1, return_inverse=True)),
    entry("dedup-feature-rows-f32-50000x16", "unique dim=0 counts", "distinct feature rows of a quantised (0/1/2) float32 table",
          lambda gen: (torch.randint(0, 3, (50_000, 16), generator=gen).float(),),
          lambda x: torch.unique(x, dim=0, return_counts=True)),
    entry("rle-frames-consecutive-dim0", "unique_consecutive dim=0", "run-length encoding of repeated video frame codes (40k x 8)",
          lambda gen: (torch.randint(0, 4, (10_000, 8), generator=gen).repeat_interleave(4, 0),),
          lambda x: torch.unique_consecutive(x, dim=0, return_counts=True)),
]
