"""Sort-family inputs: torch.sort, torch.argsort, torch.msort and Tensor.sort, out= forms included.

Sizes are chosen so that one torch run at one thread takes at most about 0.5 s on a current Xeon core;
the whole family benches in one to two minutes. Qwen2's vocabulary at batch 64 would take longer (0.6 s),
so Qwen2 stops at batch 8.
"""

from __future__ import annotations

import functools
import math

import torch

from .corpus import BenchInput

FAMILY = "sort"
entry = functools.partial(BenchInput, FAMILY)

LLAMA2_VOCAB = 32000
LLAMA3_VOCAB = 128256
QWEN2_VOCAB = 151936


# Data the workloads see. Every draw comes from the generator passed in, so inputs are reproducible.

def logits(gen, batch, vocab, dtype):
    """Next-token logits: roughly normal with a spread like a trained LM head's."""
    return (torch.randn(batch, vocab, generator=gen) * 2.5).to(dtype)


def probabilities(gen, batch, vocab):
    """softmax(logits / temperature 0.6), as sampled from in Meta's Llama reference code."""
    return torch.softmax(logits(gen, batch, vocab, torch.float32) / 0.6, dim=-1)


def logits_after_top_k(gen, batch, vocab, dtype, k):
    """Logits where everything below each row's k-th largest is set to -inf (top-k before top-p)."""
    x = logits(gen, batch, vocab, dtype)
    kth_largest = x.topk(k, dim=-1).values[:, -1:]
    return x.masked_fill(x < kth_largest, -math.inf)


def zipf_ids(gen, n, vocab, dtype=torch.int64):
    """Ids with a log-uniform (Zipf-like) frequency: a few ids are very common, most are rare."""
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    return (vocab ** u).to(dtype).sub_(1).clamp_(0, vocab - 1)


def sequence_lengths(gen, n):
    """Token counts of training examples: log-normal around 300, clipped to a 4096 context."""
    x = torch.randn(n, generator=gen, dtype=torch.float64).mul_(0.8).add_(math.log(300)).exp_()
    return x.round_().clamp_(1, 4096).to(torch.int64)


def detection_scores(gen, n):
    """Detector confidences after the sigmoid: most boxes near 0, a few confident ones."""
    return torch.sigmoid(torch.randn(n, generator=gen) * 2.0 - 3.0)


def timestamps(gen, n):
    """Event times in nanoseconds, ascending, with some events on the same nanosecond."""
    gaps = torch.randint(0, 2_000_000, (n,), generator=gen)
    return torch.cumsum(gaps, 0) + 1_700_000_000_000_000_000


def out_buffers(x):
    """Preallocated (values, indices) buffers of x's shape, as a serving loop keeps them. Zeroed, not
    empty: the arguments must be the same bits on every build."""
    return torch.zeros_like(x), torch.zeros(x.shape, dtype=torch.int64)


# The builders, one per workload.

def build_probabilities(batch, vocab):
    return lambda gen: (probabilities(gen, batch, vocab),)


def build_logits(batch, vocab, dtype):
    return lambda gen: (logits(gen, batch, vocab, dtype),)


def build_logits_with_out(batch, vocab, dtype):
    def build(gen):
        x = logits(gen, batch, vocab, dtype)
        return (x, *out_buffers(x))
    return build


def build_masked_logits(gen):
    return (logits_after_top_k(gen, 8, QWEN2_VOCAB, torch.bfloat16, k=50),)


def build_lengths(n):
    return lambda gen: (sequence_lengths(gen, n),)


def build_lengths_with_out(n):
    def build(gen):
        x = sequence_lengths(gen, n)
        return (x, *out_buffers(x))
    return build


def build_lengths_with_index_out(n):
    def build(gen):
        x = sequence_lengths(gen, n)
        return x, torch.zeros(x.shape, dtype=torch.int64)
    return build


def build_scores(n):
    return lambda gen: (detection_scores(gen, n),)


def build_yolo_predictions(gen):
    """YOLOv5 at 640x640: 25200 anchors x (4 box + 1 objectness + 80 classes)."""
    predictions = torch.randn(25200, 85, generator=gen)
    predictions[:, 4] = detection_scores(gen, 25200)
    return (predictions,)


def build_coalesce_keys(gen):
    """Edge keys row * num_nodes + col of a random 1M-edge graph on 200k nodes."""
    num_nodes = 200_000
    row = torch.randint(0, num_nodes, (1_000_000,), generator=gen)
    col = torch.randint(0, num_nodes, (1_000_000,), generator=gen)
    return (row * num_nodes + col,)


def build_edge_sources(gen):
    """Source nodes of a 4M-edge power-law graph on 1M nodes (hubs have many edges)."""
    return (zipf_ids(gen, 4_000_000, 1_000_000),)


def build_embedding_ids(gen):
    """A DLRM-style batch: 4096 samples x 20 ids into 10M hash buckets, flattened."""
    return (zipf_ids(gen, 4096 * 20, 10_000_000).view(4096, 20).flatten(),)


def build_expert_ids(tokens, experts, top_k):
    """Top-k expert choices of every token in a batch, flattened (heavily tied: few distinct ids)."""
    def build(gen):
        scores = torch.rand(tokens, experts, generator=gen)
        return (scores.topk(top_k, dim=-1).indices.flatten(),)
    return build


def build_attention_scores(gen):
    """Scaled dot-product scores of 32 heads x 128 queries over 1024 keys, as [heads*queries, keys]."""
    return (torch.randn(32 * 128, 1024, generator=gen) / math.sqrt(128) * 4,)


def build_key_major_scores(gen):
    """Scores laid out [keys, queries] by an einsum; the sort reads them through a transposed view."""
    return (torch.randn(1024, 2048, generator=gen),)


def build_client_updates(gen):
    """Model-update coordinates of 64 clients stacked on dim 0 (64 x 65536)."""
    return (torch.randn(64, 65536, generator=gen) * 1e-3,)


def build_client_updates_with_out(gen):
    (updates,) = build_client_updates(gen)
    return updates, torch.zeros_like(updates)


def build_features(gen):
    """A batch of 4096 samples x 512 features."""
    return (torch.randn(4096, 512, generator=gen) * 3 + 1,)


def build_token_ids_int32(gen):
    return (zipf_ids(gen, 1_000_000, LLAMA3_VOCAB, torch.int32),)


def build_retrieval_scores(gen):
    """fp16 inner products of 32 queries with 65536 candidate passages."""
    return ((torch.randn(32, 65536, generator=gen) * 4 + 20).half(),)


def build_shifted_pixels(gen):
    """A 512x512 grey image and its 8 one-pixel shifts, stacked [9, 512, 512] (uint8)."""
    image = torch.randint(0, 256, (516, 516), dtype=torch.uint8, generator=gen)
    shifts = [image[1 + dy:513 + dy, 1 + dx:513 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    return (torch.stack(shifts),)


def build_shifted_pixels_with_out(gen):
    (stack,) = build_shifted_pixels(gen)
    return stack, torch.zeros_like(stack)


def build_image_pixels(gen):
    """A 3x1024x1024 uint8 photo-like image (values bunched in the mid-tones), flattened."""
    x = torch.randn(3 * 1024 * 1024, generator=gen) * 40 + 110
    return (x.round_().clamp_(0, 255).to(torch.uint8),)


def build_feature_column(gen):
    """A positive, skewed float64 feature (log-normal), 1M rows."""
    return (torch.randn(1_000_000, generator=gen, dtype=torch.float64).exp_(),)


def build_feature_column_with_missing(gen):
    """The same, with 5% missing values stored as NaN and a few +-inf sentinels."""
    (x,) = build_feature_column(gen)
    draw = torch.rand(x.shape, generator=gen, dtype=torch.float64)
    x[draw < 0.05] = math.nan
    x[(draw >= 0.05) & (draw < 0.051)] = math.inf
    x[(draw >= 0.051) & (draw < 0.052)] = -math.inf
    return (x,)


def build_sorted_timestamps(gen):
    return (timestamps(gen, 1_000_000),)


def build_reversed_timestamps(gen):
    return (timestamps(gen, 1_000_000).flip(0),)


def build_quantized_scores(gen):
    """uint8-quantized relevance scores, dequantized: 1M float32 values on only 256 levels."""
    q = torch.randint(0, 256, (1_000_000,), generator=gen)
    return ((q - 128).float() * 0.0125,)


def build_dropout_activations(gen):
    """Activations after dropout(p=0.1): x * mask keeps the sign, so dropped negatives are -0.0."""
    x = torch.randn(256, 4096, generator=gen)
    keep = torch.rand(256, 4096, generator=gen) >= 0.1
    return (x * keep / 0.9,)


INPUTS = [
    # Top-p (nucleus) sampling: a full sort of each row of the vocabulary.
    entry("topp-llama2-b1-f32", "sort desc",
          "Llama-2 top-p sampling (Meta's sample_top_p: sort probs descending), batch 1",
          build_probabilities(1, LLAMA2_VOCAB), lambda p: torch.sort(p, dim=-1, descending=True)),
    entry("topp-llama2-b8-f32", "sort desc",
          "Llama-2 top-p sampling (Meta's sample_top_p: sort probs descending), batch 8",
          build_probabilities(8, LLAMA2_VOCAB), lambda p: torch.sort(p, dim=-1, descending=True)),
    entry("topp-llama2-b64-f32", "sort desc",
          "Llama-2 top-p sampling (Meta's sample_top_p: sort probs descending), batch 64",
          build_probabilities(64, LLAMA2_VOCAB), lambda p: torch.sort(p, dim=-1, descending=True)),
    entry("topp-llama2-b1-bf16", "sort desc",
          "Llama-2 top-p on bf16 logits of a bf16 model, descending, batch 1",
          build_logits(1, LLAMA2_VOCAB, torch.bfloat16), lambda x: torch.sort(x, dim=-1, descending=True)),
    entry("topp-llama2-b64-bf16", "sort desc",
          "Llama-2 top-p on bf16 logits of a bf16 model, descending, batch 64",
          build_logits(64, LLAMA2_VOCAB, torch.bfloat16), lambda x: torch.sort(x, dim=-1, descending=True)),
    entry("topp-llama3-b1-f32", "sort desc",
          "Llama-3 top-p sampling on float32 logits, descending, batch 1",
          build_logits(1, LLAMA3_VOCAB, torch.float32), lambda x: torch.sort(x, dim=-1, descending=True)),
    entry("topp-llama3-b8-f32-out", "sort desc out=",
          "Llama-3 serving loop: top-p sort into preallocated buffers, batch 8",
          build_logits_with_out(8, LLAMA3_VOCAB, torch.float32),
          lambda x, v, i: torch.sort(x, dim=-1, descending=True, out=(v, i))),
    entry("topp-llama3-b1-bf16", "sort desc",
          "Llama-3 top-p on bf16 logits of a bf16 model, descending, batch 1",
          build_logits(1, LLAMA3_VOCAB, torch.bfloat16), lambda x: torch.sort(x, dim=-1, descending=True)),
    entry("topp-llama3-b8-bf16", "sort desc",
          "Llama-3 top-p on bf16 logits of a bf16 model, descending, batch 8",
          build_logits(8, LLAMA3_VOCAB, torch.bfloat16), lambda x: torch.sort(x, dim=-1, descending=True)),
    entry("topp-llama3-b64-bf16", "sort desc",
          "Llama-3 top-p on bf16 logits of a bf16 model, descending, batch 64",
          build_logits(64, LLAMA3_VOCAB, torch.bfloat16), lambda x: torch.sort(x, dim=-1, descending=True)),
    entry("topp-qwen2-b1-f32", "sort",
          "Qwen2 top-p via Hugging Face TopPLogitsWarper (ascending sort of scores), batch 1",
          build_logits(1, QWEN2_VOCAB, torch.float32), lambda x: torch.sort(x, descending=False)),
    entry("topp-qwen2-b8-f32", "Tensor.sort",
          "Qwen2 top-p in vLLM's sampler (logits.sort(dim=-1, descending=False)), batch 8",
          build_logits(8, QWEN2_VOCAB, torch.float32), lambda x: x.sort(dim=-1, descending=False)),
    entry("topp-qwen2-b1-bf16", "sort desc",
          "Qwen2 top-p on bf16 logits of a bf16 model, descending, batch 1",
          build_logits(1, QWEN2_VOCAB, torch.bfloat16), lambda x: torch.sort(x, dim=-1, descending=True)),
    entry("topp-qwen2-b8-bf16-topk50", "Tensor.sort",
          "Qwen2 top-k=50 then top-p: sort of logits masked to -inf, batch 8",
          build_masked_logits, lambda x: x.sort(dim=-1, descending=False)),

    # Length bucketing: order examples by length so batches need little padding.
    entry("length-bucket-10k", "argsort",
          "length-grouped batching: argsort of 10k example lengths",
          build_lengths(10_000), lambda n: torch.argsort(n)),
    entry("length-bucket-100k-stable", "argsort stable",
          "length-grouped batching, reproducible ties: stable argsort of 100k lengths",
          build_lengths(100_000), lambda n: torch.argsort(n, stable=True)),
    entry("length-bucket-100k-stable-out", "argsort stable out=",
          "length-grouped batching into a reused index buffer: torch.argsort(lengths, stable=True, out=)",
          build_lengths_with_index_out(100_000), lambda n, out: torch.argsort(n, stable=True, out=out)),
    entry("length-bucket-1m-desc-stable", "argsort desc stable",
          "longest-first batching: stable descending argsort of 1M lengths",
          build_lengths(1_000_000), lambda n: torch.argsort(n, descending=True, stable=True)),
    entry("length-bucket-1m-stable-out", "sort stable out=",
          "length bucketing into reused buffers: stable sort of 1M lengths with out=",
          build_lengths_with_out(1_000_000), lambda n, v, i: torch.sort(n, stable=True, out=(v, i))),

    # Detection: scores sorted before non-maximum suppression.
    entry("nms-frcnn-1000", "sort desc",
          "Faster R-CNN post-NMS proposals: descending sort of 1000 scores (torchvision nms)",
          build_scores(1000), lambda s: torch.sort(s, descending=True)),
    entry("nms-yolo-25200-column", "Tensor.argsort desc",
          "YOLOv5 NMS: x[:, 4].argsort(descending=True), a strided column of [25200, 85]",
          build_yolo_predictions, lambda p: p[:, 4].argsort(descending=True)),
    entry("nms-rpn-100k", "sort desc stable",
          "RPN anchors over FPN levels: stable descending sort of 100k scores",
          build_scores(100_000), lambda s: torch.sort(s, descending=True, stable=True)),

    # Graphs: edge lists ordered for CSR conversion and coalescing.
    entry("graph-coalesce-1m", "Tensor.sort stable",
          "PyG coalesce: stable sort of row*N+col keys of 1M edges (index_sort)",
          build_coalesce_keys, lambda k: k.sort(stable=True)),
    entry("graph-csr-4m", "argsort",
          "edge list to CSR: argsort of the source nodes of 4M power-law edges",
          build_edge_sources, lambda row: torch.argsort(row)),

    # Recommendation and MoE routing: sorting ids to group equal ones.
    entry("embedding-ids-4096x20", "sort",
          "DLRM-style embedding lookup dedup: sort of 4096x20 flattened int64 ids",
          build_embedding_ids, lambda ids: torch.sort(ids)),
    entry("moe-deepseek-experts-top8", "argsort",
          "DeepSeek MoE dispatch: topk_ids.view(-1).argsort(), 4096 tokens x top-8 of 256 experts",
          build_expert_ids(4096, 256, 8), lambda ids: ids.argsort()),
    entry("moe-megatron-experts-top2", "argsort stable",
          "Megatron MoE permute: stable argsort of 32768 tokens x top-2 of 8 experts",
          build_expert_ids(32768, 8, 2), lambda ids: torch.argsort(ids, stable=True)),

    # Attention and statistics: many rows sorted at once, on the last dim and on others.
    entry("sparsemax-attn-32x128x1024", "sort desc",
          "sparsemax/entmax attention: descending sort of [32 heads*128 queries, 1024 keys]",
          build_attention_scores, lambda s: torch.sort(s, dim=-1, descending=True)),
    entry("sparsemax-attn-transposed", "sort desc (view.t())",
          "sparsemax over key-major scores: sort of the transposed [1024, 2048] view, not contiguous",
          build_key_major_scores, lambda s: torch.sort(s.t(), dim=-1, descending=True)),
    entry("fedavg-median-64x65536", "msort",
          "robust federated aggregation: coordinate-wise median/trimmed mean, msort of 64 client updates",
          build_client_updates, lambda u: torch.msort(u)),
    entry("fedavg-median-64x65536-out", "msort out=",
          "robust federated aggregation into a reused buffer: msort(updates, out=buffer)",
          build_client_updates_with_out, lambda u, out: torch.msort(u, out=out)),
    entry("feature-quantiles-dim0", "Tensor.sort dim=0",
          "per-feature quantiles of a 4096x512 batch: x.sort(dim=0), strided rows",
          build_features, lambda x: x.sort(dim=0)),

    # Other dtypes.
    entry("token-ids-i32-1m", "sort",
          "token-frequency counting over a 1M-token int32 shard: sort before unique_consecutive",
          build_token_ids_int32, lambda t: torch.sort(t)),
    entry("retrieval-f16-32x65536", "sort desc stable=False",
          "dense retrieval re-ranking: descending sort of fp16 scores, 32 queries x 65536 passages",
          build_retrieval_scores, lambda s: torch.sort(s, dim=-1, descending=True, stable=False)),
    entry("median-filter-u8-3x3", "msort",
          "3x3 median filter: msort of the 9 shifted copies of a 512x512 uint8 image",
          build_shifted_pixels, lambda stack: torch.msort(stack)),
    entry("median-filter-u8-3x3-out", "msort out=",
          "3x3 median filter into a reused buffer: msort(stack, out=buffer), uint8",
          build_shifted_pixels_with_out, lambda stack, out: torch.msort(stack, out=out)),
    entry("percentile-clip-u8-3x1024x1024", "sort",
          "contrast stretching: sort of all uint8 pixels of a 3x1024x1024 image for the 2%/98% percentiles",
          build_image_pixels, lambda p: torch.sort(p)),
    entry("quantile-transform-f64-1m", "sort",
          "QuantileTransformer-style normalisation: sort of a float64 feature of 1M rows",
          build_feature_column, lambda x: torch.sort(x)),
    entry("quantile-bins-f64-1m-nan", "sort stable",
          "histogram bin edges of a float64 feature with 5% NaN (missing) and +-inf",
          build_feature_column_with_missing, lambda x: torch.sort(x, stable=True)),

    # Presorted and reversed inputs.
    entry("timestamps-sorted-1m", "sort stable",
          "temporal-graph event stream (TGN): defensive stable sort of already-sorted int64 times",
          build_sorted_timestamps, lambda t: torch.sort(t, stable=True)),
    entry("timestamps-sorted-1m-desc", "argsort desc",
          "most-recent-first ordering: descending argsort of ascending int64 times",
          build_sorted_timestamps, lambda t: torch.argsort(t, descending=True)),
    entry("timestamps-reversed-1m", "argsort",
          "reverse-chronological log replayed in order: argsort of descending int64 times",
          build_reversed_timestamps, lambda t: torch.argsort(t)),

    # Many ties.
    entry("quantized-scores-1m-desc-stable", "argsort desc stable",
          "ranking by uint8-quantized scores: stable descending argsort of 1M values on 256 levels",
          build_quantized_scores, lambda s: torch.argsort(s, descending=True, stable=True)),
    entry("quantized-scores-1m", "sort",
          "ranking by uint8-quantized scores: unstable sort of 1M values on 256 levels",
          build_quantized_scores, lambda s: torch.sort(s)),
    entry("dropout-activations-signed-zeros", "sort",
          "percentile calibration of post-dropout activations (+0.0 and -0.0 ties), 256x4096",
          build_dropout_activations, lambda a: torch.sort(a, dim=-1)),
]
