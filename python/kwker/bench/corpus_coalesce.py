"""coalesce inputs: torch.Tensor.coalesce() (aten::_coalesce) of uncoalesced sparse COO CPU tensors, as
GNN pipelines (to_undirected adjacency, edge features), recommender interaction counts, sparse
gradient accumulation, finite-element assembly, knowledge graphs and point-cloud voxelisation call it.

The arguments are the dense parts of the uncoalesced tensor (values, indices, size; values first,
so the report's shape and dtype columns show them), since the
benchmark's bit-exactness checker compares dense tensors; the timed call wraps them, without a copy
or a check, into a sparse COO tensor marked uncoalesced, calls coalesce() (which then runs
aten::_coalesce and leaves its input unchanged) and returns the result's indices and values. Sizes
keep one torch run at one thread between about 1 ms and 300 ms on a current Xeon core.
"""

from __future__ import annotations

import functools

import torch

from .corpus import BenchInput
from .corpus_sort import zipf_ids

FAMILY = "coalesce"
entry = functools.partial(BenchInput, FAMILY)


def coalesce(values, indices, size):
    x = torch.sparse_coo_tensor(indices, values, size, is_coalesced=False, check_invariants=False)
    y = x.coalesce()
    return y.indices(), y.values()


def symmetric(edge_index):
    """PyG to_undirected before its coalesce: the edges and their reverses."""
    return torch.cat([edge_index, edge_index.flip(0)], 1)


def build_random_graph(nodes, edges, features=None, reciprocity=0.25):
    """A random directed graph (`edges` edges, a `reciprocity` share of them pairs u->v, v->u, as in a
    follower graph) made symmetric, so each reciprocated pair appears twice; float32 edge weights (or
    [nnz, features] edge attributes)."""
    def build(gen):
        pairs = int(edges * reciprocity / 2)
        base = torch.randint(0, nodes, (2, edges - pairs), generator=gen)
        index = symmetric(torch.cat([base, base[:, :pairs].flip(0)], 1))
        shape = (index.shape[1],) if features is None else (index.shape[1], features)
        return torch.rand(shape, generator=gen), index, (nodes, nodes) + shape[1:]

    return build


def build_power_law_graph(nodes, edges):
    """A degree-skewed (power-law) graph: both endpoints Zipf-popular, node ids shuffled, made symmetric;
    hub pairs repeat, so many edges are duplicates. float32 edge weights."""
    def build(gen):
        relabel = torch.randperm(nodes, generator=gen)
        index = relabel[zipf_ids(gen, 2 * edges, nodes)].view(2, edges)
        index = symmetric(index)
        return torch.rand(index.shape[1], generator=gen), index, (nodes, nodes)

    return build


def build_interaction_counts(users, items, clicks):
    """User-item click log: repeated (user, item) pairs, int64 ones summed into click counts."""
    def build(gen):
        u = torch.randperm(users, generator=gen)[zipf_ids(gen, clicks, users)]
        i = torch.randperm(items, generator=gen)[zipf_ids(gen, clicks, items)]
        return torch.ones(clicks, dtype=torch.int64), torch.stack([u, i]), (users, items)

    return build


def build_knn_pattern(points, k):
    """A k-NN graph's adjacency pattern (bool) made symmetric: each point's k neighbours are nearby
    ids (points sorted along a space-filling curve), so mutual neighbours give duplicates."""
    def build(gen):
        src = torch.arange(points).repeat_interleave(k)
        dst = (src + torch.randint(-4 * k, 4 * k + 1, (points * k,), generator=gen)).clamp_(0, points - 1)
        index = symmetric(torch.stack([src, dst]))
        return torch.ones(index.shape[1], dtype=torch.bool), index, (points, points)

    return build


def build_sparse_embedding_grads(rows, dim, microbatches, ids_per_batch):
    """nn.Embedding(sparse=True) gradients of several micro-batches summed (torch concatenates sparse
    grads), coalesced before SparseAdam: sparse_dim 1, [nnz, dim] values."""
    def build(gen):
        ids = torch.randperm(rows, generator=gen)[zipf_ids(gen, microbatches * ids_per_batch, rows)]
        values = torch.randn(ids.numel(), dim, generator=gen) * 0.01
        return values, ids.view(1, -1), (rows, dim)

    return build


def build_multi_table_grads(tables, rows, dim, ids):
    """Sparse gradient of stacked embedding tables [tables, rows, dim] (one per categorical feature),
    indexed by (table, row): sparse_dim 2, [nnz, dim] dense values."""
    def build(gen):
        table = torch.randint(0, tables, (ids,), generator=gen)
        row = torch.randperm(rows, generator=gen)[zipf_ids(gen, ids, rows)]
        values = torch.randn(ids, dim, generator=gen) * 0.01
        return values, torch.stack([table, row]), (tables, rows, dim)

    return build


def build_fem_assembly(grid):
    """Finite-element stiffness assembly (P1 triangles on a grid x grid mesh): each triangle adds a
    3 x 3 local matrix; entries of shared nodes repeat and are summed. float64."""
    def build(gen):
        n = grid + 1
        corner = (torch.arange(grid).view(-1, 1) * n + torch.arange(grid)).reshape(-1)
        lower = torch.stack([corner, corner + 1, corner + n], 1)
        upper = torch.stack([corner + 1, corner + n + 1, corner + n], 1)
        triangles = torch.cat([lower, upper])
        rows = triangles.repeat_interleave(3, 1).reshape(-1)
        cols = triangles.repeat(1, 3).reshape(-1)
        values = torch.randn(rows.numel(), generator=gen, dtype=torch.float64)
        return values, torch.stack([rows, cols]), (n * n, n * n)

    return build


def build_relational_graph(entities, relations, triples):
    """R-GCN relational adjacency [relation, head, tail] of a knowledge graph with inverse relations
    added: sparse_dim 3, float32 normalisation weights; popular (head, relation) pairs repeat."""
    def build(gen):
        head = zipf_ids(gen, triples, entities)
        tail = zipf_ids(gen, triples, entities)
        relation = zipf_ids(gen, triples, relations)
        index = torch.cat([torch.stack([relation, head, tail]), torch.stack([relation + relations, tail, head])], 1)
        return torch.rand(index.shape[1], generator=gen), index, (2 * relations, entities, entities)

    return build


def build_voxelised_points(points, extent, voxel):
    """Point-cloud voxelisation (sparse 3-D convnets): points of a room-sized scene quantised to voxel
    coordinates, their RGB features summed per voxel: sparse_dim 3, [nnz, 3] values."""
    def build(gen):
        centres = torch.rand(64, 3, generator=gen) * extent
        xyz = centres[torch.randint(0, 64, (points,), generator=gen)] + torch.randn(points, 3, generator=gen) * 0.4
        xyz = xyz.clamp_(0, extent - 1e-3)
        coords = (xyz / voxel).to(torch.int64).t().contiguous()
        side = int(extent / voxel) + 1
        return torch.rand(points, 3, generator=gen), coords, (side, side, side, 3)

    return build


INPUTS = [
    entry("gnn-to-undirected-follower-200k-1m", "coalesce f32",
          "PyG to_undirected: follower-like graph, 200k nodes, 500k edges (25% reciprocated) -> 1M nnz, float32",
          build_random_graph(200_000, 500_000), coalesce),
    entry("gnn-to-undirected-powerlaw-1m-1.5m", "coalesce f32",
          "power-law graph adjacency: 1M nodes, 750k edges made symmetric (1.5M nnz, ~20% duplicates), float32",
          build_power_law_graph(1_000_000, 750_000), coalesce),
    entry("gnn-edge-features-follower-800k-x16", "coalesce f32 [nnz,16] values",
          "GNN edge attributes through to_undirected: 800k nnz over 200k nodes, 16 float32 features per edge",
          build_random_graph(200_000, 400_000, features=16), coalesce),
    entry("recsys-click-counts-i64-1m", "coalesce int64",
          "user-item click counts: 1M clicks (repeats) over 500k users x 100k items, int64 ones summed",
          build_interaction_counts(500_000, 100_000, 1_000_000), coalesce),
    entry("knn-graph-pattern-bool-100k-k8", "coalesce bool",
          "k-NN graph adjacency pattern (bool): 100k points, k=8, made symmetric (1.6M nnz)",
          build_knn_pattern(100_000, 8), coalesce),
    entry("sparse-embedding-grad-1mx64-4x16384", "coalesce sparse_dim 1 [nnz,64]",
          "nn.Embedding(sparse=True) grads of 4 micro-batches x 16384 ids (1M x 64 table), before SparseAdam",
          build_sparse_embedding_grads(1 << 20, 64, 4, 16384), coalesce),
    entry("multi-table-grad-26x100kx32", "coalesce sparse_dim 2 [nnz,32]",
          "sparse grad of 26 stacked Criteo tables (26 x 100k x 32), 262k (table, row) ids",
          build_multi_table_grads(26, 100_000, 32, 262_144), coalesce),
    entry("fem-assembly-p1-f64-300x300", "coalesce f64",
          "finite-element stiffness assembly: 180k P1 triangles (300 x 300 grid), 1.6M float64 entries",
          build_fem_assembly(300), coalesce),
    entry("rgcn-relational-adjacency-3d", "coalesce sparse_dim 3",
          "R-GCN relational adjacency (relation, head, tail): FB15k-237-sized, 500k triples + inverses",
          build_relational_graph(14_541, 237, 500_000), coalesce),
    entry("voxelise-scene-1m-points", "coalesce sparse_dim 3 [nnz,3]",
          "point-cloud voxelisation: 1M points of a 10 m room at 5 cm voxels, RGB features summed",
          build_voxelised_points(1_000_000, 10.0, 0.05), coalesce),
]
