"""Differential tests of Kwker's unique (aten::_unique2: torch.unique and Tensor.unique without dim)
against torch's own CPU kernel: values, inverse and counts bit for bit (dtype, shape, strides),
identical errors and warnings.

Kwker declines float inputs whose answer depends on torch's sort (a NaN, or both -0.0 and +0.0): the
tests check those are still torch's (they are torch's own kernel) and that everything else is served.
Every case runs on every ISA (`isa`).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sortdata
from exactness import assert_reaches_kwker, assert_same, num_threads, run_both
from sortdata import NAMES

pytestmark = pytest.mark.usefixtures("native")

UNIQUE_DTYPES = tuple(d for d in sortdata.DTYPES if d != torch.bool)
MIN_ELEMENTS = 256
dtype_params = pytest.mark.parametrize("dtype", UNIQUE_DTYPES, ids=[NAMES[d] for d in UNIQUE_DTYPES])
FLAGS = [dict(), dict(return_inverse=True), dict(return_counts=True),
         dict(return_inverse=True, return_counts=True), dict(sorted=False, return_inverse=True, return_counts=True)]


def depends_on_ties(x: torch.Tensor) -> bool:
    if not x.dtype.is_floating_point or x.numel() == 0:
        return False
    bits = x.reshape(-1).view({2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()])
    sign = torch.iinfo(bits.dtype).min
    return bool(torch.isnan(x).any()) or bool((bits == 0).any() and (bits == sign).any())


def check(x, *, what="", **flags):
    both = run_both(lambda: torch.unique(x, **flags))
    assert_same(both, context=f"{what} {flags}")
    if x.numel() >= MIN_ELEMENTS and not depends_on_ties(x):
        assert both.served >= 1, f"{what}: Kwker did not serve (fallback reasons {both.reasons()})"
    elif x.numel() >= MIN_ELEMENTS:
        assert both.reasons().get("unique", {}).get("declined", 0) >= 1, f"{what}: not declined"
    return both


@pytest.mark.parametrize("dtype,dist", [(d, dist) for d in UNIQUE_DTYPES for dist in sortdata.applicable(d)],
                         ids=[f"{NAMES[d]}-{dist}" for d in UNIQUE_DTYPES for dist in sortdata.applicable(d)])
def test_distributions_and_sizes(isa, dtype, dist):
    for n in (1, 255, 256, 1000, 20_000):
        x = sortdata.values(dtype, n, dist)
        for flags in FLAGS:
            check(x, what=f"{NAMES[dtype]} {dist} n={n}", **flags)


@pytest.mark.parametrize("dtype", (torch.int32, torch.int64), ids=("int32", "int64"))
def test_id_ranges_dense_and_sparse(isa, dtype):
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(3)
    for n in (1000, 300_000):
        for span in (100, 1 << 16, 2 * n, 1 << 22, (1 << 22) + 1, 64 * n, 64 * n + 1, 1 << 31):
            for base in (0, info.min, info.max - span + 1, -span // 2):
                x = (torch.randint(0, span, (n,), generator=g, dtype=torch.int64) + base).to(dtype)
                check(x, what=f"span={span} base={base} n={n}", return_inverse=True, return_counts=True)


def test_shapes_strides_and_methods(isa):
    x = torch.randint(0, 500, (64, 48))
    check(x, what="2-d", return_inverse=True)
    check(x.t(), what="transposed", return_inverse=True, return_counts=True)
    check(x[:, ::3], what="sliced", return_inverse=True)
    check(x[0].expand(20, 48), what="expanded", return_inverse=True)
    check(x.reshape(4, 4, 4, 48), what="4-d", return_inverse=True)
    both = run_both(lambda: x.unique(return_inverse=True, return_counts=True))
    assert_same(both)
    assert both.served >= 1
    check(torch.zeros(0, dtype=torch.int64), what="empty")
    check(torch.tensor(5), what="0-dim", return_inverse=True)


def test_floats_that_depend_on_torchs_sort_are_declined(isa):
    x = torch.randn(1000)
    with_nan = x.clone()
    with_nan[::7] = float("nan")
    zeros = x.clone()
    zeros[::5] = 0.0
    zeros[1::5] = -0.0
    only_negative_zero = x.clone()
    only_negative_zero[::5] = -0.0
    for what, t in (("nan", with_nan), ("both zeros", zeros), ("negative zero", only_negative_zero),
                    ("bf16 nan", with_nan.bfloat16()), ("f16 zeros", zeros.half())):
        for flags in FLAGS:
            check(t, what=what, **flags)


def test_bool_and_other_dtypes_stay_torchs(isa):
    for x in (torch.rand(1000) > 0.5, torch.randint(0, 9, (1000,), dtype=torch.uint16),
              torch.randn(1000, dtype=torch.complex64)):
        both = run_both(lambda: torch.unique(x, return_inverse=True, return_counts=True))
        assert_same(both, context=str(x.dtype))
        assert both.served == 0


def test_autograd_input_and_out_of_grad_mode(isa):
    x = torch.randn(1000, requires_grad=True)
    both = run_both(lambda: torch.unique(x, return_inverse=True))
    assert_same(both)


def test_threads_give_the_same_answer():
    for x in (torch.randint(0, 10**7, (200_000,)), torch.randn(200_000), torch.randint(0, 1000, (200_000,))):
        for threads in (1, 2, 3):
            with num_threads(threads):
                check(x, what=f"{x.dtype} {threads} threads", return_inverse=True, return_counts=True)


def test_scripted_and_compiled_reach_kwker():
    @torch.jit.script
    def scripted(x: torch.Tensor):
        return torch.unique(x, return_inverse=True, return_counts=True)

    x = torch.randint(0, 100, (5000,))
    assert_reaches_kwker(scripted, x, ["unique"])
    compiled = torch.compile(lambda t: torch.unique(t + 1, return_counts=True), backend="inductor")
    assert_reaches_kwker(compiled, x, ["unique"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(UNIQUE_DTYPES), n=st.integers(0, 3000), dist=st.sampled_from(sortdata.DISTRIBUTIONS),
       flags=st.sampled_from(FLAGS), seed=st.integers(0, 2**16))
def test_hypothesis(isa, dtype, n, dist, flags, seed):
    if dist not in sortdata.applicable(dtype):
        dist = "random"
    x = sortdata.values(dtype, n, dist, seed)
    assert_same(run_both(lambda: torch.unique(x, **flags)), context=f"{NAMES[dtype]} {dist} n={n} {flags}")


# --- unique along a dim (unique_dim), unique_consecutive (with and without dim) --------------------

ROW_DTYPES = sortdata.DTYPES  # bool included along a dim
row_dtype_params = pytest.mark.parametrize("dtype", ROW_DTYPES, ids=[NAMES[d] for d in ROW_DTYPES])


def rows_of(dtype, shape, dim, dist, seed=0) -> torch.Tensor:
    """A tensor of `shape` whose slices along `dim` repeat (drawn from a pool of 5), some adjacent."""
    n = shape[dim]
    slice_shape = [s for i, s in enumerate(shape) if i != dim]
    size = int(torch.tensor(slice_shape).prod()) if slice_shape else 1
    pool = sortdata.values(dtype, 5 * size, dist, seed).reshape(5, *slice_shape)
    g = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, 5, (n,), generator=g)
    picks[1::3] = picks[0::3][: picks[1::3].numel()]  # adjacent repeats
    return pool[picks].movedim(0, dim).contiguous()


def check_rows(call, x, *, what, expect_served=True, declined_ok=False):
    both = run_both(call)
    assert_same(both, context=what)
    if expect_served and x.numel() >= 16:
        declined = both.reasons().get("unique", {}).get("declined", 0)
        assert both.served >= 1 or (declined_ok and declined), f"{what}: not served ({both.reasons()})"
    return both


@row_dtype_params
@pytest.mark.parametrize("dist", ("random", "few", "signed_zero", "nan_inf", "equal"))
def test_unique_dim_and_consecutive_dim(isa, dtype, dist):
    if dist not in sortdata.applicable(dtype):
        dist = "extremes" if dtype != torch.bool else "random"
    for shape, dim in (((50, 3), 0), ((4, 60), 1), ((6, 40, 2), 1), ((30, 2, 2), -3), ((100, 1), 0), ((2, 7, 25), 2)):
        x = rows_of(dtype, shape, dim, dist, seed=len(shape) + dim)
        for flags in (dict(), dict(return_inverse=True, return_counts=True), dict(sorted=False, return_counts=True)):
            check_rows(lambda: torch.unique(x, dim=dim, **flags), x, what=f"unique dim={dim} {shape} {flags}",
                       declined_ok=dtype.is_floating_point)
        for flags in (dict(), dict(return_inverse=True, return_counts=True)):
            check_rows(lambda: torch.unique_consecutive(x, dim=dim, **flags), x,
                       what=f"unique_consecutive dim={dim} {shape} {flags}")
            check_rows(lambda: torch.ops.aten.unique_dim_consecutive(x, dim, **flags), x,
                       what=f"unique_dim_consecutive dim={dim} {shape}")


def test_unique_dim_of_strided_and_degenerate_inputs(isa):
    x = rows_of(torch.int64, (40, 6), 0, "few")
    check_rows(lambda: torch.unique(x.t(), dim=1, return_inverse=True), x, what="transposed")
    check_rows(lambda: torch.unique(x[::2], dim=0, return_counts=True), x, what="sliced")
    check_rows(lambda: torch.unique(x[:1].expand(30, 6), dim=0, return_inverse=True), x, what="expanded")
    for what, call in (("dim out of range", lambda: torch.unique(x, dim=2)),
                       ("empty dim", lambda: torch.unique(torch.zeros(0, 3), dim=0)),
                       ("empty other dim", lambda: torch.unique(torch.zeros(3, 0), dim=0)),
                       ("0-dim", lambda: torch.unique(torch.tensor(3), dim=0)),
                       ("consecutive dim out of range", lambda: torch.unique_consecutive(x, dim=-3))):
        assert_same(run_both(call), context=what)


@row_dtype_params
def test_unique_consecutive_flat_stays_torchs(isa, dtype):
    x = sortdata.values(dtype, 2000, "few")
    for flags in (dict(), dict(return_inverse=True, return_counts=True)):
        both = run_both(lambda: torch.unique_consecutive(x, **flags))
        assert_same(both, context=f"flat {flags}")
        assert both.served == 0
        both = run_both(lambda: torch.unique_consecutive(x, dim=0, **flags))
        assert_same(both, context=f"1-d dim=0 {flags}")
        assert both.served == 0


def test_graph_edge_dedup_reaches_kwker_compiled():
    edges = torch.randint(0, 50, (2, 3000))
    compiled = torch.compile(lambda e: torch.unique(e, dim=1, return_inverse=True), backend="inductor")
    assert_reaches_kwker(compiled, edges, ["unique"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(ROW_DTYPES), rows=st.integers(1, 60), width=st.integers(1, 5),
       dist=st.sampled_from(("random", "few", "equal", "signed_zero", "nan_inf")), dim=st.sampled_from((0, 1)),
       seed=st.integers(0, 2**16))
def test_hypothesis_rows(isa, dtype, rows, width, dist, dim, seed):
    if dist not in sortdata.applicable(dtype):
        dist = "few"
    shape = (rows, width) if dim == 0 else (width, rows)
    x = rows_of(dtype, shape, dim, dist, seed)
    assert_same(run_both(lambda: torch.unique(x, dim=dim, return_inverse=True, return_counts=True)), context="sorted")
    assert_same(run_both(lambda: torch.unique_consecutive(x, dim=dim, return_inverse=True, return_counts=True)),
                context="consecutive")
