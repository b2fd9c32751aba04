"""Differential tests of Kwker's searchsorted and bucketize against torch's own CPU kernels: positions
bit for bit (dtype, shape, strides), identical errors and warnings.

torch.searchsorted / torch.bucketize (Tensor values; out= or not) reach aten::searchsorted.Tensor(_out)
and aten::bucketize.Tensor(_out), which Kwker overrides. Boundaries are drawn sorted, with heavy ties,
with NaNs and signed zeros, and unsorted (torch's answer then follows its probes: Kwker must replay
them). The oracle is the same call under kto.disabled(). Every case runs on every ISA (`isa`).
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

SEARCH_DTYPES = tuple(d for d in sortdata.DTYPES if d != torch.bool)
MIN_VALUES = 64  # Kwker serves calls of at least this many values
dtype_params = pytest.mark.parametrize("dtype", SEARCH_DTYPES, ids=[NAMES[d] for d in SEARCH_DTYPES])
BOUNDARY_KINDS = ("sorted", "ties", "specials", "unsorted", "equal")
LENGTHS = (1, 2, 7, 8, 15, 16, 17, 33, 100, 1000, 4097)


def boundaries(dtype, m: int, kind: str, seed: int = 0) -> torch.Tensor:
    dist = {"sorted": "random", "ties": "few", "specials": "ties_special", "unsorted": "nan_inf",
            "equal": "equal"}[kind]
    if dist == "nan_inf" and not dtype.is_floating_point:
        dist = "extremes"
    b = sortdata.values(dtype, m, dist, seed)
    return b if kind == "unsorted" else torch.sort(b, stable=True).values


def search_values(bd: torch.Tensor, n: int, seed: int = 1) -> torch.Tensor:
    """n values: half of them boundaries (exact hits), the rest random and special bits."""
    dist = "ties_special" if bd.dtype.is_floating_point else "extremes"
    v = sortdata.values(bd.dtype, n, dist, seed).clone()
    if bd.numel() and n:
        g = torch.Generator().manual_seed(seed)
        hits = torch.randint(0, bd.numel(), (n // 2,), generator=g)
        v[: n // 2] = bd.reshape(-1)[hits]
    return v


def check(call, *, served: bool, what: str = ""):
    both = run_both(call)
    assert_same(both, context=what)
    if served:
        assert both.served >= 1, f"{what}: Kwker did not serve (fallback reasons {both.reasons()})"
    else:
        assert both.served == 0, f"{what}: Kwker served a call it should leave to torch"
    return both


@dtype_params
@pytest.mark.parametrize("kind", BOUNDARY_KINDS)
def test_one_row_every_length_and_side(isa, dtype, kind):
    for m in LENGTHS:
        bd = boundaries(dtype, m, kind, seed=m)
        for n in (1, 63, 64, 65, 1000):
            x = search_values(bd, n, seed=n)
            what = f"{NAMES[dtype]} {kind} m={m} n={n}"
            for right in (False, True):
                for out_int32 in (False, True):
                    # Narrow types copy the row: few values for a long row are declined (torch runs).
                    narrow = dtype.itemsize < 4 and n * m.bit_length() * 4 < m
                    check(lambda: torch.searchsorted(bd, x, right=right, out_int32=out_int32),
                          served=n >= MIN_VALUES and not narrow, what=f"searchsorted {what} right={right}")
                    check(lambda: torch.bucketize(x, bd, right=right, out_int32=out_int32),
                          served=n >= MIN_VALUES and not narrow, what=f"bucketize {what} right={right}")


@dtype_params
def test_side_argument(isa, dtype):
    bd = boundaries(dtype, 50, "ties")
    x = search_values(bd, 300)
    for side in ("left", "right"):
        check(lambda: torch.searchsorted(bd, x, side=side), served=True, what=f"side={side}")
    check(lambda: torch.searchsorted(bd, x, right=True, side="right"), served=True, what="right and side")
    check(lambda: torch.searchsorted(bd, x, right=True, side="left"), served=False, what="opposite")
    check(lambda: torch.searchsorted(bd, x, side="middle"), served=False, what="bad side")


@dtype_params
@pytest.mark.parametrize("kind", ("ties", "specials", "unsorted"))
def test_sorter(isa, dtype, kind):
    for m in (1, 16, 333):
        bd = boundaries(dtype, m, kind, seed=m)
        x = search_values(bd, 500)
        argsorted = torch.argsort(bd, stable=True)
        shuffled = torch.randperm(m, generator=torch.Generator().manual_seed(m))
        for name, order in (("argsort", argsorted), ("random", shuffled), ("strided", argsorted.repeat(2)[::2])):
            for right in (False, True):
                check(lambda: torch.searchsorted(bd, x, right=right, sorter=order), served=True,
                      what=f"sorter {name} m={m} right={right}")


def test_bad_sorters_raise_torchs_errors(isa):
    bd = torch.randn(20)
    x = torch.randn(100)
    for name, order in (("out of range", torch.arange(20) + 1), ("negative", torch.arange(20) - 1),
                        ("int32", torch.arange(20, dtype=torch.int32)), ("short", torch.arange(19))):
        both = check(lambda: torch.searchsorted(bd, x, sorter=order), served=False, what=name)
        assert type(both[0]).__name__ == "Raised", name


@dtype_params
def test_rows_of_boundaries(isa, dtype):
    for shape, m, per_row in (((4,), 16, 40), ((2, 3), 100, 70), ((64,), 8, 3), ((5,), 1, 30)):
        bd = torch.stack([boundaries(dtype, m, BOUNDARY_KINDS[i % 5], seed=i) for i in range(int(torch.tensor(shape).prod()))])
        bd = bd.reshape(*shape, m)
        x = torch.stack([search_values(r, per_row, seed=i) for i, r in enumerate(bd.reshape(-1, m))]).reshape(*shape, per_row)
        served = x.numel() >= MIN_VALUES
        for right in (False, True):
            check(lambda: torch.searchsorted(bd, x, right=right), served=served, what=f"rows {shape} m={m}")
            order = torch.argsort(bd, dim=-1, stable=True)
            narrow_declined = dtype.itemsize < 4 and per_row * m.bit_length() * 4 < m
            check(lambda: torch.searchsorted(bd, x, right=right, sorter=order),
                  served=served and per_row * m.bit_length() * 4 >= m and not narrow_declined,
                  what=f"rows {shape} m={m} sorter")


def test_mismatched_shapes_and_bad_arguments_raise_torchs_errors(isa):
    bd = torch.sort(torch.randn(3, 10)).values
    for what, call in (
            ("rows mismatch", lambda: torch.searchsorted(bd, torch.randn(4, 100))),
            ("dims mismatch", lambda: torch.searchsorted(bd, torch.randn(300))),
            ("bucketize 2-d", lambda: torch.bucketize(torch.randn(300), bd)),
            ("0-dim boundaries", lambda: torch.searchsorted(torch.tensor(1.0), torch.randn(300))),
            ("bool", lambda: torch.searchsorted(torch.tensor([False, True]), torch.ones(300, dtype=torch.bool))),
            ("out dtype", lambda: torch.searchsorted(bd[0], torch.randn(300), out=torch.empty(300, dtype=torch.int32))),
            ("out dtype int32", lambda: torch.searchsorted(bd[0], torch.randn(300), out_int32=True,
                                                            out=torch.empty(300, dtype=torch.long))),
    ):
        both = check(call, served=False, what=what)
        assert type(both[0]).__name__ == "Raised", what


def test_mixed_dtypes_promote_in_torch(isa):
    bd = torch.sort(torch.randn(100, dtype=torch.float64)).values
    for x in (torch.randn(500), torch.randint(-3, 3, (500,)), torch.randn(500).to(torch.bfloat16)):
        check(lambda: torch.searchsorted(bd, x), served=False, what=f"values {x.dtype}")
        check(lambda: torch.bucketize(x, bd), served=False, what=f"bucketize {x.dtype}")


def test_scalar_values_stay_torchs(isa):
    bd = torch.sort(torch.randn(100)).values
    check(lambda: torch.searchsorted(bd, 0.5), served=False, what="Scalar")
    check(lambda: torch.searchsorted(bd, torch.tensor(0.5)), served=False, what="0-dim")
    check(lambda: torch.bucketize(0.5, bd), served=False, what="bucketize Scalar")


def test_empty_inputs(isa):
    bd = torch.sort(torch.randn(100)).values
    check(lambda: torch.searchsorted(bd, torch.empty(0)), served=False, what="no values")
    check(lambda: torch.searchsorted(torch.empty(0), torch.randn(200)), served=False, what="no boundaries")
    check(lambda: torch.searchsorted(torch.empty(3, 0), torch.randn(3, 100)), served=False, what="rows of none")
    check(lambda: torch.bucketize(torch.randn(0, 5), bd), served=False, what="empty 2-d")


@dtype_params
def test_non_contiguous_inputs(isa, dtype):
    bd = boundaries(dtype, 200, "ties")
    x = search_values(bd, 2000).reshape(40, 50)
    check(lambda: torch.bucketize(x.t(), bd), served=True, what="transposed values")
    check(lambda: torch.bucketize(x[:, ::3], bd), served=True, what="sliced values")
    check(lambda: torch.searchsorted(bd.repeat_interleave(2)[::2], x), served=True, what="strided boundaries")
    rows = torch.stack([bd, bd.flip(0)]).t().contiguous().t()  # rows with stride 1 across, 2 along
    check(lambda: torch.searchsorted(rows, x[:2]), served=True, what="strided boundary rows")
    check(lambda: torch.bucketize(x.expand(3, 40, 50), bd), served=True, what="expanded values")


OUT_KINDS = ("exact", "empty", "wrong_shape", "transposed", "strided", "aliased_values")


def out_for(kind: str, shape, dtype) -> torch.Tensor:
    if kind == "exact":
        return torch.empty(shape, dtype=dtype)
    if kind == "empty":
        return torch.empty(0, dtype=dtype)
    if kind == "wrong_shape":
        return torch.empty(7, 3, dtype=dtype)
    if kind == "transposed":
        return torch.empty(shape[::-1], dtype=dtype).t()
    if kind == "strided":
        return torch.empty([2 * s for s in shape], dtype=dtype)[::2, ::2]
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", OUT_KINDS)
@pytest.mark.parametrize("out_int32", (False, True))
def test_out_tensors(isa, kind, out_int32):
    index_dtype = torch.int32 if out_int32 else torch.long
    bd = torch.sort(torch.randint(-50, 50, (64,), dtype=index_dtype)).values
    x0 = torch.randint(-60, 60, (30, 20), dtype=index_dtype)
    if kind == "aliased_values":  # out= the values themselves: torch must run
        def call():
            x = x0.clone()
            return torch.searchsorted(bd, x, out_int32=out_int32, out=x), x
        check(call, served=False, what=kind)
        return

    def call(op):
        out = out_for(kind, [30, 20], index_dtype)
        if op == "bucketize":
            r = torch.bucketize(x0, bd, out_int32=out_int32, out=out)
        else:
            r = torch.searchsorted(bd, x0, out_int32=out_int32, out=out)
        return r, out

    for op in ("searchsorted", "bucketize"):
        check(lambda: call(op), served=True, what=f"{op} out {kind}")


def test_huge_row_of_values(isa):
    bd = torch.sort(torch.randn(4096)).values
    x = torch.randn(1 << 22)
    check(lambda: torch.bucketize(x, bd), served=True, what="4M values")


def test_threads_give_the_same_positions():
    bd = boundaries(torch.float32, 1000, "ties")
    x = search_values(bd, 300_000)
    rows = torch.sort(torch.randn(600, 50)).values
    many = torch.randn(600, 500)
    for threads in (1, 2, 3):
        with num_threads(threads):
            check(lambda: torch.bucketize(x, bd), served=True, what=f"{threads} threads")
            check(lambda: torch.searchsorted(rows, many), served=True, what=f"rows, {threads} threads")


def test_scripted_and_compiled_reach_kwker():
    bd = torch.sort(torch.randn(100)).values

    @torch.jit.script
    def scripted(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bucketize(x, b) + torch.searchsorted(b, x, right=True)

    assert_reaches_kwker(lambda x: scripted(x, bd), torch.randn(1000), ["searchsorted"])
    compiled = torch.compile(lambda x: torch.searchsorted(bd, x * 2), backend="inductor", fullgraph=True)
    assert_reaches_kwker(compiled, torch.randn(1000), ["searchsorted"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(SEARCH_DTYPES), m=st.integers(1, 300), n=st.integers(0, 400),
       kind=st.sampled_from(BOUNDARY_KINDS), right=st.booleans(), out_int32=st.booleans(),
       sorter=st.booleans(), rows=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_hypothesis(isa, dtype, m, n, kind, right, out_int32, sorter, rows, seed):
    bd = torch.stack([boundaries(dtype, m, kind, seed=seed + r) for r in range(rows)])
    x = torch.stack([search_values(bd[r], n, seed=seed + r) for r in range(rows)])
    if rows == 1:
        bd, x = bd[0], x[0]
    order = torch.argsort(bd, dim=-1) if sorter else None
    both = run_both(lambda: torch.searchsorted(bd, x, right=right, out_int32=out_int32, sorter=order))
    assert_same(both, context=f"{NAMES[dtype]} m={m} n={n} {kind} rows={rows} sorter={sorter}")
