"""embedding backward inputs: aten::embedding_dense_backward, the gradient of nn.Embedding /
F.embedding (sparse=False) with respect to its weight, as LM token embeddings, positional and segment
embeddings, padded batches, frequency-scaled word embeddings, recsys and GNN node tables call it.

The timed call is the backward op alone, on the upstream gradient and the ids the forward saw (both
built in `build`). Sizes keep one torch run at one thread between about 1 ms and 300 ms on a current
Xeon core.
"""

from __future__ import annotations

import functools

import torch

from .corpus import BenchInput
from .corpus_sort import zipf_ids

FAMILY = "embedding"
entry = functools.partial(BenchInput, FAMILY)

LLAMA2_VOCAB = 32000
BERT_VOCAB = 30522
T5_VOCAB = 32128
WIKITEXT2_VOCAB = 33278


def backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    return torch.ops.aten.embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)


def upstream_grad(gen, shape, dtype):
    """The gradient flowing back into the embedding output: small, roughly normal values."""
    return (torch.randn(shape, generator=gen) * 0.01).to(dtype)


def build_tokens(batch, seq, vocab, dim, dtype=torch.float32, padding_idx=-1, scale=False):
    """A [batch, seq] batch of Zipf-distributed token ids and its [batch, seq, dim] gradient."""
    def build(gen):
        ids = zipf_ids(gen, batch * seq, vocab).view(batch, seq)
        return upstream_grad(gen, (batch, seq, dim), dtype), ids, vocab, padding_idx, scale

    return build


def build_padded_tokens(batch, seq, vocab, dim, pad, dtype=torch.float32):
    """A right-padded batch of variable-length sequences (lengths 16 .. seq), pad id `pad`; the
    padding positions carry gradient too (the loss is masked later), padding_idx drops it."""
    def build(gen):
        ids = zipf_ids(gen, batch * seq, vocab - 1).add_(1).view(batch, seq)
        ids[ids == pad] = pad + 1
        lengths = torch.randint(16, seq + 1, (batch, 1), generator=gen)
        ids.masked_fill_(torch.arange(seq) >= lengths, pad)
        return upstream_grad(gen, (batch, seq, dim), dtype), ids, vocab, pad, False

    return build


def build_bart_positions(batch, seq, dim, dtype=torch.float32, offset=2):
    """BART learned positions (Hugging Face BartLearnedPositionalEmbedding): arange(seq) expanded to
    the batch, plus the offset of 2, so every row holds ids 2 .. seq+1 (a contiguous [batch, seq])."""
    def build(gen):
        ids = torch.arange(seq).expand(batch, seq) + offset
        return upstream_grad(gen, (batch, seq, dim), dtype), ids, seq + offset, -1, False

    return build


def build_roberta_positions(batch, seq, dim, pad=1):
    """RoBERTa / fairseq learned positions of a right-padded batch (create_position_ids_from_input_ids):
    pad + 1 + position for real tokens, pad for padding, with padding_idx=pad."""
    def build(gen):
        lengths = torch.randint(16, seq + 1, (batch, 1), generator=gen)
        mask = (torch.arange(seq) < lengths).to(torch.int64)
        ids = mask.cumsum(1) * mask + pad
        return upstream_grad(gen, (batch, seq, dim), torch.float32), ids, seq + pad + 1, pad, False

    return build


def build_segments(batch, seq, dim, types=2):
    """BERT token-type (segment) ids: sentence A then sentence B, split at a random point per row."""
    def build(gen):
        split = torch.randint(seq // 4, 3 * seq // 4, (batch, 1), generator=gen)
        ids = (torch.arange(seq) >= split).to(torch.int64)
        return upstream_grad(gen, (batch, seq, dim), torch.float32), ids, types, -1, False

    return build


def build_flat_ids(n, rows, dim, dtype=torch.float32, hashed=True):
    """A 1-D batch of ids into a table of `rows` (gradient [n, dim]): Zipf-popular rows, spread over
    the table by a fixed permutation when `hashed` (ids are hashes, not popularity ranks)."""
    def build(gen):
        ids = zipf_ids(gen, n, rows)
        if hashed:
            ids = torch.randperm(rows, generator=gen)[ids]
        return upstream_grad(gen, (n, dim), dtype), ids, rows, -1, False

    return build


def build_atoms(atoms, elements, dim):
    """Atomic numbers of a batch of molecules (H, C, N, O dominate), float64 (SchNet-style)."""
    def build(gen):
        common = torch.tensor([1, 6, 7, 8, 9, 16, 17])  # H C N O F S Cl
        weights = torch.tensor([0.48, 0.32, 0.08, 0.08, 0.02, 0.01, 0.01], dtype=torch.float64)
        ids = common[torch.multinomial(weights, atoms, replacement=True, generator=gen)]
        return upstream_grad(gen, (atoms, dim), torch.float64), ids, elements, 0, False

    return build


INPUTS = [
    entry("llama2-tokens-32000x2048-8x512-f32", "embedding_dense_backward",
          "LM token embedding backward: 32000 x 2048 table, batch 8 x 512 tokens (Llama-2 vocab), float32",
          build_tokens(8, 512, LLAMA2_VOCAB, 2048), backward),
    entry("llama2-tokens-32000x2048-8x512-bf16", "embedding_dense_backward bf16",
          "bf16 training: LM token embedding backward, 32000 x 2048, batch 8 x 512 tokens",
          build_tokens(8, 512, LLAMA2_VOCAB, 2048, torch.bfloat16), backward),
    entry("t5-tokens-32128x512-16x512-f16", "embedding_dense_backward f16",
          "fp16 fine-tuning of T5-small: shared 32128 x 512 embedding, batch 16 x 512 tokens",
          build_tokens(16, 512, T5_VOCAB, 512, torch.float16), backward),
    entry("bert-padded-30522x768-32x128-pad0", "embedding_dense_backward padding_idx",
          "BERT-base word embedding backward on a right-padded 32 x 128 batch, padding_idx=0",
          build_padded_tokens(32, 128, BERT_VOCAB, 768, 0), backward),
    entry("roberta-positions-514x768-32x512-pad1", "embedding_dense_backward padding_idx",
          "RoBERTa-base learned position embedding backward (514 x 768, padding_idx=1), padded batch 32 x 512",
          build_roberta_positions(32, 512, 768), backward),
    entry("bart-positions-1026x1024-8x1024-bf16", "embedding_dense_backward bf16",
          "bf16 training of BART-large: learned positions 1026 x 1024 backward, batch 8 x 1024",
          build_bart_positions(8, 1024, 1024, torch.bfloat16), backward),
    entry("bert-token-type-2x768-32x512", "embedding_dense_backward",
          "BERT token-type (segment) embedding backward: 2 rows, batch 32 x 512",
          build_segments(32, 512, 768), backward),
    entry("word-lm-33278x650-scale-freq", "embedding_dense_backward scale_grad_by_freq",
          "word-level LSTM LM (WikiText-2 vocab 33278 x 650), batch 80 x 35, scale_grad_by_freq=True",
          build_tokens(80, 35, WIKITEXT2_VOCAB, 650, scale=True), backward),
    entry("two-tower-items-200000x128-8192", "embedding_dense_backward 2-D",
          "two-tower retrieval: item-id embedding 200k x 128 (dense grad), 8192 hashed item ids",
          build_flat_ids(8192, 200_000, 128), backward),
    entry("node2vec-arxiv-169343x128-f32", "embedding_dense_backward 2-D",
          "node2vec on ogbn-arxiv: node embedding 169343 x 128, 128 walks x 20 contexts x 10 nodes",
          build_flat_ids(25_600, 169_343, 128), backward),
    entry("schnet-atom-types-100x128-f64", "embedding_dense_backward f64 padding_idx",
          "SchNet atom-type embedding (100 x 128, padding_idx=0) backward, float64, 262k atoms",
          build_atoms(262_144, 100, 128), backward),
]
