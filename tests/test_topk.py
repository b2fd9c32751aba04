"""Differential tests of Kwker's topk against torch's own CPU kernel: values AND indices bit for bit
(ties included), identical output shapes and strides, identical errors and warnings.

torch.topk and Tensor.topk reach aten::topk / aten::topk.values, which Kwker overrides. The oracle
is the same call under kto.disabled(). Every case runs on every ISA (the `isa` fixture).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sortdata
from exactness import assert_reaches_kwker, assert_same, num_threads, run_both
from out_tensors import OUT_KINDS, SERVED_KINDS, out_tensors
from sortdata import NAMES

pytestmark = pytest.mark.usefixtures("native")

TOPK_DTYPES = tuple(d for d in sortdata.DTYPES if d != torch.bool)
MIN_ROW = 128  # rows at least this long (and 64 elements) are Kwker's own
MIN_ROW_SMALL_K = 256  # for k <= 2: torch is as fast below this
SHORT_ROWS = (4, 256)  # and rows this long of elements of up to 32 bits, sorted or k == 1
dtype_params = pytest.mark.parametrize("dtype", TOPK_DTYPES, ids=[NAMES[d] for d in TOPK_DTYPES])


def ks_for(n: int) -> list[int]:
    """k across [0, n], on both sides of torch's switch from partial_sort (k * 64 <= n) to nth_element."""
    return sorted({k for k in (0, 1, 2, 3, n // 64, n // 64 + 1, n // 8, n // 2, n - 1, n) if 0 <= k <= n})


def expect_served(x: torch.Tensor, k: int, dim: int, sorted_: bool) -> bool:
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        return False
    n = x.size(dim)
    if SHORT_ROWS[0] <= n <= SHORT_ROWS[1] and x.element_size() <= 4 and (sorted_ or k == 1):
        return 0 < k <= n and x.numel() >= 64
    if k <= 2 and n < MIN_ROW_SMALL_K:
        return False
    return 0 < k <= n and n >= MIN_ROW and x.numel() >= 64


def check_topk(x, k, dim=-1, *, largest=True, sorted_=True, context=""):
    both = run_both(lambda: torch.topk(x, k, dim=dim, largest=largest, sorted=sorted_))
    what = f"{context} topk(x{tuple(x.shape)} {x.dtype}, k={k}, dim={dim}, largest={largest}, sorted={sorted_})"
    assert_same(both, context=what)
    if expect_served(x, k, dim, sorted_):
        assert both.served >= 1, f"{what}: Kwker did not serve (fallback reasons {both.reasons()})"
    return both


def check_all_variants(x, dim=-1, ks=None, context=""):
    for k in ks if ks is not None else ks_for(x.size(dim)):
        for largest in (True, False):
            for sorted_ in (True, False):
                check_topk(x, k, dim, largest=largest, sorted_=sorted_, context=context)


@dtype_params
@pytest.mark.parametrize("n", (4, 5, 8, 9, 17, 60, 64, 65, 127, 128, 129, 200, 256, 257, 640, 1000, 4097))
def test_lengths_and_ks(isa, dtype, n):
    for dist in ("random", "few", "equal"):
        x = sortdata.make(dtype, (max(3, 128 // n), n), dist, seed=n)  # short rows: enough to be served
        check_all_variants(x, context=dist)


@pytest.mark.parametrize("dtype,dist", [pytest.param(d, dist, id=f"{NAMES[d]}-{dist}")
                                        for d in TOPK_DTYPES for dist in sortdata.applicable(d)])
def test_distributions(isa, dtype, dist):
    """Heavy ties (few distinct values, all equal, quantised), NaN payloads at random positions,
    +-inf, -0.0/+0.0, subnormals, sorted and reversed rows."""
    x = sortdata.make(dtype, (4, 700), dist, seed=7)
    check_all_variants(x, ks=(1, 2, 10, 11, 50, 350, 700), context=dist)


@pytest.mark.parametrize("dtype,dist", [pytest.param(d, dist, id=f"{NAMES[d]}-{dist}")
                                        for d in (torch.float32, torch.int32) for dist in sortdata.applicable(d)])
def test_short_row_distributions(isa, dtype, dist):
    """Short rows of 32-bit elements, whose keys are loaded a vector at a time with the last part
    masked: every distribution, at lengths around the vector widths."""
    for n in (7, 8, 9, 15, 16, 17, 31, 33, 63):
        x = sortdata.make(dtype, (max(4, 128 // n), n), dist, seed=n)
        check_all_variants(x, ks=sorted({1, 2, n // 2, n}), context=f"{dist} n={n}")


def sampled_positions(n: int) -> torch.Tensor:
    """The positions Kwker's topk samples for its threshold (select_keys-inl.h, sample_key_runs): runs
    of 16 keys, evenly spaced, each starting at a multiple of 16."""
    root = n ** (1 / 3)
    runs = max(64, min(4096, int(root * root))) // 16
    return torch.tensor([j * (n - 16) // runs // 16 * 16 + i for j in range(runs) for i in range(16)])


@pytest.mark.parametrize("dtype", (torch.float32, torch.int32, torch.float64), ids=lambda d: NAMES[d])
@pytest.mark.parametrize("spacing", (10, 1), ids=("misleads-once", "misleads-twice"))
def test_rows_whose_sample_misleads(isa, dtype, spacing):
    """Rows of distinct keys whose sampled runs hold keys far smaller than the rest: the threshold from
    the sample keeps k or fewer keys, then (spacing 10) the second try at twice the sample rank keeps
    enough, or (spacing 1) it too keeps too few and the heap replay answers."""
    n, k = 25200, 300
    sampled = sampled_positions(n)
    ranks = torch.empty(n, dtype=torch.int64)
    ranks[sampled] = torch.arange(len(sampled)) * spacing
    rest = torch.ones(n, dtype=torch.bool)
    rest[sampled] = False
    others = torch.tensor(sorted(set(range(n)) - set(ranks[sampled].tolist())))
    ranks[rest] = others[torch.randperm(len(others), generator=torch.Generator().manual_seed(5))]
    for largest in (False, True):
        x = (-ranks if largest else ranks).to(dtype).reshape(1, n)  # the smallest keys at the sample
        check_topk(x, k, largest=largest, context=f"spacing {spacing}")
        check_topk(x, k, largest=largest, sorted_=False, context=f"spacing {spacing}")


@pytest.mark.parametrize("dtype,dist", [
    pytest.param(d, dist, id=f"{NAMES[d]}-{dist}")
    for d in (torch.float32, torch.bfloat16, torch.float16, torch.int32)
    for dist in ("random", "few", "nan_inf", "sorted") if dist in sortdata.applicable(d)])
def test_vocabulary_rows(isa, dtype, dist):
    """LLM sampling: one row of a vocabulary, k small."""
    x = sortdata.make(dtype, (2, 128256), dist, seed=3)
    check_all_variants(x, ks=(1, 2, 8, 50, 2004), context=dist)


@pytest.mark.parametrize("dtype", (torch.int64, torch.float32, torch.bfloat16), ids=lambda d: NAMES[d])
@pytest.mark.parametrize("layout", sortdata.LAYOUTS)
@pytest.mark.parametrize("dim", (0, 1, -1))
def test_layouts_and_dims(isa, dtype, layout, dim):
    x = sortdata.make(dtype, (300, 200), "few", layout=layout, dim=dim, seed=11)
    check_all_variants(x, dim, ks=(1, 3, 7, 100), context=layout)


def test_three_dims_channels_last(isa):
    x = torch.randn(2, 3, 150, 130).to(memory_format=torch.channels_last).round(decimals=1)
    for dim in range(4):
        check_all_variants(x, dim, ks=(1, 2, x.size(dim) // 2), context="channels_last")


@pytest.mark.parametrize("shape,k,dim", [((), 1, 0), ((), 0, 0), ((), 1, -1), ((0,), 0, 0), ((5, 0), 0, 1),
                                         ((0, 300), 3, 1), ((300, 0), 0, 0), ((1,), 1, 0), ((1, 300), 300, 1)])
def test_degenerate_shapes(isa, shape, k, dim):
    x = torch.randn(shape)
    check_topk(x, k, dim)


@pytest.mark.parametrize("k,dim", [(-1, -1), (301, -1), (1, 2), (1, -3)])
def test_bad_arguments_raise_torch_errors(k, dim):
    both = run_both(lambda: torch.topk(torch.randn(4, 300), k, dim=dim))
    assert_same(both)
    assert both.torch.__class__.__name__ == "Raised"


@pytest.mark.parametrize("dtype", (torch.bool, torch.complex64, torch.uint16), ids=str)
def test_other_dtypes_go_to_torch(dtype):
    x = torch.ones(2, 300, dtype=dtype) if dtype != torch.complex64 else torch.randn(2, 300, dtype=dtype)
    both = run_both(lambda: torch.topk(x, 3))
    assert_same(both)
    assert both.served == 0


@pytest.mark.parametrize("kind", OUT_KINDS)
@pytest.mark.parametrize("dtype", (torch.int64, torch.float32), ids=lambda d: NAMES[d])
def test_out(isa, kind, dtype):
    x = sortdata.make(dtype, (4, 640), "few", seed=5)
    for k, dim in ((5, 1), (20, 1), (2, 0)):
        def run():
            shape = list(x.shape)
            shape[dim] = k
            values, indices = out_tensors(kind, shape, x.dtype)
            result = torch.topk(x, k, dim=dim, out=(values, indices))
            return result, values, indices

        both = run_both(run)
        assert_same(both, context=f"out={kind} k={k} dim={dim}")
        if kind in SERVED_KINDS and dim == 1:
            assert both.served >= 1, both.reasons()


def test_autograd_through_topk(isa):
    def run():
        x = sortdata.make(torch.float64, (3, 500), "few", seed=9).requires_grad_()
        values, _ = torch.topk(x, 20)
        (values * torch.arange(20.0, dtype=torch.float64)).sum().backward()
        return values.detach(), x.grad

    assert_same(run_both(run))


def test_scripted_and_compiled_calls_reach_kwker():
    x = torch.randn(4, 1000)

    @torch.jit.script
    def scripted(t: torch.Tensor):
        return torch.topk(t, 5)

    for fn in (scripted, torch.compile(lambda t: torch.topk(t, 5))):
        assert_reaches_kwker(fn, x, ["topk"])


def test_threads_do_not_change_results(isa):
    x = sortdata.make(torch.float32, (64, 3000), "few", seed=13)
    for n in (1, 2):
        with num_threads(n):
            check_all_variants(x, ks=(1, 40, 1500))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hypothesis(isa, data):
    dtype = data.draw(st.sampled_from(TOPK_DTYPES))
    dist = data.draw(st.sampled_from(sortdata.applicable(dtype)))
    n = data.draw(st.one_of(st.integers(SHORT_ROWS[0], SHORT_ROWS[1]), st.integers(SHORT_ROWS[1] + 1, 3000)))
    rows = data.draw(st.integers(1, 4) if n > 64 else st.integers(16, 40))
    x = sortdata.make(dtype, (rows, n), dist, seed=data.draw(st.integers(0, 2**16)))
    k = data.draw(st.integers(0, n))
    check_topk(x, k, largest=data.draw(st.booleans()), sorted_=data.draw(st.booleans()), context=dist)
