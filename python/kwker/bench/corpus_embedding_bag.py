"""EmbeddingBag max-pooling inputs: nn.EmbeddingBag / F.embedding_bag(mode='max') forward and backward,
as recommendation models (hashed id tables, DLRM / Criteo categorical features, session histories)
and bag-of-words text models call them.

Forward inputs time F.embedding_bag: with a weight that needs no grad it runs
aten::_embedding_bag_forward_only, with one that does, aten::_embedding_bag. Backward inputs time
aten::_embedding_bag_dense_backward (max mode) alone, on the forward's outputs (offset2bag, bag_size,
max_indices) computed in `build`. Sizes keep one torch run at one thread between about 1 ms and
300 ms on a current Xeon core.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from .corpus import BenchInput
from .corpus_sort import zipf_ids

FAMILY = "embedding_bag"
entry = functools.partial(BenchInput, FAMILY)
MODE_MAX = 2


def table(gen, rows, dim, dtype):
    """An embedding table as initialised by nn.EmbeddingBag: N(0, 1) rows. Drawn as a 64k-row block
    and tiled (a full randn of 1M x 64 would take seconds), rows differing by a per-row offset."""
    block = min(rows, 1 << 16)
    base = torch.randn(block, dim, generator=gen)
    tiled = base.repeat((rows + block - 1) // block, 1)[:rows]
    shift = torch.rand(rows, 1, generator=gen)
    return tiled.add_(shift).to(dtype)


def hashed_zipf_ids(gen, n, rows):
    """Zipf-popular ids (a few hot items) spread over the table by a fixed permutation, as hashed
    categorical ids land."""
    return torch.randperm(rows, generator=gen)[zipf_ids(gen, n, rows)]


def fixed_offsets(bags, length):
    return torch.arange(0, bags * length, length)


def session_offsets(gen, bags, mean, longest, include_last_offset):
    """Offsets of variable-length bags (user sessions / multi-hot features): lengths log-normal
    around `mean`, 1 .. `longest`. With include_last_offset the last offset (the total) is kept."""
    lengths = (torch.randn(bags, generator=gen, dtype=torch.float64) * 0.9 + torch.log(
        torch.tensor(float(mean)))).exp().round().clamp(1, longest).to(torch.int64)
    ends = lengths.cumsum(0)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), ends])
    return offsets if include_last_offset else offsets[:-1], int(ends[-1])


def build_forward(rows, dim, bags, length=None, mean=None, longest=None, include_last_offset=False,
                  dtype=torch.float32, requires_grad=False):
    """(weight, indices, offsets), the table first so the report shows its shape and dtype: fixed-length
    bags of `length` ids, or variable-length ones."""
    def build(gen):
        weight = table(gen, rows, dim, dtype).requires_grad_(requires_grad)
        if length is not None:
            offsets, n = fixed_offsets(bags, length), bags * length
        else:
            offsets, n = session_offsets(gen, bags, mean, longest, include_last_offset)
        return weight, hashed_zipf_ids(gen, n, rows), offsets

    return build


def build_padded_documents(vocab, dim, docs, longest, pad=0):
    """A [docs, longest] batch of right-padded token ids (pad id `pad`), lengths 8 .. longest."""
    def build(gen):
        ids = zipf_ids(gen, docs * longest, vocab - 1).add_(1).view(docs, longest)
        lengths = torch.randint(8, longest + 1, (docs, 1), generator=gen)
        ids.masked_fill_(torch.arange(longest) >= lengths, pad)
        return table(gen, vocab, dim, torch.float32), ids

    return build


def forward_max(weight, indices, offsets, include_last_offset=False):
    return F.embedding_bag(indices, weight, offsets, mode="max", include_last_offset=include_last_offset)


def build_backward(forward_builder, include_last_offset=False, padding_idx=-1):
    """The arguments of aten::_embedding_bag_dense_backward: the upstream gradient of the pooled output
    and the forward's indices, offset2bag, bag_size and max_indices."""
    def build(gen):
        weight, indices, offsets = forward_builder(gen)
        with torch.no_grad():
            output, offset2bag, bag_size, max_indices = torch.ops.aten._embedding_bag(
                weight, indices, offsets, False, MODE_MAX, False, None, include_last_offset, padding_idx)
        grad = (torch.randn(output.shape, generator=gen) * 0.01).to(output.dtype)
        return grad, indices, offset2bag, bag_size, max_indices, weight.shape[0], padding_idx

    return build


def backward_max(grad, indices, offset2bag, bag_size, max_indices, num_weights, padding_idx):
    return torch.ops.aten._embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, max_indices,
                                                        num_weights, False, MODE_MAX, None, padding_idx)


RECSYS_1M = build_forward(1 << 20, 64, 4096, length=20)
SESSIONS = build_forward(500_000, 64, 4096, mean=30, longest=200, include_last_offset=True)
CRITEO_BF16 = build_forward(100_000, 128, 8192, mean=8, longest=64, dtype=torch.bfloat16)
DOCS = build_padded_documents(50_000, 300, 1024, 128)


def build_padded_backward(gen):
    weight, ids = DOCS(gen)
    docs, longest = ids.shape
    return build_backward(lambda g: (weight, ids.reshape(-1), fixed_offsets(docs, longest)), padding_idx=0)(gen)


INPUTS = [
    entry("recsys-1mx64-4096x20-zipf", "embedding_bag max fwd",
          "recsys max-pooled bags: 1M x 64 hashed-id table, batch 4096 bags x 20 Zipf ids, inference",
          RECSYS_1M, forward_max),
    entry("recsys-1mx64-4096x20-zipf-requires-grad", "embedding_bag max fwd (train)",
          "recsys training forward (weight requires grad, aten::_embedding_bag): 1M x 64, 4096 x 20 Zipf ids",
          build_forward(1 << 20, 64, 4096, length=20, requires_grad=True), forward_max),
    entry("recsys-1mx64-4096x20-zipf-backward", "embedding_bag max backward",
          "recsys training backward of the max bag: 1M x 64 table, batch 4096 x 20 Zipf ids",
          build_backward(RECSYS_1M), backward_max),
    entry("criteo-dlrm-1000x16-32768-multihot", "embedding_bag max fwd (train) last_offset",
          "DLRM on Criteo: small categorical table 1000 x 16, batch 32768 multi-hot bags, include_last_offset",
          build_forward(1000, 16, 32768, mean=3, longest=32, include_last_offset=True, requires_grad=True),
          lambda w, i, o: forward_max(w, i, o, include_last_offset=True)),
    entry("criteo-dlrm-100000x128-8192-bf16", "embedding_bag max fwd bf16",
          "bf16 DLRM inference: categorical table 100k x 128, batch 8192 multi-hot bags (mean 8 ids)",
          CRITEO_BF16, forward_max),
    entry("criteo-dlrm-100000x128-8192-bf16-backward", "embedding_bag max backward bf16",
          "bf16 DLRM training backward: table 100k x 128, batch 8192 multi-hot bags",
          build_backward(CRITEO_BF16), backward_max),
    entry("sessions-500000x64-4096-last-offset", "embedding_bag max fwd last_offset",
          "session-based recommendation: max over each session's item embeddings (500k x 64), 4096 sessions "
          "of 1..200 items, include_last_offset",
          SESSIONS, lambda w, i, o: forward_max(w, i, o, include_last_offset=True)),
    entry("sessions-500000x64-4096-last-offset-backward", "embedding_bag max backward",
          "session-based recommendation backward: 500k x 64 items, 4096 variable-length sessions",
          build_backward(SESSIONS, include_last_offset=True), backward_max),
    entry("bow-docs-50000x300-1024x128-pad0", "embedding_bag max fwd 2-D padding_idx",
          "max-pooled bag-of-words text classifier: vocab 50k x 300, 1024 right-padded docs x 128, padding_idx=0",
          DOCS, lambda w, ids: F.embedding_bag(ids, w, mode="max", padding_idx=0)),
    entry("bow-docs-50000x300-1024x128-pad0-backward", "embedding_bag max backward padding_idx",
          "max-pooled bag-of-words classifier backward: vocab 50k x 300, 1024 padded docs x 128, padding_idx=0",
          build_padded_backward, backward_max),
]
