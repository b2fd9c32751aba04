"""Differential tests of Kwker's kthvalue, median and nanmedian against torch's own CPU kernels:
values AND indices bit for bit (ties, NaN payloads, -0.0/+0.0 included), identical output shapes and
strides, identical errors and warnings.

torch.kthvalue / median / nanmedian (functions and Tensor methods, with dim or without, out= or
not) reach aten::kthvalue.values, aten::median(.dim_values) and aten::nanmedian(.dim_values), which
Kwker overrides. The oracle is the same call under kto.disabled(). Every case runs on every ISA (the
`isa` fixture).
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

SELECT_DTYPES = tuple(d for d in sortdata.DTYPES if d != torch.bool)
# Rows at least this long (and 64 elements) are Kwker's own: median/nanmedian, kthvalue.
MIN_ROW = {"median": 4, "kthvalue": 5}
dtype_params = pytest.mark.parametrize("dtype", SELECT_DTYPES, ids=[NAMES[d] for d in SELECT_DTYPES])


def ks_for(n: int) -> list[int]:
    return sorted({k for k in (1, 2, n // 3 + 1, (n + 1) // 2, n - 1, n) if 1 <= k <= n})


def served_along(x: torch.Tensor, dim: int, family: str) -> bool:
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        return False
    n = x.size(dim)
    return n >= MIN_ROW[family] and x.numel() >= 64 and (x.stride(dim) != 0 or n == 1)


def check(call, x, *, dim=None, what="", expect_served=True, family="median"):
    both = run_both(call)
    assert_same(both, context=what)
    served = served_along(x, dim, family) if dim is not None else x.numel() >= 64
    if expect_served and served:
        assert both.served >= 1, f"{what}: Kwker did not serve (fallback reasons {both.reasons()})"
    return both


def check_all_ops(x, dim=-1, ks=None, keepdims=(False, True), context=""):
    shape = f"x{tuple(x.shape)} {x.dtype} dim={dim}"
    for keepdim in keepdims:
        for k in ks if ks is not None else ks_for(x.size(dim)):
            check(lambda: torch.kthvalue(x, k, dim, keepdim), x, dim=dim, family="kthvalue",
                  what=f"{context} kthvalue({shape}, k={k}, keepdim={keepdim})")
            # One row alone: the tiled and lane paths are not taken.
            row = x.select(1 if dim % x.dim() == 0 and x.dim() > 1 else 0, 0) if x.dim() > 1 else x
            row_dim = 0 if x.dim() > 1 and dim % x.dim() == 0 else -1
            check(lambda: torch.kthvalue(row, k, row_dim, keepdim), row, dim=row_dim, family="kthvalue",
                  what=f"{context} kthvalue(one row of {shape}, k={k}, keepdim={keepdim})")
        for op in (torch.median, torch.nanmedian):
            check(lambda: op(x, dim, keepdim), x, dim=dim, what=f"{context} {op.__name__}({shape}, keepdim={keepdim})")


def check_whole(x, context=""):
    """median() / nanmedian(): may decline where torch's bits depend on its algorithm."""
    for op in (torch.median, torch.nanmedian):
        check(lambda: op(x), x, what=f"{context} {op.__name__}(x{tuple(x.shape)} {x.dtype})", expect_served=False)


@dtype_params
@pytest.mark.parametrize("n", (3, 4, 5, 9, 16, 17, 25, 31, 32, 33, 48, 49, 64, 65, 100, 1000, 2047, 2048, 5000))
def test_lengths_and_ks(isa, dtype, n):
    for dist in ("random", "few", "equal"):
        x = sortdata.make(dtype, (max(3, 128 // n), n), dist, seed=n)  # short rows: enough to be served
        check_all_ops(x, keepdims=(False,), context=dist)
        check_whole(x, context=dist)


@pytest.mark.parametrize("dtype,dist", [pytest.param(d, dist, id=f"{NAMES[d]}-{dist}")
                                        for d in SELECT_DTYPES for dist in sortdata.applicable(d)])
def test_distributions(isa, dtype, dist):
    """Heavy ties (few distinct values, all equal, quantised), NaN payloads at random positions,
    +-inf, -0.0/+0.0, subnormals, sorted and reversed rows; short and sampled (>= 2048) rows."""
    for n in (9, 33, 300, 3000):
        x = sortdata.make(dtype, (max(4, 256 // n), n), dist, seed=7)
        check_all_ops(x, ks=(1, 2, n // 4, n // 2, n), context=dist)
        check_whole(x, context=dist)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16, torch.float16), ids=lambda d: NAMES[d])
def test_nan_rows(isa, dtype):
    """Rows of NaNs only (nanmedian's libstdc++-specific index), one NaN, NaNs first/last, mixed payloads."""
    nan = float("nan")
    x = torch.randn(6, 40).to(dtype)
    x[0] = nan
    x[1, 17] = nan
    x[2, :20] = nan
    x[3, 20:] = nan
    x[4] = -x[4].abs() * 0  # -0.0 and +0.0 only
    x[4, ::3] = 0.0
    x[5, ::2] = nan
    payloads = sortdata.nan_patterns(dtype)
    bits = sortdata.to_bits(x).copy()
    for i, p in enumerate(payloads):
        bits[0, i::len(payloads)] = p
    x = sortdata.from_bits(bits, dtype)
    check_all_ops(x, ks=(1, 20, 39, 40))
    for row in x:
        check_whole(torch.cat([row] * 4))


@pytest.mark.parametrize("dtype", (torch.int64, torch.float32, torch.bfloat16), ids=lambda d: NAMES[d])
@pytest.mark.parametrize("layout", sortdata.LAYOUTS)
@pytest.mark.parametrize("dim", (0, 1, -1))
def test_layouts_and_dims(isa, dtype, layout, dim):
    x = sortdata.make(dtype, (300, 200), "few", layout=layout, dim=dim, seed=11)
    if layout == "expanded":  # median along a stride-0 dim: torch reads past the tensor (see below)
        for k in (1, 3, 100):
            check(lambda: torch.kthvalue(x, k, dim), x, dim=dim, expect_served=False)
    else:
        check_all_ops(x, dim, ks=(1, 3, 100), context=layout)
    check_whole(x, context=layout)


@pytest.mark.parametrize("dtype", (torch.float32, torch.int32, torch.float16, torch.uint8), ids=lambda d: NAMES[d])
def test_short_rows_of_filters_and_columns(isa, dtype):
    """Short rows (a vector lane per row, or ranked by counting): median-filter patches from F.unfold
    (rows of 9 and 25, strided by the image size), columns of 32 and 64 (along dim 0), sliding windows
    of 31 (Tensor.unfold: overlapping rows), ties and NaNs."""
    gen = torch.Generator().manual_seed(21)
    image = (torch.rand(1, 1, 40, 40, generator=gen) * 8).floor()
    if dtype.is_floating_point:
        image[0, 0, ::7, ::5] = float("nan")
    for k in (3, 5):
        patches = torch.nn.functional.unfold(image, k, padding=k // 2)[0].t().to(dtype)  # (1600, k * k)
        check_all_ops(patches, -1, ks=(1, k * k // 2, k * k), keepdims=(False,), context=f"{k}x{k} patches")
    for rows in (32, 64):
        x = sortdata.make(dtype, (rows, 300), "few", seed=rows)
        check_all_ops(x, 0, ks=(1, rows // 2, rows), keepdims=(False,), context=f"columns of {rows}")
    signal = image.flatten().to(dtype)
    check_all_ops(signal.unfold(0, 31, 1), -1, ks=(1, 16, 31), keepdims=(False,), context="windows of 31")


def test_feature_columns_and_channels_last(isa):
    """Columns of a (samples x features) matrix: rows along dim 0, handled a tile at a time."""
    x = torch.randn(3000, 37).round(decimals=2)
    check_all_ops(x, 0, ks=(1, 750, 3000))
    y = torch.randn(2, 3, 150, 130).to(memory_format=torch.channels_last).round(decimals=1)
    for dim in range(4):
        check_all_ops(y, dim, ks=(1, y.size(dim) // 2), context="channels_last")


@pytest.mark.parametrize("dtype", (torch.uint8, torch.int8, torch.bfloat16, torch.int64), ids=lambda d: NAMES[d])
def test_tied_kthvalue_of_many_long_rows(isa, dtype):
    """Tied k-th values of many long rows (bytes of 256 values, bfloat16 activations, few int64s):
    torch's quickselect replayed with vector partitions, served for every row."""
    gen = torch.Generator().manual_seed(31)
    if dtype == torch.bfloat16:
        x = torch.randn(12, 5000, generator=gen).to(dtype)
    elif dtype == torch.int64:
        x = torch.randint(-3, 4, (12, 5000), generator=gen, dtype=dtype)
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max + 1, (12, 5000), generator=gen).to(dtype)
    columns = x.t().contiguous()
    for k in (1, 50, 2500, 4999, 5000):
        check(lambda: torch.kthvalue(x, k), x, dim=-1, what=f"kthvalue k={k}", family="kthvalue")
        check(lambda: torch.kthvalue(columns, k, 0), columns, dim=0, what=f"kthvalue k={k} (columns)",
              family="kthvalue")


def test_expanded_rows_go_to_torch(isa):
    """Stride 0 along the dim: torch's median reads such a row as if it were contiguous, past the
    tensor's elements (its answer is undefined), so Kwker leaves such rows to torch, kthvalue too."""
    base = torch.randn(1, 300)
    x = base.expand(64, 300)
    both = check(lambda: torch.kthvalue(x, 5, 0), x, dim=0, expect_served=False)
    assert both.served == 0
    check(lambda: torch.kthvalue(x, 5, 1), x, dim=1, family="kthvalue")


@pytest.mark.parametrize("shape,dim", [((), 0), ((), -1), ((1,), 0), ((5, 0), 0), ((0, 300), 1), ((300, 0), 0),
                                       ((1, 300), 1), ((300, 1), 1), ((64, 16), 1), ((4, 15), 1)])
def test_degenerate_shapes(isa, shape, dim):
    x = torch.randn(shape)
    for call in (lambda: torch.kthvalue(x, 1, dim), lambda: torch.median(x, dim), lambda: torch.nanmedian(x, dim),
                 lambda: torch.median(x), lambda: torch.nanmedian(x)):
        assert_same(run_both(call), context=f"{shape} dim={dim}")


@pytest.mark.parametrize("call", [
    lambda x: torch.kthvalue(x, 0, -1), lambda x: torch.kthvalue(x, 301, -1), lambda x: torch.kthvalue(x, -1, -1),
    lambda x: torch.kthvalue(x, 1, 2), lambda x: torch.median(x, 2), lambda x: torch.nanmedian(x, -3),
    lambda x: torch.kthvalue(x, 1, 0, out=(x, torch.empty(0, dtype=torch.long))),
    lambda x: torch.median(x, 1, out=(torch.empty(0), torch.empty(0))),
    lambda x: torch.median(x, 1, out=(torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.long))),
])
def test_bad_arguments_raise_torch_errors(call):
    both = run_both(lambda: call(torch.randn(4, 300)))
    assert_same(both)
    assert both.torch.__class__.__name__ == "Raised"


@pytest.mark.parametrize("dtype", (torch.bool, torch.complex64, torch.uint16), ids=str)
def test_other_dtypes_go_to_torch(dtype):
    x = torch.ones(2, 300, dtype=dtype) if dtype != torch.complex64 else torch.randn(2, 300, dtype=dtype)
    for call in (lambda: torch.kthvalue(x, 3), lambda: torch.median(x, 1), lambda: torch.median(x)):
        both = run_both(call)
        assert_same(both)
        assert both.served == 0


@pytest.mark.parametrize("kind", OUT_KINDS)
@pytest.mark.parametrize("dtype", (torch.int64, torch.float32), ids=lambda d: NAMES[d])
@pytest.mark.parametrize("op", ("kthvalue", "median", "nanmedian"))
def test_out(isa, kind, dtype, op):
    x = sortdata.make(dtype, (4, 640), "few", seed=5)
    for dim, keepdim in ((1, False), (1, True), (0, False)):
        def run():
            shape = list(x.shape)
            if keepdim:
                shape[dim] = 1
            else:
                del shape[dim]
            values, indices = out_tensors(kind, shape, x.dtype)
            if op == "kthvalue":
                result = torch.kthvalue(x, 3, dim, keepdim, out=(values, indices))
            else:
                result = getattr(torch, op)(x, dim, keepdim, out=(values, indices))
            return result, values, indices

        both = run_both(run)
        assert_same(both, context=f"{op} out={kind} dim={dim} keepdim={keepdim}")
        if kind in SERVED_KINDS and dim == 1:
            assert both.served >= 1, both.reasons()


def test_autograd(isa):
    def run():
        x = sortdata.make(torch.float64, (3, 500), "few", seed=9).requires_grad_()
        values = torch.kthvalue(x, 20).values + torch.median(x, 1).values + torch.nanmedian(x, 0).values.sum()
        (values * torch.arange(3.0, dtype=torch.float64)).sum().backward()
        whole = sortdata.make(torch.float64, (1000,), "random", seed=4).requires_grad_()
        torch.median(whole).backward()
        return values.detach(), x.grad, whole.grad

    assert_same(run_both(run))


def test_scripted_and_compiled_calls_reach_kwker():
    x = torch.randn(4, 1000)

    @torch.jit.script
    def scripted(t: torch.Tensor):
        return torch.kthvalue(t, 5)[1] + torch.median(t, 1)[1]

    compiled = torch.compile(lambda t: (torch.kthvalue(t, 5)[1], torch.median(t, 1)[1], torch.nanmedian(t)))
    for fn in (scripted, compiled):
        assert_reaches_kwker(fn, x, ["kthvalue", "median"])


def test_threads_do_not_change_results(isa):
    for dist in ("few", "random"):
        x = sortdata.make(torch.float32, (64, 3000), dist, seed=13)
        for n in (1, 2):
            with num_threads(n):
                check_all_ops(x, ks=(1, 1500), keepdims=(False,))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hypothesis(isa, data):
    dtype = data.draw(st.sampled_from(SELECT_DTYPES))
    dist = data.draw(st.sampled_from(sortdata.applicable(dtype)))
    n = data.draw(st.one_of(st.integers(MIN_ROW["median"], 80), st.integers(81, 5000)))
    rows = data.draw(st.integers(1, 4))
    x = sortdata.make(dtype, (rows, n), dist, seed=data.draw(st.integers(0, 2**16)))
    k = data.draw(st.integers(1, n))
    check(lambda: torch.kthvalue(x, k), x, dim=-1, what=f"{dist} kthvalue k={k}", family="kthvalue")
    check(lambda: torch.median(x, -1), x, dim=-1, what=f"{dist} median")
    check(lambda: torch.nanmedian(x, -1), x, dim=-1, what=f"{dist} nanmedian")
    check_whole(x, context=dist)


def test_whole_tensors_past_the_cap_go_to_torch():
    """median() / nanmedian() of more than 2^25 elements: Kwker's work buffers would reach a gigabyte."""
    x = torch.arange((1 << 25) + 1, dtype=torch.float32).flip(0)
    for op in (torch.median, torch.nanmedian):
        both = run_both(lambda: op(x))
        assert_same(both)
        assert both.served == 0 and both.reasons()["median"] == {"too_long": 1}
