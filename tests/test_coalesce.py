"""Differential tests of Kwker's sparse COO coalesce (family "coalesce": aten::_coalesce at the SparseCPU
key, what Tensor.coalesce() runs for an uncoalesced sparse CPU tensor) against torch's own kernel: the
result's indices and values bit for bit (dtype, shape, strides, storage offset), is_coalesced(), sizes,
sparse and dense dims, identical errors and warnings, and the input left as it was.

torch sorts the flattened keys with its unstable sort and adds duplicates one at a time in that order,
so float sums are exact only in torch's order: the values are random floats of wide magnitude, heavily
duplicated, with nnz on both sides of torch's thresholds (16: its sort's insertion runs; 32768: its
radix sort of 1-D integers). Integer values wrap, bool ones are or-ed. Kwker may leave NaN sums,
indices outside the sizes and sparse sizes whose product passes int64 (a zero size beside huge ones)
to torch (declined). Every case runs on every ISA (`isa`).
"""

from __future__ import annotations

import functools

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exactness
from exactness import Raised, assert_bit_identical, assert_reaches_kwker, assert_same, num_threads, run_both

pytestmark = pytest.mark.usefixtures("native")

FAMILY = "coalesce"
VALUE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
                torch.int32, torch.int64, torch.uint8, torch.bool)
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
NAMES = {d: str(d).removeprefix("torch.") for d in VALUE_DTYPES + (torch.complex64, torch.complex128)}
MIN_NNZ = 64  # Kwker serves inputs of at least this many elements
ORDERS = ("random", "sorted", "reversed", "unique", "unique_sorted")
value_dtype_params = pytest.mark.parametrize("dtype", VALUE_DTYPES, ids=[NAMES[d] for d in VALUE_DTYPES])


# --- inputs -------------------------------------------------------------------------------------------

def values_of(shape, dtype, kind="random", seed=0) -> torch.Tensor:
    """Values: floats normal times 10^-3..10^3 (their sums depend on the order), "specials" with ±0,
    ±inf, subnormals and huge values among them, "nan" with NaNs too, "zeros" only ±0.0; integers over
    their whole range (sums wrap) or, "small", in -3..3; bool random."""
    g = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    if dtype == torch.bool:
        return (torch.rand(n, generator=g) < 0.3).reshape(shape)
    if dtype.is_complex:
        return torch.complex(values_of(shape, torch.float64, kind, seed), values_of(shape, torch.float64, kind,
                                                                                  seed + 1)).to(dtype)
    if not dtype.is_floating_point:
        if kind == "small":
            return torch.randint(-3 if dtype != torch.uint8 else 0, 4, (n,), generator=g).to(dtype).reshape(shape)
        info = torch.iinfo(dtype)
        return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype).reshape(shape)
    if kind == "zeros":
        return torch.where(torch.rand(n, generator=g) < 0.5, 0.0, -0.0).to(dtype).reshape(shape)
    x = torch.randn(n, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-3, 4, (n,), generator=g)
    if kind in ("specials", "nan"):
        finfo = torch.finfo(dtype)
        pool = [0.0, -0.0, float("inf"), -float("inf"), finfo.tiny / 4, -finfo.tiny / 8, finfo.max, -finfo.max]
        if kind == "nan":
            pool.append(float("nan"))
        where = torch.randperm(n, generator=g)[: n // 6 + 1] if n else torch.zeros(0, dtype=torch.long)
        x[where] = torch.tensor(pool, dtype=torch.float64)[torch.randint(0, len(pool), (where.numel(),),
                                                                         generator=g)]
    return x.to(dtype).reshape(shape)


def indices_of(nnz, sizes, distinct=None, order="random", seed=1) -> torch.Tensor:
    """sparse_dim x nnz int64 indices within `sizes`: nnz draws from `distinct` random coordinates
    (heavy duplication when few), in the given order ("unique": each coordinate once)."""
    g = torch.Generator().manual_seed(seed)
    sparse_dim = len(sizes)
    if distinct is None:
        distinct = max(1, nnz // 8)
    pool = torch.stack([_randint64(s, distinct, g) for s in sizes]) if sparse_dim else torch.zeros(0, distinct,
                                                                                                 dtype=torch.long)
    if order.startswith("unique"):
        pool = torch.unique(pool, dim=1) if sparse_dim else pool[:, :1]
        pool = pool[:, torch.randperm(pool.size(1), generator=g)][:, :nnz]
        idx = pool
    else:
        idx = pool[:, torch.randint(0, distinct, (nnz,), generator=g)]
    if order in ("sorted", "reversed", "unique_sorted") and sparse_dim and idx.size(1):
        keys = _keys(idx, sizes)
        perm = torch.sort(keys, stable=True).indices
        idx = idx[:, perm.flip(0) if order == "reversed" else perm]
    return idx.contiguous()


def _randint64(high: int, n: int, g: torch.Generator) -> torch.Tensor:
    """n random integers in [0, high), high up to 2^63 - 1."""
    if high <= 1 << 62:
        return torch.randint(0, high, (n,), generator=g, dtype=torch.long)
    return (torch.rand(n, generator=g, dtype=torch.float64) * (high - 1024)).long()


def _keys(idx, sizes):
    keys = torch.zeros(idx.size(1), dtype=torch.long)
    for d, s in enumerate(sizes):
        keys = keys * s + idx[d]
    return keys


def sparse(indices, values, sizes, *, coalesced=None) -> torch.Tensor:
    kwargs = {} if coalesced is None else {"is_coalesced": coalesced}
    return torch.sparse_coo_tensor(indices, values, sizes, check_invariants=False, **kwargs)


def make(nnz, sparse_sizes, dense_shape=(), dtype=torch.float32, *, distinct=None, order="random", kind="random",
         seed=0) -> torch.Tensor:
    idx = indices_of(nnz, sparse_sizes, distinct, order, seed)
    vals = values_of((idx.size(1), *dense_shape), dtype, kind, seed + 1)
    return sparse(idx, vals, (*sparse_sizes, *dense_shape))


# --- checks -------------------------------------------------------------------------------------------

family_delta = functools.partial(exactness.family_delta, family=FAMILY)
assert_served = functools.partial(exactness.assert_served, family=FAMILY)
assert_torchs = functools.partial(exactness.assert_torchs, family=FAMILY)


def described(t):
    """A sparse result as comparable parts (dense results as they are)."""
    if isinstance(t, torch.Tensor) and t.layout == torch.sparse_coo:
        return {"indices": t._indices(), "values": t._values(), "is_coalesced": t.is_coalesced(),
                "size": tuple(t.shape), "sparse_dim": t.sparse_dim(), "dense_dim": t.dense_dim(), "nnz": t._nnz(),
                "dtype": t.dtype}
    if isinstance(t, (tuple, list)):
        return type(t)(described(x) for x in t)
    return t


def snapshot(s):
    return (s._indices().clone(), s._values().clone(), s._indices().stride(), s._values().stride(),
            s.is_coalesced(), tuple(s.shape), s._nnz())


def has_nan(v) -> bool:
    return (v.is_floating_point() or v.is_complex()) and bool(torch.isnan(v).any())


def check(s, *, what="", served=None, op="coalesce"):
    """s.coalesce() (or aten::_coalesce, op="_coalesce") with Kwker off and on: the same result, s unchanged.
    served=None: expected served when Kwker covers the input (NaN values may be declined); True, False or
    "any"."""
    before = snapshot(s)
    call = (lambda: described(s.coalesce())) if op == "coalesce" else (lambda: described(torch.ops.aten._coalesce(s)))
    both = run_both(call)
    what = (f"{what} {op} {NAMES.get(s.dtype, s.dtype)} size {tuple(s.shape)} sparse_dim {s.sparse_dim()} "
            f"nnz {s._nnz()}")
    assert_same(both, context=what)
    assert_bit_identical(before, snapshot(s), context=f"{what}: the input was modified")
    if served is None:
        covered = not s.dtype.is_complex and s._nnz() >= MIN_NNZ and not isinstance(both.torch, Raised)
        served = True if covered else False
        result_values = both.torch.get("values") if isinstance(both.torch, dict) else None
        nan_sum = result_values is not None and has_nan(result_values)  # inf - inf among the sums, too
        allowed = ("declined",) if nan_sum or has_nan(s._values()) else ()
    else:
        allowed = ()
    if served is True:
        assert_served(both, what, allowed)
    elif served is False:
        assert_torchs(both, what)
    return both


# --- tests --------------------------------------------------------------------------------------------

@value_dtype_params
def test_duplicates_every_dtype_and_threshold(isa, dtype):
    shapes = [((50,), ()), ((7, 9), ()), ((5, 4, 6), (3,)), ((3, 3, 2, 4), ()), ((100, 100), (2, 3)),
              ((40, 1000), ()), ((6, 6, 6), (2,))]
    for i, nnz in enumerate((16, 17, 64, 65, 300, 1000, 4097, 32767, 32768, 40000)):
        sizes, dense = shapes[i % len(shapes)]
        if nnz > 5000:
            dense = ()
        for distinct in (3, max(4, nnz // 10)):
            kind = "small" if not dtype.is_floating_point and distinct == 3 else "random"
            check(make(nnz, sizes, dense, dtype, distinct=distinct, kind=kind, seed=nnz + distinct),
                  what=f"distinct={distinct} {kind}")


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int64, torch.bool),
                         ids=("float32", "bfloat16", "int64", "bool"))
@pytest.mark.parametrize("order", ORDERS)
def test_input_orders(isa, dtype, order):
    for nnz, sizes in ((100, (30, 30)), (3000, (1 << 20,)), (33000, (64, 64, 64))):
        check(make(nnz, sizes, (), dtype, distinct=nnz // 5, order=order, seed=nnz), what=order)
    s = make(500, (40, 40), (2,), dtype, distinct=500, order=order, seed=5)
    check(s, what=f"{order}, few duplicates")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=[NAMES[d] for d in FLOAT_DTYPES])
@pytest.mark.parametrize("kind", ("specials", "nan", "zeros"))
def test_special_float_values(isa, dtype, kind):
    for nnz, distinct in ((64, 3), (500, 30), (2000, 1000)):
        check(make(nnz, (8, 8, 8), (), dtype, distinct=distinct, kind=kind, seed=nnz), what=kind)
        check(make(nnz, (8, 8), (4,), dtype, distinct=distinct, kind=kind, seed=nnz + 1), what=f"{kind} dense")


def test_signed_zero_sums(isa):
    # -0.0 + -0.0 = -0.0; -0.0 + 0.0 = 0.0; a run whose sum cancels to +0.0.
    idx = torch.tensor([[0] * 40 + [1] * 40 + [2] * 40 + [3] * 40])
    vals = torch.cat([torch.full((40,), -0.0), torch.tensor([-0.0, 0.0] * 20), torch.tensor([1.5, -1.5] * 20),
                      torch.full((40,), 0.0)])
    perm = torch.randperm(160, generator=torch.Generator().manual_seed(0))
    for dtype in FLOAT_DTYPES:
        check(sparse(idx[:, perm], vals[perm].to(dtype), (4,)), what="signed zeros")


@value_dtype_params
def test_nnz_zero_and_one(isa, dtype):
    for sizes, dense in (((5,), ()), ((3, 4), (2,)), ((2, 2, 2, 2), (0,))):
        empty = sparse(torch.zeros(len(sizes), 0, dtype=torch.long), values_of((0, *dense), dtype),
                       (*sizes, *dense))
        check(empty, what="nnz 0", served=False)
        check(sparse(torch.zeros(len(sizes), 0, dtype=torch.long), values_of((0, *dense), dtype), (*sizes, *dense),
                     coalesced=False), what="nnz 0 marked uncoalesced", served=False)
        one = sparse(torch.ones(len(sizes), 1, dtype=torch.long), values_of((1, *dense), dtype), (*sizes, *dense))
        check(one, what="nnz 1", served=False)
        one = sparse(torch.ones(len(sizes), 1, dtype=torch.long), values_of((1, *dense), dtype), (*sizes, *dense),
                     coalesced=False)
        check(one, what="nnz 1 marked uncoalesced", served=False)
        check(one, what="nnz 1 marked uncoalesced", served=False, op="_coalesce")
        check(make(2, sizes, dense, dtype, distinct=1, seed=2), what="nnz 2", served=False)


@value_dtype_params
def test_empty_dense_dims(isa, dtype):
    for dense in ((0,), (3, 0), (0, 2)):
        check(make(300, (10, 10), dense, dtype, distinct=40, seed=3), what=f"dense {dense}", served="any")
    check(make(300, (10, 10), (1,), dtype, distinct=40, seed=4), what="dense (1,)")
    check(make(300, (10, 10), (1, 1), dtype, distinct=40, seed=4), what="dense (1, 1)")


@pytest.mark.parametrize("dtype", (torch.float32, torch.int64, torch.bool), ids=("float32", "int64", "bool"))
def test_huge_sizes(isa, dtype):
    near_max = 3037000499  # its square is just under 2^63
    for sizes in ((1 << 62,), ((1 << 63) - 1,), (1 << 31, 1 << 31), (1 << 20, 1 << 21, 1 << 21),
                  (46341, 46341, 46341, 46341), (near_max, near_max), (3, 1 << 61), (1 << 61, 3)):
        for distinct in (50, 2000):
            check(make(3000, sizes, (), dtype, distinct=distinct, seed=distinct), what=f"sizes {sizes}")
        idx = indices_of(1000, sizes, 100, seed=9)
        idx[:, ::10] = torch.tensor([s - 1 for s in sizes]).unsqueeze(1)  # the last coordinate, often
        idx[:, 1::10] = 0
        dense = (2,) if math.prod(sizes) < 1 << 62 else ()  # torch refuses sizes whose numel passes int64
        check(sparse(idx, values_of((1000, *dense), dtype), (*sizes, *dense)), what=f"sizes {sizes} corners")
    # A zero size beside huge ones: the numel is 0, the other sizes' product passes int64 (torch's keys wrap
    # and alias), and every index is outside the zero size.
    for sizes in ((0, 1 << 62, 1 << 62), (1 << 40, 0, 1 << 40)):
        idx = indices_of(600, (5, 1 << 40, 1 << 40), 100, seed=10)
        check(sparse(idx, values_of((600,), dtype, seed=11), sizes), what=f"sizes {sizes}", served="any")


def test_many_sparse_dims(isa):
    # Kwker's flatten keeps up to 16 sparse dimensions in local arrays; more go to torch.
    for sparse_dim, served in ((15, True), (16, True), (17, False), (24, False)):
        sizes = tuple(2 + d % 3 for d in range(sparse_dim))
        check(make(2000, sizes, (), torch.float32, distinct=300, seed=sparse_dim), what="many sparse dims",
              served=served)


@pytest.mark.parametrize("dtype", (torch.float32, torch.int32, torch.bool), ids=("float32", "int32", "bool"))
def test_indices_outside_the_sizes(isa, dtype):
    idx = indices_of(500, (10, 10), 30, seed=13)
    for what, change in (("too large", lambda t: t.__setitem__((1, slice(None, None, 7)), 10)),
                         ("negative", lambda t: t.__setitem__((0, slice(3, None, 11)), -1)),
                         ("aliasing key", lambda t: t.__setitem__((1, slice(5, None, 9)), 13)),
                         ("huge", lambda t: t.__setitem__((0, slice(None, None, 50)), 1 << 40))):
        bad = idx.clone()
        change(bad)
        check(sparse(bad, values_of((500,), dtype, seed=14), (10, 10)), what=what, served="any")


def test_non_contiguous_indices_and_values(isa):
    idx = indices_of(2000, (30, 40, 50), 300, seed=15)
    vals = values_of((2000, 6), torch.float32, seed=16)
    wide = torch.zeros(3, 2, 2000, dtype=torch.long)
    wide[:, 1] = idx
    check(sparse(wide[:, 1], vals, (30, 40, 50, 6)), what="indices with a row stride of 4000")
    check(sparse(idx.t().contiguous().t(), vals, (30, 40, 50, 6)), what="column-major indices")
    check(sparse(idx, vals[:, ::2], (30, 40, 50, 3)), what="sliced values")
    check(sparse(idx, vals.t().contiguous().t(), (30, 40, 50, 6)), what="column-major values")
    check(sparse(idx, vals[:, :1].expand(2000, 6), (30, 40, 50, 6)), what="expanded values")
    v3 = values_of((2000, 4, 5), torch.float64, seed=17).transpose(1, 2)
    check(sparse(idx, v3, (30, 40, 50, 5, 4)), what="transposed dense dims")


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16), ids=("float32", "float16", "bfloat16"))
def test_expanded_indices(isa, dtype):
    # sparse_dim 1 with indices of stride 0: torch's sort of that view returns the identity, so every
    # duplicate is summed in input order (not in its introsort's tie order).
    idx = torch.zeros(1, 1, dtype=torch.long).expand(1, 1000)
    check(sparse(idx, values_of((1000,), dtype, seed=19), (5,)), what="expanded indices")
    check(sparse(idx[:, :500], values_of((500, 3), dtype, seed=20), (5, 3)), what="expanded indices, dense dim")


_SPARSE_DIM_ZERO = """
import json, sys, torch
import kwker.torch_ops as kto
from exactness import difference
g = torch.Generator().manual_seed(18)
s = torch.sparse_coo_tensor(torch.zeros(0, 200, dtype=torch.long), torch.randn(200, 3, generator=g), (3,),
                            check_invariants=False)
parts = lambda c: (c._indices(), c._values(), c.is_coalesced(), tuple(c.shape), c._nnz())
with kto.disabled():
    expected = parts(s.coalesce())
with kto.accelerated():
    actual = parts(s.coalesce())
print(json.dumps({"difference": difference(expected, actual)}))
"""


def test_sparse_dim_zero():
    # All dims dense: indices of shape (0, nnz). Run in a child process: a crash there fails this test
    # instead of ending the whole session.
    import json
    import os
    import pathlib
    import subprocess
    import sys

    tests = str(pathlib.Path(__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests] + sys.path))
    child = subprocess.run([sys.executable, "-c", _SPARSE_DIM_ZERO], capture_output=True, text=True, env=env,
                           timeout=120)
    assert child.returncode == 0, (
        f"sparse_dim 0 coalesce: the process ended with {child.returncode}: {child.stderr[-2000:]}")
    assert json.loads(child.stdout.strip().splitlines()[-1])["difference"] is None, child.stdout


def test_complex_stays_torchs(isa):
    for dtype in (torch.complex64, torch.complex128):
        check(make(500, (10, 10), (), dtype, distinct=30, seed=19), what="complex", served=False)


def test_already_coalesced_inputs(isa):
    s = make(300, (50, 50), (2,), torch.float32, distinct=300, order="unique_sorted", seed=20)
    marked = sparse(s._indices(), s._values(), s.shape, coalesced=True)
    both = check(marked, what="marked coalesced", served=False)  # coalesce() returns the input itself
    assert both.torch["is_coalesced"]
    check(marked.coalesce(), what="coalesce() of coalesce()", served=False)
    # aten::_coalesce itself refuses an input marked coalesced (torch's internal assert).
    both = check(marked, what="_coalesce of a coalesced input", served="any", op="_coalesce")
    assert isinstance(both.torch, Raised), both.torch
    check(s, what="sorted and unique, not marked")


def test_results_of_sparse_ops(isa):
    a = make(400, (20, 30), (), torch.float32, distinct=100, seed=21)
    b = make(600, (20, 30), (), torch.float32, distinct=100, seed=22)
    check(a + b, what="a + b")
    check(a.coalesce() + b.coalesce(), what="sum of coalesced (already coalesced)", served="any")
    check(torch.cat([a, b, a]), what="cat", served=None)
    check(a.t() * 3 + b.t(), what="transposed sums")

    def matmul():
        dense = values_of((30, 5), torch.float32, seed=23)
        return torch.sparse.mm(a + b, dense)

    assert_same(run_both(matmul), context="sparse.mm of an uncoalesced sum")


def test_autograd_through_coalesce(isa):
    s = make(500, (20, 20), (), torch.float64, distinct=60, seed=24)

    def call():
        values = s._values().clone().requires_grad_()
        c = sparse(s._indices(), values, s.shape).coalesce()
        (c._values() ** 2).sum().backward()
        return described(c.detach()), values.grad

    both = run_both(call)
    assert_same(both, context="autograd")


def test_threads_give_the_same_answer():
    cases = [make(200_000, (1000, 1000), (), torch.float32, distinct=20_000, seed=25),
             make(100_000, (300, 300), (4,), torch.bfloat16, distinct=500, seed=26),
             make(150_000, (1 << 40,), (), torch.int64, distinct=100_000, seed=27)]
    for s in cases:
        results = []
        for threads in (1, 2):
            with num_threads(threads):
                results.append(check(s, what=f"{threads} threads").kwker)
        assert_bit_identical(results[0], results[1], context="1 vs 2 threads")


def test_compiled_and_scripted_reach_kwker():
    s = make(3000, (40, 40), (), torch.float32, distinct=200, seed=28)

    def pipeline(values):
        c = sparse(s._indices(), values, s.shape).coalesce()
        return c._indices(), c._values()

    assert_reaches_kwker(pipeline, s._values(), [FAMILY])

    @torch.jit.script
    def scripted(t: torch.Tensor):
        c = t.coalesce()
        return c._indices(), c._values()

    assert_reaches_kwker(scripted, s, [FAMILY])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(VALUE_DTYPES), sparse_dim=st.integers(1, 4), size=st.integers(1, 40),
       dense=st.sampled_from(((), (2,), (3, 1), (0,))), nnz=st.integers(0, 3000), distinct=st.integers(1, 400),
       order=st.sampled_from(ORDERS[:3]), kind=st.sampled_from(("random", "random", "small", "specials", "zeros")),
       seed=st.integers(0, 2**16))
def test_hypothesis(isa, dtype, sparse_dim, size, dense, nnz, distinct, order, kind, seed):
    sizes = tuple(size + d for d in range(sparse_dim))
    if kind in ("specials", "zeros") and not dtype.is_floating_point:
        kind = "random"
    if kind == "small" and dtype.is_floating_point:
        kind = "random"
    s = make(nnz, sizes, dense, dtype, distinct=distinct, order=order, kind=kind, seed=seed)
    check(s, what=f"hypothesis {order} {kind} distinct={distinct}", served="any" if 0 in dense else None)
