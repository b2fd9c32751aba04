"""Ranks candidates for queries, with nucleus (top-p) cut-offs: a sort-heavy, deterministic job.

    python examples/predict.py                    # prints a summary, writes preds.npy here
    python examples/predict.py --save out.npy     # elsewhere; --save '' writes nothing

For each batch of 64 queries, every one of 50_000 candidates is scored (dot products of random
embeddings), the candidates are ranked (argsort, descending), and the softmax mass of the ranking is
accumulated to find each query's nucleus: the fewest top candidates holding --top-p of it. preds.npy
holds, per query, the renormalised probabilities of its top --keep candidates (0 past the nucleus).

Try it with Kwker:  python -m kwker audit --output preds.npy --rtol 1e-4 -- examples/predict.py
"""

from __future__ import annotations

import argparse

import numpy as np
import torch


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=16, help="batches of queries (default 16)")
    parser.add_argument("--queries", type=int, default=64, help="queries per batch (default 64)")
    parser.add_argument("--candidates", type=int, default=50_000, help="candidates (default 50000)")
    parser.add_argument("--dim", type=int, default=32, help="embedding size (default 32)")
    parser.add_argument("--top-p", type=float, default=0.9, help="nucleus mass (default 0.9)")
    parser.add_argument("--keep", type=int, default=20, help="candidates kept per query (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--save", default="preds.npy", help="output file (default preds.npy; '' for none)")
    return parser.parse_args()


def rank_batch(queries: torch.Tensor, candidates: torch.Tensor, top_p: float, keep: int):
    """(ids of the top `keep` candidates, their renormalised nucleus probabilities, nucleus sizes)."""
    scores = queries @ candidates.T                                # [queries, candidates]
    order = torch.argsort(scores, dim=1, descending=True)          # the ranking
    ranked_probs = torch.softmax(scores, dim=1).gather(1, order)   # probabilities, best first
    mass_before = ranked_probs.cumsum(dim=1) - ranked_probs
    in_nucleus = mass_before < top_p                               # the best candidate always is
    nucleus_sizes = in_nucleus.sum(dim=1)
    nucleus_probs = ranked_probs * in_nucleus
    nucleus_probs = nucleus_probs / nucleus_probs.sum(dim=1, keepdim=True)
    return order[:, :keep], nucleus_probs[:, :keep], nucleus_sizes


def main() -> None:
    args = parse_args()
    generator = torch.Generator().manual_seed(args.seed)
    candidates = torch.randn(args.candidates, args.dim, generator=generator)
    # The catalogue, most popular first: ranks the candidates' popularity once more per batch below.
    popularity = torch.rand(args.candidates, generator=generator)
    ids, probs, sizes = [], [], []
    for _ in range(args.batches):
        queries = torch.randn(args.queries, args.dim, generator=generator)
        top_ids, top_probs, nucleus_sizes = rank_batch(queries, candidates, args.top_p, args.keep)
        by_popularity = torch.argsort(popularity[top_ids], dim=1, descending=True, stable=True)
        ids.append(top_ids.gather(1, by_popularity))
        probs.append(top_probs)
        sizes.append(nucleus_sizes)
    ids, probs, sizes = torch.cat(ids), torch.cat(probs), torch.cat(sizes)

    print(f"queries: {ids.shape[0]}, candidates: {args.candidates}, top-p: {args.top_p}")
    print(f"nucleus size: median {sizes.median().item()}, min {sizes.min().item()}, max {sizes.max().item()}")
    print(f"first query, top 5 by popularity: {ids[0, :5].tolist()}")
    print(f"checksum of kept ids: {int(ids.sum())}")
    print(f"mean top-1 probability: {probs[:, 0].mean().item():.6f}")
    if args.save:
        np.save(args.save, probs.numpy())
        print(f"wrote {args.save}")


if __name__ == "__main__":
    main()
