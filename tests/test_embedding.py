"""Differential tests of Kwker's embedding backward (family "embedding": aten::embedding_dense_backward,
what nn.Embedding / F.embedding's backward runs with sparse=False) against torch's own CPU kernel:
grad_weight bit for bit (dtype, shape, strides), identical errors and warnings.

torch adds the gradient rows of equal indices one at a time in index order (alpha = 1 / count under
scale_grad_by_freq), so float sums are exact only in torch's order: the inputs are heavily duplicated
random floats of wide magnitude, with signed zeros, infinities and subnormals. Kwker leaves results
with a NaN to torch (nan_result) and, under scale_grad_by_freq, machines whose torch kernels are not
the FMA build (torch_capability) and 16-bit rows torch splits over threads (too_long): calls the tests
expect served may fall back for exactly those reasons, never others. Every case runs on every ISA.
"""

from __future__ import annotations

import functools
import os
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exactness
from exactness import Raised, assert_bit_identical, assert_reaches_kwker, assert_same, num_threads, run_both

pytestmark = pytest.mark.usefixtures("native")

FAMILY = "embedding"
GRAD_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INDEX_DTYPES = (torch.int64, torch.int32)
NAMES = {d: str(d).removeprefix("torch.") for d in GRAD_DTYPES + INDEX_DTYPES}
MIN_ELEMENTS = 64  # Kwker serves gradients of at least this many elements
MAX_SCALED_ROW_16 = 32768  # 16-bit rows this long under scale_grad_by_freq: torch's (too_long)
grad_dtype_params = pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=[NAMES[d] for d in GRAD_DTYPES])
index_dtype_params = pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=[NAMES[d] for d in INDEX_DTYPES])
E = torch.ops.aten.embedding_dense_backward


# --- inputs -------------------------------------------------------------------------------------------

def gradients(shape, dtype, kind="random", seed=0) -> torch.Tensor:
    """Gradients: "random" normals of magnitudes 1e-3..1e3 (sums depend on their order), "ties" small
    integers, "specials" random with a sixth of them ±0, ±inf, subnormal or huge, "nan" with NaNs too,
    "zeros" only +0.0 and -0.0."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    if kind == "ties":
        x = torch.randint(-3, 4, (n,), generator=g).double()
    elif kind == "zeros":
        x = torch.where(torch.rand(n, generator=g) < 0.5, 0.0, -0.0).double()
    else:
        x = torch.randn(n, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-3, 4, (n,), generator=g)
        if kind in ("specials", "nan"):
            tiny = torch.finfo(dtype).tiny
            pool = [0.0, -0.0, float("inf"), -float("inf"), tiny / 4, -tiny / 8, torch.finfo(dtype).max]
            if kind == "nan":
                pool.append(float("nan"))
            where = torch.randperm(n, generator=g)[: n // 6 + 1] if n else torch.zeros(0, dtype=torch.long)
            x[where] = torch.tensor(pool, dtype=torch.float64)[torch.randint(0, len(pool), (where.numel(),),
                                                                             generator=g)]
    return x.to(dtype).reshape(shape)


def index_tensor(shape, num_weights, dtype=torch.int64, kind="dups", seed=1) -> torch.Tensor:
    """Indices in [0, num_weights): "dups" uniform, "skewed" most on a few rows, "sorted", "same" one row."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    high = max(num_weights, 1)
    if kind == "skewed":
        x = (torch.randn(n, generator=g).abs() * max(1, high // 8)).long().clamp(max=high - 1)
    elif kind == "same":
        x = torch.full((n,), high // 2, dtype=torch.long)
    else:
        x = torch.randint(0, high, (n,), generator=g)
        if kind == "sorted":
            x = x.sort().values
    return x.to(dtype).reshape(shape)


# --- checks -------------------------------------------------------------------------------------------

family_delta = functools.partial(exactness.family_delta, family=FAMILY)
assert_served = functools.partial(exactness.assert_served, family=FAMILY)
assert_torchs = functools.partial(exactness.assert_torchs, family=FAMILY)


def allowed_fallbacks(result, grad, scale_grad_by_freq) -> tuple:
    """Why a call Kwker covers may still go to torch: a NaN result, and under scale_grad_by_freq torch's
    kernels not being the FMA build, or a 16-bit row torch splits over threads."""
    allowed = []
    if isinstance(result, torch.Tensor) and result.is_floating_point() and bool(torch.isnan(result).any()):
        allowed.append("nan_result")
    if scale_grad_by_freq:
        allowed.append("torch_capability")
        if grad.element_size() == 2 and grad.dim() and grad.size(-1) >= MAX_SCALED_ROW_16:
            allowed.append("too_long")
    return tuple(allowed)


def check_backward(grad, indices, num_weights, padding_idx=-1, scale_grad_by_freq=False, *, what="",
                   served=None):
    """aten::embedding_dense_backward with Kwker off and on: the same bits. served=None: expected served
    when Kwker covers the call (a float gradient of MIN_ELEMENTS or more)."""
    both = run_both(lambda: E(grad, indices, num_weights, padding_idx, scale_grad_by_freq))
    what = (f"{what} grad {NAMES.get(grad.dtype, grad.dtype)}{list(grad.shape)} indices "
            f"{NAMES.get(indices.dtype, indices.dtype)}{list(indices.shape)} num_weights={num_weights} "
            f"padding_idx={padding_idx} scale={scale_grad_by_freq}")
    assert_same(both, context=what)
    if served is None:
        served = grad.numel() >= MIN_ELEMENTS and not isinstance(both.torch, Raised)
    if served:
        assert_served(both, what, allowed_fallbacks(both.torch, grad, scale_grad_by_freq))
    elif served is False:
        assert_torchs(both, what)
    return both


# --- tests --------------------------------------------------------------------------------------------

@grad_dtype_params
@index_dtype_params
def test_dtypes_sizes_padding_and_scaling(isa, dtype, index_dtype):
    for n, dim, num_weights in ((64, 1, 3), (16, 4, 5), (17, 4, 2), (300, 16, 7), (200, 33, 40), (50, 64, 1),
                                (40, 65, 13), (2000, 8, 3000), (3000, 3, 10)):
        for kind in ("random", "skewed" if n % 2 else "sorted"):
            indices = index_tensor((n,), num_weights, index_dtype, kind, seed=n + dim)
            grad = gradients((n, dim), dtype, "random", seed=n * dim)
            for padding_idx in (-1, int(indices[0]) if n else 0):
                for scale in (False, True):
                    check_backward(grad, indices, num_weights, padding_idx, scale, what=kind)


@grad_dtype_params
@pytest.mark.parametrize("kind", ("ties", "specials", "nan", "zeros"))
def test_special_values(isa, dtype, kind):
    for n, dim, num_weights in ((400, 8, 5), (96, 31, 3), (64, 67, 2)):
        grad = gradients((n, dim), dtype, kind, seed=dim)
        indices = index_tensor((n,), num_weights, torch.int64, "dups", seed=dim)
        for scale in (False, True):
            check_backward(grad, indices, num_weights, -1, scale, what=kind)
            check_backward(grad, indices, num_weights, 1, scale, what=kind)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=("bfloat16", "float16"))
def test_16_bit_rows_around_torchs_vector_steps(isa, dtype):
    # torch's add_ runs a vector body of 32 (AVX2) or 64 (AVX-512) 16-bit elements and a scalar tail.
    for dim in (15, 16, 17, 31, 32, 33, 63, 64, 65, 96, 127, 128, 129, 200):
        n = max(8, 512 // dim)
        grad = gradients((n, dim), dtype, "random", seed=dim)
        indices = index_tensor((n,), 3, torch.int64, "dups", seed=dim)
        for scale in (False, True):
            check_backward(grad, indices, 3, -1, scale, what="vector step")


@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=[NAMES[d] for d in GRAD_DTYPES])
def test_long_rows(isa, dtype):
    grad = gradients((5, MAX_SCALED_ROW_16 + 3), dtype, "random", seed=5)
    indices = torch.tensor([2, 0, 2, 2, 1])
    for scale in (False, True):
        check_backward(grad, indices, 3, -1, scale, what="long rows")
    grad = gradients((3, MAX_SCALED_ROW_16), dtype, "random", seed=3)
    check_backward(grad, torch.tensor([1, 1, 0]), 2, -1, True, what="row at the threshold")


def test_index_shapes_and_grad_strides(isa):
    grad = gradients((6, 20, 16), torch.float32, "random", seed=6)
    idx = index_tensor((6, 20), 9, torch.int64, "dups", seed=6)
    check_backward(grad, idx, 9, what="3-d grad, 2-d indices")
    check_backward(grad.reshape(120, 16), idx.reshape(-1), 9, 2, True, what="flat")
    check_backward(grad.transpose(0, 1).contiguous().transpose(0, 1), idx, 9, what="non-contiguous grad")
    check_backward(grad.transpose(0, 1), idx.t(), 9, what="transposed grad and indices")
    check_backward(gradients((120, 32), torch.float32, seed=7)[:, ::2], idx.reshape(-1), 9, what="sliced grad rows")
    check_backward(gradients((240, 16), torch.float64, seed=8)[::2], idx.reshape(-1), 9, 3, True,
                   what="every other grad row")
    check_backward(grad, torch.stack([idx, idx])[1], 9, what="indices at an offset")
    check_backward(grad, idx.repeat(1, 2)[:, ::2], 9, what="strided indices")
    check_backward(grad[:, :1].expand(6, 20, 16), idx, 9, what="expanded grad")
    check_backward(gradients((70,), torch.float32, seed=9), torch.tensor(4), 9, what="0-dim index")
    check_backward(gradients((70,), torch.float32, seed=9), torch.tensor(4), 9, 4, True, what="0-dim padded")
    check_backward(torch.zeros(0, 16), torch.zeros(0, dtype=torch.long), 9, what="no indices")
    check_backward(torch.zeros(0, 16), torch.zeros(0, dtype=torch.long), 0, what="no weights")
    check_backward(gradients((100, 0), torch.float32), index_tensor((100,), 9), 9, what="zero-width rows")
    check_backward(gradients((100, 5), torch.float32), index_tensor((100,), 1), 1, 0, True, what="all padding")
    check_backward(gradients((100, 5), torch.float32), index_tensor((100,), 9, kind="same"), 9, -1, True,
                   what="one row")


@index_dtype_params
def test_out_of_range_indices_are_skipped_like_torch(isa, index_dtype):
    # With scale_grad_by_freq torch writes its counts out of bounds for such indices (not tested).
    grad = gradients((200, 12), torch.float32, "random", seed=2)
    idx = index_tensor((200,), 10, torch.int64, "dups", seed=2)
    idx[::7] = 10
    idx[3::11] = -1
    idx[5::13] = 1 << 30
    idx[6::17] = -(1 << 30)
    check_backward(grad, idx.to(index_dtype), 10, -1, False, what="out of range")
    check_backward(grad, idx.to(index_dtype), 10, 3, False, what="out of range, padded")
    check_backward(grad, idx.to(index_dtype), 10, -1 << 30, False, what="negative padding_idx")
    check_backward(grad, idx.to(index_dtype), 10, 10, False, what="padding_idx == num_weights")
    check_backward(grad, idx.to(index_dtype), 0, -1, False, what="no weights")


def test_bad_arguments_raise_torchs_errors(isa):
    grad = gradients((60, 4), torch.float32, seed=1)
    idx = index_tensor((60,), 10, seed=1)
    calls = {
        "float indices": lambda: E(grad, idx.float(), 10, -1, False),
        "bool indices": lambda: E(grad, idx > 3, 10, -1, False),
        "int16 indices": lambda: E(grad, idx.short(), 10, -1, False),
        "too few indices": lambda: E(grad, idx[:59], 10, -1, False),
        "too many indices": lambda: E(grad, torch.cat([idx, idx]), 10, -1, False),
        "negative num_weights": lambda: E(grad, idx, -1, -1, False),
        "negative num_weights scaled": lambda: E(grad, idx, -5, -1, True),
        "0-dim grad": lambda: E(torch.tensor(1.0), torch.tensor(1), 10, -1, False),
        "F.embedding padding_idx": lambda: F.embedding(idx, torch.randn(10, 4), padding_idx=11),
        "F.embedding padding_idx negative": lambda: F.embedding(idx, torch.randn(10, 4), padding_idx=-11),
        "F.embedding float input": lambda: F.embedding(idx.float(), torch.randn(10, 4, requires_grad=True)),
    }
    for what, call in calls.items():
        both = run_both(call)
        assert_same(both, context=what)
        assert isinstance(both.torch, Raised), f"{what}: torch did not raise ({both.torch!r})"
        assert_torchs(both, what)


def test_other_dtypes_stay_torchs(isa):
    idx = index_tensor((100,), 10, seed=1)
    for dtype in (torch.complex64, torch.int32, torch.int64):
        grad = gradients((100, 4), torch.float64).to(dtype)
        both = run_both(lambda: E(grad, idx, 10, -1, False))
        assert_same(both, context=str(dtype))
        assert_torchs(both, str(dtype))
    check_backward(gradients((10, 4), torch.float32), index_tensor((10,), 3), 3, served=False, what="small")


def _embedding_training(weight0, idx, target, *, dtype, padding_idx, scale, max_norm, steps=2):
    """An nn.Embedding of weight0 trained for `steps` SGD steps on a loss of its output."""
    emb = torch.nn.Embedding(weight0.size(0), weight0.size(1), padding_idx=padding_idx, max_norm=max_norm,
                             scale_grad_by_freq=scale, dtype=dtype)
    with torch.no_grad():
        emb.weight.copy_(weight0)
    opt = torch.optim.SGD(emb.parameters(), lr=0.1, momentum=0.9)
    grads = []
    for _ in range(steps):
        opt.zero_grad()
        out = emb(idx)
        loss = ((out * target).sum(-1) ** 2).mean() + out.float().pow(2).sum() * 1e-3
        loss.backward()
        grads.append(emb.weight.grad.clone())
        opt.step()
    return emb.weight.detach().clone(), grads


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16),
                         ids=("float32", "float64", "bfloat16"))
def test_nn_embedding_training_step(isa, dtype):
    num_weights, dim = 50, 24
    weight0 = gradients((num_weights, dim), dtype, "random", seed=11).clamp(-3, 3)
    idx = index_tensor((8, 30), num_weights, torch.int64, "skewed", seed=12)
    target = gradients((8, 30, dim), dtype, "random", seed=13).clamp(-2, 2)
    for padding_idx, scale, max_norm in ((None, False, None), (0, True, None), (3, False, 2.0),
                                         (None, True, 1.5)):
        what = f"{NAMES[dtype]} padding_idx={padding_idx} scale={scale} max_norm={max_norm}"
        both = run_both(lambda: _embedding_training(weight0, idx, target, dtype=dtype, padding_idx=padding_idx,
                                                    scale=scale, max_norm=max_norm))
        assert_same(both, context=what)
        assert_served(both, what, ("torch_capability", "nan_result") if scale else ("nan_result",))


def test_functional_embedding_backward_int32_indices(isa):
    weight0 = gradients((40, 16), torch.float32, seed=3)
    idx = index_tensor((500,), 40, torch.int32, "skewed", seed=3)
    grad_out = gradients((500, 16), torch.float32, seed=4)

    def call():
        w = weight0.clone().requires_grad_()
        F.embedding(idx, w, padding_idx=5).backward(grad_out)
        return w.grad

    both = run_both(call)
    assert_same(both)
    assert_served(both, "F.embedding int32")


def test_sparse_gradients_stay_torchs(isa):
    weight0 = gradients((40, 16), torch.float32, seed=3)
    idx = index_tensor((500,), 40, torch.int64, "dups", seed=3)

    def call():
        w = weight0.clone().requires_grad_()
        F.embedding(idx, w, sparse=True).sum().backward()
        g = w.grad.coalesce()
        return g._indices(), g._values()

    both = run_both(call)
    assert_same(both)
    assert_torchs(both, "sparse=True")


def test_threads_give_the_same_answer():
    # torch splits grad_weight's rows over threads in blocks of 1000: several blocks here.
    cases = [(gradients((100_000, 16), torch.float32, seed=1), index_tensor((100_000,), 5000, seed=2, kind="skewed")),
             (gradients((40_000, 40), torch.bfloat16, seed=3), index_tensor((40_000,), 3000, torch.int32, seed=4)),
             (gradients((30_000, 8), torch.float64, seed=5), index_tensor((30_000,), 2500, seed=6))]
    for grad, idx in cases:
        num_weights = int(idx.max()) + 1
        results = []
        for threads in (1, 2):
            with num_threads(threads):
                for scale in (False, True):
                    both = check_backward(grad, idx, num_weights, 7, scale, what=f"{threads} threads")
                    results.append(both.kwker)
        assert_bit_identical(results[0], results[2], context="1 vs 2 threads")
        assert_bit_identical(results[1], results[3], context="1 vs 2 threads, scaled")


# Large tables: Kwker zeroes grad_weight by handing its fresh pages back to the kernel and faulting in
# only those it will write (csrc/torch/fresh_pages.h); resident ones it zeroes as torch does.
LARGE_TABLES = [  # rows, dim, ids, dtype: which pages are written, and how (small pages, huge, all)
    (20_000, 64, 300, torch.float32),       # 5 MiB, few rows: small pages, heap memory glibc may reuse
    (70_000, 128, 40, torch.bfloat16),      # 17 MiB, a handful of rows
    (160_000, 64, 400, torch.float32),      # 39 MiB, few rows: a mapping of its own, small pages
    (160_000, 64, 60_000, torch.float32),   # most 4 KiB pages written: huge pages (where THP is on)
    (40_000, 256, 200_000, torch.float64),  # 78 MiB, every page written: zeroed as torch does
]


@pytest.mark.parametrize("rows,dim,ids,dtype", LARGE_TABLES, ids=lambda v: str(v).removeprefix("torch."))
def test_large_tables_after_freed_garbage(rows, dim, ids, dtype):
    # A freed block of the table's size full of NaN, which glibc may hand out again: its resident pages
    # must be zeroed, the rest read as zeros.
    for _ in range(2):
        junk = torch.full((rows, dim), float("nan"), dtype=dtype)
        del junk
    grad = gradients((ids, dim), dtype, seed=ids)
    idx = index_tensor((ids,), rows, kind="skewed" if ids > rows else "dups", seed=rows)
    check_backward(grad, idx, rows, padding_idx=3, what="large table")


def _hand_back_every_other_page(t: torch.Tensor) -> None:
    """madvise(MADV_DONTNEED) on every other whole page of t's memory: resident in thousands of short
    runs, as a sparse-write kernel leaves heap memory behind."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page, dontneed = os.sysconf("SC_PAGE_SIZE"), 4
    first = (t.data_ptr() + page - 1) // page * page
    for address in range(first, t.data_ptr() + t.nbytes - page, 2 * page):
        assert libc.madvise(address, page, dontneed) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise")
@pytest.mark.parametrize("rows,dim,ids,dtype", LARGE_TABLES[:3], ids=lambda v: str(v).removeprefix("torch."))
def test_large_tables_after_freed_patchy_memory(rows, dim, ids, dtype):
    # Freed memory glibc may hand out again, NaN where resident and resident in every other page:
    # Kwker zeroes it as at::zeros does rather than with a system call per run.
    for _ in range(2):
        junk = torch.full((rows, dim), float("nan"), dtype=dtype)
        _hand_back_every_other_page(junk)
        del junk
    grad = gradients((ids, dim), dtype, seed=ids)
    idx = index_tensor((ids,), rows, kind="dups", seed=rows)
    check_backward(grad, idx, rows, padding_idx=3, what="large table, patchy memory")


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_rows_no_id_names_take_no_memory():
    # The gradient of a 100 MiB table where 200 ids are looked up: its other rows stay unmapped
    # (zeros on reading); at::zeros would have made all of it resident.
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            if "[always]" in f.read():
                pytest.skip("transparent huge pages always on: a written row maps 2 MiB")
    except OSError:
        pass
    rows, dim = 400_000, 64
    grad, idx = gradients((200, dim), torch.float32, seed=9), index_tensor((200,), rows, seed=10)
    import kwker.torch_ops as kto

    before = _resident_bytes()
    with kto.accelerated():
        ours = E(grad, idx, rows, -1, False)
    grown = _resident_bytes() - before
    table = rows * dim * 4
    assert grown < table // 10, f"grad_weight made {grown} of its {table} bytes resident"
    with kto.disabled():
        expected = E(grad, idx, rows, -1, False)
    assert_bit_identical(expected, ours, context="sparse rows of a large table")


def test_scripted_backward_reaches_kwker():
    @torch.jit.script
    def scripted(g: torch.Tensor):
        idx = torch.arange(g.size(0)) % 7
        return torch.ops.aten.embedding_dense_backward(g, idx, 7, -1, False)

    assert_reaches_kwker(scripted, gradients((300, 8), torch.float32, seed=1), [FAMILY])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(GRAD_DTYPES), index_dtype=st.sampled_from(INDEX_DTYPES), n=st.integers(0, 400),
       dim=st.integers(1, 80), num_weights=st.integers(1, 60), padding=st.booleans(), scale=st.booleans(),
       kind=st.sampled_from(("random", "random", "ties", "specials", "zeros")),
       index_kind=st.sampled_from(("dups", "skewed", "sorted", "same")), batch=st.booleans(),
       seed=st.integers(0, 2**16))
def test_hypothesis(isa, dtype, index_dtype, n, dim, num_weights, padding, scale, kind, index_kind, batch, seed):
    shape = (2, n) if batch else (n,)
    indices = index_tensor(shape, num_weights, index_dtype, index_kind, seed)
    grad = gradients(shape + (dim,), dtype, kind, seed + 1)
    padding_idx = int(indices.reshape(-1)[0]) if padding and indices.numel() else -1
    check_backward(grad, indices, num_weights, padding_idx, scale, what="hypothesis")
