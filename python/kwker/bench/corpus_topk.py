"""Selection inputs: torch.topk and Tensor.topk as LLM samplers, rankers, beam search, MoE routers,
kNN graphs, detectors and gradient compression call them.

Sizes are chosen so that one torch run at one thread stays well under 0.5 s on a current Xeon core.
MoE routers over 8..64 experts are rows Kwker leaves to torch (it is not faster there); they are in
the corpus because users meet them, and show the fallback costs nothing.
"""

from __future__ import annotations

import functools

import torch

from .corpus import BenchInput
from .corpus_sort import LLAMA2_VOCAB, LLAMA3_VOCAB, QWEN2_VOCAB, logits, probabilities, zipf_ids

FAMILY = "topk"
entry = functools.partial(BenchInput, FAMILY)
T5_VOCAB = 32128


def build_logits(batch, vocab, dtype=torch.float32):
    return lambda gen: (logits(gen, batch, vocab, dtype),)


def build_beam_scores(batch, beams, vocab):
    """Hugging Face beam search: log-softmax scores plus each beam's running score, flattened to
    (batch, beams * vocab) before topk(2 * beams)."""
    def build(gen):
        scores = torch.log_softmax(logits(gen, batch * beams, vocab, torch.float32), dim=-1)
        running = -torch.rand(batch * beams, 1, generator=gen) * 10
        return ((scores + running).reshape(batch, beams * vocab),)

    return build


def build_router_logits(tokens, experts, dtype=torch.float32):
    """A MoE router's gate logits: one row of expert scores per token."""
    return lambda gen: (torch.randn(tokens, experts, generator=gen).to(dtype),)


def build_similarities(queries, keys, dtype=torch.float32):
    """Cosine similarities of normalised embeddings (dense retrieval, ranking)."""
    def build(gen):
        q = torch.nn.functional.normalize(torch.randn(queries, 64, generator=gen), dim=-1)
        k = torch.nn.functional.normalize(torch.randn(keys, 64, generator=gen), dim=-1)
        return ((q @ k.t()).to(dtype),)

    return build


def build_pairwise_distances(points):
    """Negative squared distances between the points of a cloud (DGCNN's knn)."""
    def build(gen):
        x = torch.randn(points, 3, generator=gen)
        return (-torch.cdist(x, x).square(),)

    return build


def build_detection_scores(batch, queries, classes):
    """Deformable-DETR post-processing: sigmoid class scores flattened over queries x classes."""
    return lambda gen: (torch.sigmoid(torch.randn(batch, queries * classes, generator=gen) - 4),)


def build_gradient(n):
    """A flat gradient for top-k sparsification (Deep Gradient Compression: |g|, k = 0.1%)."""
    return lambda gen: (torch.randn(n, generator=gen).abs(),)


def build_counts(n):
    """Item counts (int64) from Zipf-distributed ids: frequent-items top-k."""
    return lambda gen: (torch.bincount(zipf_ids(gen, 4 * n, n), minlength=n),)


def build_with_out(build, k):
    def with_out(gen):
        (x,) = build(gen)
        shape = (*x.shape[:-1], k)
        return x, torch.zeros(shape, dtype=x.dtype), torch.zeros(shape, dtype=torch.long)

    return with_out


INPUTS = [
    # LLM sampling: Hugging Face TopKLogitsWarper (torch.topk(scores, top_k)), vLLM's top-k sampler.
    entry("sample-llama2-b1-k50", "topk k=50", "Llama-2 top-k=50 sampling (HF TopKLogitsWarper), batch 1",
          build_logits(1, LLAMA2_VOCAB), lambda x: torch.topk(x, 50)),
    entry("sample-llama2-b8-k50", "topk k=50", "Llama-2 top-k=50 sampling (HF TopKLogitsWarper), batch 8",
          build_logits(8, LLAMA2_VOCAB), lambda x: torch.topk(x, 50)),
    entry("sample-llama2-b64-k50", "topk k=50", "Llama-2 top-k=50 sampling, batch 64 (serving)",
          build_logits(64, LLAMA2_VOCAB), lambda x: torch.topk(x, 50)),
    entry("sample-llama3-b1-k50", "topk k=50", "Llama-3 top-k=50 sampling on float32 logits, batch 1",
          build_logits(1, LLAMA3_VOCAB), lambda x: torch.topk(x, 50)),
    entry("sample-llama3-b8-k50", "topk k=50", "Llama-3 top-k=50 sampling on float32 logits, batch 8",
          build_logits(8, LLAMA3_VOCAB), lambda x: torch.topk(x, 50)),
    entry("sample-llama3-b1-k50-bf16", "topk k=50", "Llama-3 top-k=50 on bf16 logits of a bf16 model, batch 1",
          build_logits(1, LLAMA3_VOCAB, torch.bfloat16), lambda x: torch.topk(x, 50)),
    entry("sample-llama3-b8-k50-bf16", "topk k=50", "Llama-3 top-k=50 on bf16 logits of a bf16 model, batch 8",
          build_logits(8, LLAMA3_VOCAB, torch.bfloat16), lambda x: torch.topk(x, 50)),
    entry("sample-qwen2-b1-k20", "topk k=20", "Qwen2 generation config top_k=20, float32 logits, batch 1",
          build_logits(1, QWEN2_VOCAB), lambda x: torch.topk(x, 20)),
    entry("sample-qwen2-b8-k20-bf16", "topk k=20", "Qwen2 top_k=20 on bf16 logits, batch 8",
          build_logits(8, QWEN2_VOCAB, torch.bfloat16), lambda x: torch.topk(x, 20)),
    entry("sample-llama2-b32-k40-probs", "Tensor.topk k=40", "vLLM-style top-k=40 over probabilities, batch 32",
          lambda gen: (probabilities(gen, 32, LLAMA2_VOCAB),), lambda p: p.topk(40, dim=-1)),
    entry("sample-llama3-b4-k1", "topk k=1", "greedy pick through topk(1) (speculative-decoding verifiers), batch 4",
          build_logits(4, LLAMA3_VOCAB), lambda x: torch.topk(x, 1)),
    entry("sample-llama3-b8-k50-out", "topk k=50 out=", "Llama-3 serving loop: top-k into preallocated buffers, batch 8",
          build_with_out(build_logits(8, LLAMA3_VOCAB), 50), lambda x, v, i: torch.topk(x, 50, out=(v, i))),
    # Ranking and retrieval.
    entry("ranker-32x20000-k10", "topk k=10", "tutorial ranker: 32 queries x 20000 scores, top 10",
          build_logits(32, 20000), lambda x: torch.topk(x, 10)),
    entry("ranker-32x20000-k10-unsorted", "topk k=10 unsorted", "the ranker with sorted=False",
          build_logits(32, 20000), lambda x: torch.topk(x, 10, sorted=False)),
    entry("retrieval-64x100000-k100", "topk k=100", "dense retrieval: 64 queries over 100k passages, top 100",
          build_similarities(64, 100_000), lambda s: torch.topk(s, 100)),
    entry("retrieval-32x65536-k10-f16", "topk k=10", "half-precision retrieval scores (FAISS-like re-rank), top 10",
          build_similarities(32, 65536, torch.float16), lambda s: torch.topk(s, 10)),
    entry("recsys-1024x4096-k50", "topk k=50", "recommender candidate ranking: 1024 users x 4096 items, top 50",
          build_similarities(1024, 4096), lambda s: torch.topk(s, 50)),
    # Beam search: topk(next_token_scores.view(batch, beams * vocab), 2 * beams).
    entry("beam4-llama2-b1", "topk k=8", "HF beam search, 4 beams, Llama-2 vocabulary, batch 1",
          build_beam_scores(1, 4, LLAMA2_VOCAB), lambda s: torch.topk(s, 8, dim=1, largest=True, sorted=True)),
    entry("beam4-llama2-b8", "topk k=8", "HF beam search, 4 beams, Llama-2 vocabulary, batch 8",
          build_beam_scores(8, 4, LLAMA2_VOCAB), lambda s: torch.topk(s, 8, dim=1)),
    entry("beam5-t5-b16", "topk k=10", "T5 translation beam search, 5 beams, batch 16",
          build_beam_scores(16, 5, T5_VOCAB), lambda s: torch.topk(s, 10, dim=1)),
    entry("beam4-llama3-b1", "topk k=8", "HF beam search, 4 beams, Llama-3 vocabulary, batch 1",
          build_beam_scores(1, 4, LLAMA3_VOCAB), lambda s: torch.topk(s, 8, dim=1)),
    # MoE routing: topk over each token's expert logits.
    entry("moe-mixtral-4096x8-k2", "topk k=2", "Mixtral router: 4096 tokens, 8 experts, top 2",
          build_router_logits(4096, 8), lambda g: torch.topk(g, 2, dim=-1)),
    entry("moe-qwen-4096x60-k4", "topk k=4", "Qwen1.5-MoE router: 60 experts, top 4",
          build_router_logits(4096, 60), lambda g: torch.topk(g, 4, dim=-1)),
    entry("moe-deepseek-4096x64-k6", "topk k=6", "DeepSeek-MoE router: 64 experts, top 6",
          build_router_logits(4096, 64), lambda g: torch.topk(g, 6, dim=-1)),
    entry("moe-arctic-4096x128-k2", "topk k=2", "Snowflake Arctic router: 128 experts, top 2",
          build_router_logits(4096, 128), lambda g: torch.topk(g, 2, dim=-1)),
    entry("moe-deepseekv3-4096x256-k8", "topk k=8", "DeepSeek-V3 router: 256 routed experts, top 8",
          build_router_logits(4096, 256), lambda g: torch.topk(g, 8, dim=-1)),
    entry("moe-deepseekv3-4096x256-k8-bf16", "topk k=8", "DeepSeek-V3 router on bf16 gate logits",
          build_router_logits(4096, 256, torch.bfloat16), lambda g: torch.topk(g, 8, dim=-1)),
    # Geometry, detection, compression.
    entry("knn-dgcnn-1024-k20", "topk k=20", "DGCNN edge convolution: 20 nearest of 1024 points",
          build_pairwise_distances(1024), lambda d: d.topk(k=20, dim=-1)),
    entry("knn-smallest-2048-k16", "topk k=16 smallest", "kNN graph of 2048 points by smallest distance",
          lambda gen: (torch.cdist(*(2 * (torch.randn(2048, 3, generator=gen),))),),
          lambda d: torch.topk(d, 16, largest=False)),
    entry("detr-b8-300x91-k100", "topk k=100", "Deformable DETR post-process: top 100 of 300 queries x 91 classes",
          build_detection_scores(8, 300, 91), lambda s: torch.topk(s, 100, dim=1)),
    entry("yolo-25200-k300", "topk k=300", "YOLO pre-NMS: top 300 of 25200 anchor confidences",
          build_detection_scores(1, 25200, 1), lambda s: torch.topk(s[0], 300)),
    entry("dgc-grad-1m-k1000", "topk k=1000", "Deep Gradient Compression: top 0.1% of a 1M-element gradient",
          build_gradient(1 << 20), lambda g: torch.topk(g, 1000)),
    entry("frequent-items-i64-1m-k100", "topk k=100", "frequent items: top 100 of 1M int64 id counts",
          build_counts(1 << 20), lambda c: torch.topk(c, 100)),
    entry("prune-magnitude-1m-half", "topk k=n/2 unsorted", "magnitude pruning: keep half of 1M weights",
          build_gradient(1 << 20), lambda w: torch.topk(w, 1 << 19, sorted=False)),
]
