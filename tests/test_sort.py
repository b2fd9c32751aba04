"""Differential tests of Kwker's sort against torch's own CPU kernel: values AND indices bit for bit,
identical output strides, identical errors and warnings.

torch.sort, Tensor.sort, torch.argsort, Tensor.argsort and torch.msort all reach aten::sort.stable /
aten::sort.values_stable, which Kwker overrides. The oracle is the same call under kto.disabled().
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import introsort
import sortdata
from exactness import assert_bit_identical, assert_same, run_both
from sortdata import DTYPES, INT_DTYPES, NAMES

pytestmark = pytest.mark.usefixtures("native")

OMIT = "omit"  # the stable= argument left out (torch.sort(x, dim, descending): the non-stable overload)
STABLES = (OMIT, None, False, True)
SERVED_MIN = 4096  # from this many elements on (in rows of at least SERVED_MIN_ROW), a covered call
SERVED_MIN_ROW = 16  # must be served by Kwker itself

dtype_params = pytest.mark.parametrize("dtype", DTYPES, ids=[NAMES[d] for d in DTYPES])


def sort_kwargs(stable, dim=-1, descending=False) -> dict:
    kw = {"dim": dim, "descending": descending}
    if stable is not OMIT:
        kw["stable"] = stable
    return kw


MONOTONIC_FEW_TIES_SHARE = 4096  # the core's kMonotonicFewTiesShare


def first_row_presorted_with_ties(x: torch.Tensor, dim: int) -> bool:
    """Whether the first row along dim is already in order, or in reverse order, under torch's
    comparator and has more than n / 4096 equal neighbours: Kwker declines unstable sorts of such
    rows (torch is as fast)."""
    import kwker.torch_ops as kto

    row = x.movedim(dim, -1).reshape(-1, x.size(dim))[0]
    with kto.disabled():
        identity = torch.arange(row.numel())
        in_order = any(torch.equal(torch.sort(row, stable=True, descending=d).indices, identity)
                       for d in (False, True))
        v = torch.sort(row).values
    if v.is_floating_point():
        equal = (v[1:] == v[:-1]) | (v[1:].isnan() & v[:-1].isnan())
    else:
        equal = v[1:] == v[:-1]
    return in_order and int(equal.sum()) * MONOTONIC_FEW_TIES_SHARE > row.numel()


def expect_served(x: torch.Tensor, dim: int, stable) -> bool:
    """Whether Kwker must serve this call itself (and not hand it to torch's kernel)."""
    if x.dtype not in DTYPES or x.dim() == 0 or x.numel() < SERVED_MIN or stable is None:
        return False
    if not -x.dim() <= dim < x.dim():
        return False
    if x.size(dim) < SERVED_MIN_ROW or x.stride(dim) == 0:  # stride 0: torch's identity answer
        return False
    return stable is True or x.size(dim) <= 256 or not first_row_presorted_with_ties(x, dim)


def is_non_overlapping_and_dense(t: torch.Tensor) -> bool:
    """torch's TensorImpl::is_non_overlapping_and_dense, in Python."""
    expected = 1
    for d in sorted((d for d in range(t.dim()) if t.size(d) != 1), key=lambda d: t.stride(d)):
        if t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


def check(fn, *, served: bool, context: str, warnings_too: bool = True):
    both = run_both(fn)
    assert_same(both, context=context, warnings_too=warnings_too)
    if served:
        assert both.served >= 1, (f"{context}: Kwker did not serve this call "
                                  f"(fallback reasons {both.reasons()})")
    return both


def check_sort_variants(x, dim, *, stables=STABLES, descendings=(False, True), context="",
                        assert_served=True):
    for stable in stables:
        for descending in descendings:
            kw = sort_kwargs(stable, dim, descending)
            check(lambda: torch.sort(x, **kw), served=assert_served and expect_served(x, dim, stable),
                  context=f"{context} torch.sort(x{tuple(x.shape)}, {kw})")


# -- sizes ----------------------------------------------------------------------------------------

SIZES = (0, 1, 2, 16, 17, 100, 1000, 32767, 32768, 32769, 200000)


@dtype_params
@pytest.mark.parametrize("n", SIZES)
def test_sizes(isa, dtype, n):
    """1-D sorts across sizes; 32768 is where torch moves 1-D integer ascending sorts to a radix sort
    (stable order even for stable=False)."""
    dists = ["random", "few"]
    if dtype in INT_DTYPES and n >= 32767:
        dists.append("extremes")
    stables = (False, True) if n >= 100000 else (OMIT, False, True) if n >= 32767 else STABLES
    for dist in dists:
        x = sortdata.values(dtype, n, dist)
        check_sort_variants(x, -1, stables=stables, context=f"[{isa} {dist}]")


# -- distributions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,dist", [pytest.param(d, dist, id=f"{NAMES[d]}-{dist}")
                                        for d in DTYPES for dist in sortdata.applicable(d)])
@pytest.mark.parametrize("n", (17, 100, 5000))
def test_distributions(isa, dtype, dist, n):
    x = sortdata.values(dtype, n, dist)
    check_sort_variants(x, 0, context=f"[{isa} {dist}]")


# -- layouts and dims --------------------------------------------------------------------------------

LAYOUT_SHAPE = (37, 24, 45)


@dtype_params
@pytest.mark.parametrize("layout", sortdata.LAYOUTS)
@pytest.mark.parametrize("dim", (0, -1, 1))
def test_layouts(isa, dtype, layout, dim):
    """Contiguous, transposed (dense, not contiguous), sliced with step 2 (not dense), expanded with
    stride 0 along the sorted dim and along another dim; sorted along the first, last and middle dim.
    Output strides must be torch's (the input's when dense, else torch's inferred dense strides)."""
    x = sortdata.make(dtype, LAYOUT_SHAPE, "ties_special", layout, dim)
    check_sort_variants(x, dim, stables=(None, False, True), context=f"[{isa} {layout}]")


@pytest.mark.parametrize("dtype", (torch.uint8, torch.int64, torch.bfloat16, torch.float32),
                         ids=lambda d: NAMES[d])
@pytest.mark.parametrize("shape", ((300, 40), (1000, 17), (2, 257, 33)), ids=str)
def test_sort_along_dim0_in_tiles(isa, dtype, shape):
    """Long rows along dim 0 whose neighbours are adjacent in memory are sorted in tiles of 16 rows:
    full tiles, a partial last tile, and tiles cut where the inner dim wraps."""
    x = sortdata.values(dtype, math.prod(shape), "ties_special").reshape(shape)
    check_sort_variants(x, 0, stables=(False, True), context=f"[{isa} tiles {shape}]")
    check_sort_variants(x.transpose(0, -1).contiguous().transpose(0, -1), 0, stables=(False,),
                        context=f"[{isa} tiles transposed {shape}]")


@pytest.mark.parametrize("dtype", (torch.uint8, torch.int32, torch.float16, torch.float64),
                         ids=lambda d: NAMES[d])
@pytest.mark.parametrize("dim", (0, 1, 2, 3, -1))
def test_channels_last(isa, dtype, dim):
    x = sortdata.values(dtype, 6 * 20 * 9 * 11, "ties_special").reshape(6, 20, 9, 11)
    x = x.contiguous(memory_format=torch.channels_last)
    check_sort_variants(x, dim, stables=(False, True), context=f"[{isa} channels_last]")


@pytest.mark.parametrize("dtype", DTYPES, ids=[NAMES[d] for d in DTYPES])
def test_other_strides(isa, dtype):
    """Assorted strided views: storage offsets, steps on several dims, permutations of 4-D tensors."""
    base = sortdata.values(dtype, 4 * 30 * 7 * 50, "ties_special").reshape(4, 30, 7, 50)
    views = {
        "step3_dim1_offset": base[1:, 2::3],
        "permuted_0312": base.permute(0, 3, 1, 2),
        "permuted_slice": base.permute(2, 0, 3, 1)[:, 1:3, ::2],
        "step_last": base[..., ::5],
        "row_of_matrix_T": base.reshape(120, 350).t()[5:300],
        "diagonalish": base.reshape(-1)[: 8000].as_strided((90, 80), (81, 1)),
    }
    for name, x in views.items():
        for dim in range(-x.dim(), x.dim()):
            check_sort_variants(x, dim, stables=(False, True), descendings=(False, True),
                                context=f"[{isa} {name}]")


# -- odd shapes ---------------------------------------------------------------------------------------

@dtype_params
@pytest.mark.parametrize("stable", STABLES, ids=lambda s: f"stable={s}")
def test_zero_dim(dtype, stable):
    x = sortdata.values(dtype, 1, "random").reshape(())
    for dim in (0, -1, 1, -2):
        for descending in (False, True):
            kw = sort_kwargs(stable, dim, descending)
            check(lambda: torch.sort(x, **kw), served=False, context=f"0-dim sort {kw}")
            check(lambda: x.sort(**kw), served=False, context=f"0-dim Tensor.sort {kw}")


@pytest.mark.parametrize("dtype", (torch.bool, torch.int64, torch.float32, torch.bfloat16), ids=lambda d: NAMES[d])
@pytest.mark.parametrize("shape", ((0,), (0, 5), (5, 0), (3, 0, 4), (1,), (1, 1, 1), (4096, 1), (1, 4096),
                                   (2, 1, 2048)), ids=str)
def test_degenerate_shapes(isa, dtype, shape):
    x = sortdata.values(dtype, math.prod(shape), "few").reshape(shape)
    for dim in range(-len(shape), len(shape)):
        # Rows of length 1 are already sorted: whether Kwker serves them is its choice.
        check_sort_variants(x, dim, stables=(OMIT, False, True), context=f"[{isa}]", assert_served=False)


# -- the op surface ------------------------------------------------------------------------------------

OPS = {
    "torch.sort": lambda x, stable, dim, desc: torch.sort(x, **sort_kwargs(stable, dim, desc)),
    "Tensor.sort": lambda x, stable, dim, desc: x.sort(**sort_kwargs(stable, dim, desc)),
    "torch.sort_positional": lambda x, stable, dim, desc: torch.sort(x, dim, desc),
    "torch.argsort": lambda x, stable, dim, desc: torch.argsort(x, **sort_kwargs(stable, dim, desc)),
    "Tensor.argsort": lambda x, stable, dim, desc: x.argsort(**sort_kwargs(stable, dim, desc)),
    "torch.argsort_positional": lambda x, stable, dim, desc: torch.argsort(x, dim, desc),
    "torch.msort": lambda x, stable, dim, desc: torch.msort(x),
    "torch.sort_out": lambda x, stable, dim, desc: _sort_out(x, stable, dim, desc),
}
ARGSORT_OPS = ("torch.argsort", "Tensor.argsort")


def _sort_out(x, stable, dim, desc):
    v = torch.empty_like(x)
    i = torch.empty_like(x, dtype=torch.long)
    r = torch.sort(x, **sort_kwargs(stable, dim, desc), out=(v, i))
    return r, v, i, r[0] is v, r[1] is i


def op_dim(op: str, dim: int) -> int:
    return 0 if op == "torch.msort" else dim


def op_stable(op: str, stable):
    if op in ("torch.msort", "torch.sort_positional", "torch.argsort_positional"):
        return False
    return stable


@dtype_params
@pytest.mark.parametrize("op", list(OPS))
def test_ops(isa, dtype, op):
    x = sortdata.make(dtype, (40, 130), "ties_special", "contiguous")
    fn = OPS[op]
    stables = (OMIT, False, True) if op in ARGSORT_OPS else STABLES
    if op in ("torch.msort", "torch.sort_positional", "torch.argsort_positional"):
        stables = (OMIT,)
    for stable in stables:
        for dim in (0, -1):
            for desc in ((False,) if op == "torch.msort" else (False, True)):
                served = expect_served(x, op_dim(op, dim), op_stable(op, stable))
                check(lambda: fn(x, stable, dim, desc), served=served,
                      context=f"[{isa}] {op}(stable={stable}, dim={dim}, descending={desc})")


def test_argsort_stable_none_is_rejected_alike():
    x = sortdata.values(torch.float32, 5000, "few")
    check(lambda: torch.argsort(x, stable=None), served=False, context="argsort(stable=None)")


# -- out= -----------------------------------------------------------------------------------------------

def _outs(kind, x):
    """(values_out, indices_out) of the given kind for input x (2-D)."""
    long = torch.long
    if kind == "exact":
        return torch.empty_like(x), torch.empty_like(x, dtype=long)
    if kind == "empty":  # torch resizes zero-element outs silently
        return torch.empty(0, dtype=x.dtype), torch.empty(0, dtype=long)
    if kind == "wrong_shape":  # torch resizes them, with a deprecation warning
        return torch.empty(3, dtype=x.dtype), torch.empty(3, 5, dtype=long)
    if kind == "wrong_shape_bigger":
        return torch.empty(x.numel() + 10, dtype=x.dtype), torch.empty(x.numel() + 10, dtype=long)
    if kind == "transposed":  # dense but not contiguous: written in place
        return (torch.empty(x.shape[::-1], dtype=x.dtype).t(), torch.empty(x.shape[::-1], dtype=long).t())
    if kind == "noncontiguous":  # step-2 slices: torch sorts into a proxy and copies back
        return (torch.empty(x.shape[0], 2 * x.shape[1], dtype=x.dtype)[:, ::2],
                torch.empty(2 * x.shape[0], x.shape[1], dtype=long)[1::2])
    if kind == "values_noncontiguous":
        return torch.empty(x.shape[0], 2 * x.shape[1], dtype=x.dtype)[:, 1::2], torch.empty_like(x, dtype=long)
    if kind == "offset":  # views with a storage offset
        return (torch.empty(x.numel() + 7, dtype=x.dtype)[7:].view(x.shape),
                torch.empty(x.numel() + 3, dtype=long)[3:].view(x.shape))
    if kind == "expanded":  # overlapping out: torch refuses to write it
        return torch.empty(1, dtype=x.dtype).expand(x.shape), torch.empty_like(x, dtype=long)
    if kind == "wrong_values_dtype":
        other = torch.float64 if x.dtype != torch.float64 else torch.float32
        return torch.empty_like(x, dtype=other), torch.empty_like(x, dtype=long)
    if kind == "wrong_indices_dtype":
        return torch.empty_like(x), torch.empty_like(x, dtype=torch.int32)
    raise ValueError(kind)


OUT_KINDS = ("exact", "empty", "wrong_shape", "wrong_shape_bigger", "transposed", "noncontiguous",
             "values_noncontiguous", "offset", "expanded", "wrong_values_dtype", "wrong_indices_dtype",
             "alias_input", "alias_input_transposed", "alias_indices_input")
# Not tested: one buffer as both outs (sort(x, out=(b, b)) with int64 x). torch's own kernel corrupts the
# heap on it (glibc "malloc assertion failure" with stable=False): undefined behaviour, no oracle.
SERVED_OUT_KINDS = ("exact", "transposed", "offset")


def _run_out(x_factory, kind, stable, dim, desc):
    x = x_factory()
    if kind == "alias_input":  # values out is the input itself
        v, i = x, torch.empty_like(x, dtype=torch.long)
    elif kind == "alias_input_transposed":  # values out is the input, a dense non-contiguous tensor
        x = x.t().contiguous().t()
        v, i = x, torch.empty_like(x, dtype=torch.long)
    elif kind == "alias_indices_input":  # indices out is the (int64) input itself
        v, i = torch.empty_like(x), x
    else:
        v, i = _outs(kind, x)
    r = torch.sort(x, **sort_kwargs(stable, dim, desc), out=(v, i))
    return r, v, i, r[0] is v, r[1] is i


INT64_ONLY_OUT_KINDS = ("alias_indices_input",)


@pytest.mark.parametrize("dtype,kind", [pytest.param(d, k, id=f"{NAMES[d]}-{k}") for d in DTYPES for k in OUT_KINDS
                                        if k not in INT64_ONLY_OUT_KINDS or d == torch.int64])
def test_out(isa, dtype, kind):
    base = sortdata.make(dtype, (30, 200), "ties_special")
    x_factory = (lambda: base.clone()) if kind.startswith("alias") else (lambda: base)
    for stable in (OMIT, None, True):
        for dim in (0, -1):
            for desc in (False, True):
                served = kind in SERVED_OUT_KINDS and expect_served(base, dim, stable)
                check(lambda: _run_out(x_factory, kind, stable, dim, desc), served=served,
                      context=f"[{isa}] sort(x, stable={stable}, dim={dim}, descending={desc}, out={kind})")


@pytest.mark.parametrize("dtype", INT_DTYPES + (torch.bool, torch.float32), ids=lambda d: NAMES[d])
@pytest.mark.parametrize("kind", ("exact", "empty", "noncontiguous", "offset", "alias_input"))
def test_out_1d_radix_sizes(isa, dtype, kind):
    """out= on 1-D tensors at torch's radix-sort sizes (the radix path writes values/indices directly)."""
    base = sortdata.values(dtype, 40000, "few")

    def run(stable, desc):
        x = base.clone() if kind == "alias_input" else base
        if kind == "alias_input":
            v, i = x, torch.empty_like(x, dtype=torch.long)
        elif kind == "noncontiguous":
            v, i = torch.empty(2 * x.numel(), dtype=x.dtype)[::2], torch.empty(3 * x.numel(), dtype=torch.long)[1::3]
        elif kind == "offset":
            v, i = torch.empty(x.numel() + 1, dtype=x.dtype)[1:], torch.empty(x.numel() + 1, dtype=torch.long)[1:]
        else:
            v, i = _outs(kind, x)
        r = torch.sort(x, **sort_kwargs(stable, -1, desc), out=(v, i))
        return r, v, i

    for stable in (OMIT, False, True):
        for desc in (False, True):
            if kind == "noncontiguous" and dtype in INT_DTYPES and not desc:
                # torch's own radix path writes garbage into a non-contiguous 1-D out (different on
                # every run: it reads uninitialized memory), so there is no oracle for this case:
                #   v = torch.empty(80000, dtype=torch.int32)[::2]
                #   i = torch.empty(120000, dtype=torch.long)[1::3]
                #   torch.sort(torch.randint(0, 4, (40000,), dtype=torch.int32), out=(v, i))
                continue
            served = kind in ("exact", "offset") and expect_served(base, -1, stable)
            check(lambda: run(stable, desc), served=served,
                  context=f"[{isa}] 1-D sort(stable={stable}, descending={desc}, out={kind})")


# -- torch's radix boundary ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", INT_DTYPES + (torch.bool, torch.float16), ids=lambda d: NAMES[d])
@pytest.mark.parametrize("case", ("1d_32767", "1d_32768", "1d_sliced_32768", "2d_row_32768", "2d_col_32768",
                                  "1d_transposed_view_40000"))
def test_radix_boundary(isa, dtype, case):
    """torch sorts 1-D integer tensors of >= 32768 elements ascending with a stable radix sort, whatever
    stable= says; 2-D ones, descending ones, bool and floats use the introsort."""
    if case == "1d_32767":
        x = sortdata.values(dtype, 32767, "few")
    elif case == "1d_32768":
        x = sortdata.values(dtype, 32768, "few")
    elif case == "1d_sliced_32768":
        x = sortdata.values(dtype, 2 * 32768, "few")[1::2]
    elif case == "2d_row_32768":
        x = sortdata.values(dtype, 32768, "few").reshape(1, 32768)
    elif case == "2d_col_32768":
        x = sortdata.values(dtype, 32768, "few").reshape(32768, 1)
    else:  # a 1-D view taken out of a transposed matrix: stride != 1
        x = sortdata.values(dtype, 40000 * 2, "few").reshape(2, 40000).t()[:, 1]
    dim = 0 if case == "2d_col_32768" else -1
    check_sort_variants(x, dim, stables=(OMIT, False, True), context=f"[{isa} {case}]")


# -- the introsort's heapsort fallback --------------------------------------------------------------------

def _adversarial(dtype, descending, seed):
    n = 200 if dtype.itemsize == 1 or dtype == torch.bfloat16 else 2000
    ranks, heap_len = introsort.adversary(n, tie_classes=3, seed=seed)
    assert heap_len >= n // 2, "generator self-check: the depth limit was not reached on a long range"
    r = np.array(ranks, dtype=np.int64)
    base = max(r) - 2  # the tie classes of the elements the heapsort orders: base, base+1, base+2
    if descending:  # same comparison outcomes for a descending sort
        r = (255 - r) if dtype == torch.uint8 else -r
    elif dtype == torch.int8:
        r = r - 100
    x = torch.from_numpy(r).to(dtype)
    if dtype.is_floating_point and not descending:
        # Two of the tie classes become NaNs (equal keys, different bits): their order shows in values.
        nans = sortdata.nan_patterns(dtype)
        bits = sortdata.to_bits(x).copy()
        bits[r == base + 1] = nans[0]
        bits[r == base + 2] = np.array([nans[1], nans[5], nans[3]], dtype=np.uint64)[
            np.arange(int((r == base + 2).sum())) % 3].astype(bits.dtype)
        x = sortdata.from_bits(bits, dtype)
    return x


@pytest.mark.parametrize("dtype", tuple(d for d in DTYPES if d != torch.bool), ids=lambda d: NAMES[d])
@pytest.mark.parametrize("descending", (False, True), ids=("asc", "desc"))
@pytest.mark.parametrize("layout", ("1d", "strided_rows"))
def test_introsort_heapsort_fallback(isa, dtype, descending, layout):
    """Inputs that drive libstdc++'s introsort into its depth limit, so its heapsort orders a long
    range full of equal keys: torch's stable=False tie order there is the heapsort's."""
    if layout == "1d":
        x = _adversarial(dtype, descending, seed=1)
    else:
        rows = [_adversarial(dtype, descending, seed=s) for s in (2, 3, 4)]
        x = torch.stack(rows, 1)  # (n, 3): sort dim 0, stride 3
    dim = 0
    for stable in (OMIT, False, None):
        kw = sort_kwargs(stable, dim, descending)
        # These inputs (>= 200 elements) are well above Kwker's small-input threshold: the point is
        # to run Kwker's own introsort model, so a fallback would make the test vacuous.
        served = stable is not None
        check(lambda: torch.sort(x, **kw), served=served, context=f"[{isa}] adversarial {kw}")


# -- 64-bit keys whose range in a row fits (or just misses) 32 bits ---------------------------------------

I64 = torch.iinfo(torch.int64)
SPANS = (1000, (1 << 32) - 2, (1 << 32) - 1, 1 << 32, (1 << 32) + 1)


def _span_row(rng, lo: int, span: int, n: int) -> np.ndarray:
    """n int64s in [lo, lo + span] including both ends, with ties."""
    offsets = rng.integers(0, span, n, dtype=np.uint64, endpoint=True)
    offsets[:2] = (0, span)
    offsets = rng.choice(offsets[: max(2, n // 4)], n)  # ~4 copies of each: ties
    offsets[rng.integers(0, n)] = 0
    offsets[rng.integers(0, n)] = span
    return (np.array(lo, dtype=np.int64).astype(np.uint64) + offsets).astype(np.int64)


@pytest.mark.parametrize("where", ("min", "neg", "zero", "pos", "max"))
def test_int64_key_span(isa, where):
    """Rows whose key range is just below, at and just above 2^32 (where 64-bit keys stop fitting a
    rebased 32-bit key), near both ends of the int64 range."""
    rng = np.random.default_rng(seed_of_test(where))
    rows = []
    for span in SPANS:
        lo = {"min": I64.min, "neg": -(1 << 33), "zero": -(span // 2), "pos": 1 << 61,
              "max": I64.max - span}[where]
        rows.append(_span_row(rng, lo, span, 3000))
    x = torch.from_numpy(np.stack(rows))  # (5, 3000): one span per row
    check_sort_variants(x, -1, stables=(False, True), context=f"[{isa} int64 span {where}]")
    for r in range(x.shape[0]):
        check_sort_variants(x[r].clone().repeat(2), -1, stables=(False, True),
                            context=f"[{isa} int64 1-D span {SPANS[r]} at {where}]")


@pytest.mark.parametrize("where", ("one", "minus_one", "huge", "around_zero", "subnormal", "with_nan"))
def test_float64_key_span(isa, where):
    """float64 rows whose bit patterns span just below / at / above 2^32 ulps."""
    rng = np.random.default_rng(seed_of_test(where))
    one = 0x3FF0000000000000
    rows = []
    for span in SPANS:
        if where == "one":
            bits = _span_row(rng, one, span, 3000).view(np.uint64)
        elif where == "minus_one":
            bits = _span_row(rng, one, span, 3000).view(np.uint64) | np.uint64(1 << 63)
        elif where == "huge":
            bits = _span_row(rng, 0x7FEFFFFFFFFFFFFF - span, span, 3000).view(np.uint64)
        elif where == "subnormal":
            bits = _span_row(rng, 0, span, 3000).view(np.uint64)
        elif where == "around_zero":  # -k ulps .. +k ulps: keys span about 2k, +0.0 and -0.0 tie
            half = _span_row(rng, 0, span // 2, 3000).view(np.uint64)
            neg = rng.random(3000) < 0.5
            bits = half | (neg.astype(np.uint64) << np.uint64(63))
        else:  # NaNs in the row: the key range is no longer small
            bits = _span_row(rng, one, span, 3000).view(np.uint64)
            bits[rng.integers(0, 3000, 40)] = np.array(sortdata.nan_patterns(torch.float64), dtype=np.uint64)[
                rng.integers(0, 8, 40)]
        rows.append(sortdata.from_bits(bits, torch.float64))
    x = torch.stack(rows)
    check_sort_variants(x, -1, stables=(False, True), context=f"[{isa} float64 span {where}]")
    check_sort_variants(x.t(), 0, stables=(False, True), context=f"[{isa} float64 span {where} transposed]")


@pytest.mark.parametrize("dtype", (torch.int64, torch.int32, torch.float32, torch.bfloat16, torch.float64),
                         ids=lambda d: NAMES[d])
@pytest.mark.parametrize("n", (4097, 40000, 300000))
@pytest.mark.parametrize("equal_pairs", (1, 3, 9, 80))
def test_monotonic_rows_with_few_ties(isa, dtype, n, equal_pairs):
    """Rows in order or in reverse order with a few equal neighbours: Kwker replays the introsort
    from the row itself when they are few (<= n / 4096), and declines the row when they are more.
    int64 rows span more than 2^32 (wide elements) as well as less."""
    rng = np.random.default_rng(seed_of_test("monotonic", NAMES[dtype], n, equal_pairs))
    if dtype == torch.bfloat16:
        n = min(n, 16383)  # longer bf16 rows are assumed to hold many ties
        row = sortdata.from_bits(np.arange(0x3F80, 0x3F80 + n), dtype)  # 1.0 up to the largest finite
    else:
        step = 1 << 20 if dtype == torch.int64 else 3  # int64: a span of about 2^38
        row = torch.from_numpy(np.cumsum(rng.integers(1, step, n))).to(dtype)
    tied = torch.from_numpy(rng.choice(n - 1, size=min(equal_pairs, n - 1), replace=False) + 1)
    row[tied] = row[tied - 1]
    for x in (row, row.flip(0)):
        assert torch.equal(torch.sort(x).values, torch.sort(x, stable=True).values)
        check_sort_variants(x, -1, stables=(OMIT, False), context=f"[{isa} monotonic {NAMES[dtype]} n={n} "
                                                                f"ties={equal_pairs}]")


def seed_of_test(*parts) -> int:
    return sortdata.seed_of("test", *parts)


# -- large inputs -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (torch.float32, torch.int64), ids=lambda d: NAMES[d])
def test_large_4m(isa, dtype):
    n = (1 << 22) + 3
    rng = np.random.default_rng(7)
    if dtype == torch.float32:
        vals = np.round(rng.standard_normal(n) * 50).astype(np.float32)  # ~600 distinct: many ties
        x = torch.from_numpy(vals)
        x = sortdata._mix_bits(rng, dtype, x, sortdata.nan_patterns(dtype) + [0x80000000], 0.01)
        variants = [(False, False), (True, True), (False, True)]
    else:
        x = torch.from_numpy(rng.integers(-1000, 1000, n, dtype=np.int64))
        x[::1001] = torch.iinfo(torch.int64).min
        x[5::997] = torch.iinfo(torch.int64).max
        variants = [(False, False), (True, False), (False, True)]
    for stable, desc in variants:
        check(lambda: torch.sort(x, stable=stable, descending=desc), served=True,
              context=f"[{isa}] {n} {NAMES[dtype]} stable={stable} descending={desc}")


@pytest.mark.parametrize("dtype", (torch.int32, torch.float32, torch.bfloat16), ids=lambda d: NAMES[d])
def test_many_rows_threads(dtype):
    """Rows spread over threads: results must not depend on the thread count (1 vs default)."""
    import kwker.torch_ops as kto

    x = sortdata.make(dtype, (48, 6000), "ties_special")
    threads = torch.get_num_threads()
    for dim in (0, -1):
        for stable in (False, True):
            both = check(lambda: torch.sort(x, stable=stable, dim=dim), served=True,
                         context=f"threads={threads} dim={dim} stable={stable}")
            torch.set_num_threads(1)
            try:
                with kto.accelerated():
                    single = torch.sort(x, stable=stable, dim=dim)
            finally:
                torch.set_num_threads(threads)
            assert_bit_identical(both.torch, single,
                                 context=f"kwker with 1 thread vs torch with {threads}, dim={dim} stable={stable}")


# -- other dtypes and torch's error paths --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (torch.uint16, torch.uint32, torch.uint64), ids=str)
def test_uncovered_dtypes_fall_back(dtype):
    x = torch.from_numpy(np.random.default_rng(3).integers(0, 50, 5000)).to(dtype)
    for stable in (False, True):
        both = check(lambda: torch.sort(x, stable=stable), served=False, context=f"{dtype}")
        assert both.served == 0
        assert both.delta["sort"]["torch"] >= 1 and "dtype" in both.delta["sort"]["fallback_reasons"], both.delta


@pytest.mark.parametrize("dtype", (torch.complex64, torch.complex128), ids=str)
def test_complex_raises_like_torch(dtype):
    x = torch.randn(5000, dtype=dtype)
    both = check(lambda: torch.sort(x, stable=True), served=False, context="complex sort")
    assert "Raised" in repr(both.torch), both.torch
    check(lambda: torch.argsort(x), served=False, context="complex argsort")


@pytest.mark.parametrize("dim", (2, -3, 100))
def test_bad_dim_raises_like_torch(dim):
    x = sortdata.values(torch.float32, 5000, "random").reshape(50, 100)
    for stable in STABLES:
        both = check(lambda: torch.sort(x, **sort_kwargs(stable, dim)), served=False, context=f"dim={dim}")
        assert both.torch.type is IndexError and "Dimension out of range" in both.torch.message
    check(lambda: torch.argsort(x, dim=dim), served=False, context="argsort bad dim")


def test_requires_grad_input_same_values():
    x = sortdata.values(torch.float32, 5000, "ties_special").reshape(50, 100).requires_grad_()
    both = check(lambda: torch.sort(x, stable=False, dim=0), served=True, context="requires_grad")
    assert both.kwker[0].requires_grad and both.kwker[0].grad_fn is not None


def test_inference_mode():
    x = sortdata.values(torch.float16, 5000, "ties_special")

    def fn():
        with torch.inference_mode():
            return torch.sort(x, stable=False, descending=True)

    check(fn, served=True, context="inference_mode")


def test_flush_denormal():
    """With denormals flushed (DAZ), torch's float comparisons treat subnormals as zeros, which changes
    its tie order: Kwker must give torch's answer in this mode too (or leave the call to torch)."""
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            x = sortdata.values(dtype, 1000, "denormal", seed=1)  # one row: sorted on this thread
            for stable in (False, True):
                check(lambda: torch.sort(x, stable=stable), served=False,
                      context=f"flush_denormal {NAMES[dtype]} stable={stable}")
    finally:
        torch.set_flush_denormal(False)


# -- torch ops that sort internally ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int64, torch.bool), ids=lambda d: NAMES[d])
def test_indirect_users(isa, dtype):
    """torch.unique sorts through the dispatcher (so through Kwker); which of several equal-comparing
    bit patterns (+0.0/-0.0, NaN payloads) it keeps depends on the sort's tie order."""
    x = sortdata.make(dtype, (40, 500), "ties_special")
    both = check(lambda: torch.unique(x, sorted=True, return_inverse=True, return_counts=True), served=False,
                 context=f"[{isa}] unique")
    if dtype != torch.bool:  # torch.unique counts bools without sorting
        assert both.served >= 1, both.delta
    check(lambda: torch.unique(x, sorted=True, return_inverse=True, dim=None), served=False, context="unique")
    if dtype.is_floating_point:
        q = torch.tensor([0.0, 0.1, 0.5, 0.99], dtype=torch.float32 if dtype == torch.float16 else dtype)
        xf = x.float() if dtype == torch.float16 else x
        check(lambda: torch.quantile(xf, q, dim=1), served=False, context="quantile")
        check(lambda: torch.nanquantile(xf, 0.3, dim=0, interpolation="nearest"), served=False,
              context="nanquantile")


# -- property-based ------------------------------------------------------------------------------------------

SORTED_LENGTHS = (0, 1, 2, 3, 15, 16, 17, 18, 31, 32, 33, 63, 64, 65, 100, 127, 128, 255, 256, 257, 1000,
                  4095, 4096, 4097, 6000)


def _draw_tensor(data, dtype):
    ndim = data.draw(st.sampled_from((0, 1, 1, 2, 2, 3, 3, 4)), label="ndim")
    if ndim == 0:
        x = sortdata.values(dtype, 1, data.draw(st.sampled_from(sortdata.applicable(dtype))), 0).reshape(())
        return x, data.draw(st.sampled_from((0, -1)), label="dim"), "0-dim"
    dim = data.draw(st.integers(-ndim, ndim - 1), label="dim")
    d = dim % ndim
    shape = [data.draw(st.sampled_from((1, 1, 2, 3, 4, 5, 7, 8)), label=f"size{i}") for i in range(ndim)]
    shape[d] = data.draw(st.sampled_from(SORTED_LENGTHS), label="sorted length")
    while math.prod(shape) > 24000:
        i = max((j for j in range(ndim) if j != d), key=lambda j: shape[j], default=d)
        shape[i] = max(1, shape[i] // 2)
        if i == d:
            break
    dist = data.draw(st.sampled_from(sortdata.applicable(dtype)), label="dist")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    layout = data.draw(st.sampled_from(("contiguous", "permuted", "sliced", "expanded", "channels_last")),
                       label="layout")
    if layout == "channels_last" and ndim != 4:
        layout = "contiguous"
    if layout == "contiguous":
        x = sortdata.values(dtype, math.prod(shape), dist, seed).reshape(shape)
    elif layout == "channels_last":
        x = sortdata.values(dtype, math.prod(shape), dist, seed).reshape(shape)
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "permuted":
        perm = data.draw(st.permutations(range(ndim)), label="perm")
        inv = [perm.index(i) for i in range(ndim)]
        base = sortdata.values(dtype, math.prod(shape), dist, seed).reshape([shape[p] for p in perm])
        x = base.permute(*inv)
    elif layout == "sliced":
        steps = [data.draw(st.integers(1, 3), label=f"step{i}") for i in range(ndim)]
        starts = [data.draw(st.integers(0, 2), label=f"start{i}") for i in range(ndim)]
        big = [starts[i] + steps[i] * shape[i] for i in range(ndim)]
        base = sortdata.values(dtype, math.prod(big), dist, seed).reshape(big)
        x = base[tuple(slice(starts[i], starts[i] + steps[i] * shape[i], steps[i]) for i in range(ndim))]
    else:  # expanded: some size-1 dims broadcast
        mask = [data.draw(st.booleans(), label=f"expand{i}") for i in range(ndim)]
        small = [1 if mask[i] else shape[i] for i in range(ndim)]
        x = sortdata.values(dtype, math.prod(small), dist, seed).reshape(small).expand(shape)
    return x, dim, f"{layout} {dist} seed={seed}"


@settings(max_examples=800, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_property(isa, data):
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    x, dim, what = _draw_tensor(data, dtype)
    op = data.draw(st.sampled_from(list(OPS)), label="op")
    stable = data.draw(st.sampled_from((OMIT, False, True) if op in ARGSORT_OPS else STABLES), label="stable")
    desc = data.draw(st.booleans(), label="descending")
    served = expect_served(x, op_dim(op, dim), op_stable(op, stable))
    if op == "torch.sort_out" and not is_non_overlapping_and_dense(x):
        served = False  # Kwker cannot rule out overlap of out= with a non-dense input: torch's kernel
    both = check(lambda: OPS[op](x, stable, dim, desc), served=served,
                 context=f"[{isa}] {op}({NAMES[dtype]}{tuple(x.shape)} strides={x.stride()} {what}, "
                         f"stable={stable}, dim={dim}, descending={desc})")
    event("served by kwker" if both.served else "torch's kernel")
