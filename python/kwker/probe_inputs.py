"""The probe's inputs, per kernel family: what each family is run on, against torch, before it is trusted.

PROBE_INPUTS maps each family of torch_ops.KERNELS to a function returning its ProbeInputs; a family
added to KERNELS adds its entry here (a family without one is never trusted). The inputs aim at what
could differ between Kwker and torch on some machine: ties (the order of equal keys), NaN payloads and
the sign of zero (values are compared bit for bit), strides, every dtype, and sizes on both sides of
the kernels' internal thresholds. Each input is deterministic (its own seed), so the name the verdict
records is enough to rebuild it.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class ProbeInput:
    name: str                                   # unique within its family; names the input in a verdict
    make: Callable[[], torch.Tensor]            # builds the input
    run: Callable[[torch.Tensor], object]       # the call; run once with Kwker off, once on; must build
                                                # its own out= tensors and must not modify its input


# --- sort -------------------------------------------------------------------------------------------

SORT_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
               torch.float16, torch.bfloat16, torch.float32, torch.float64)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Row lengths on both sides of the kernels' thresholds (sort_row-inl.h: introsort's insertion-sort
# threshold 16, short rows 256, ties assumed from 16384; torch's radix sort of 1-D integers from 32768).
SMALL_LENGTHS = (8, 16, 17, 64)
MEDIUM_LENGTHS = (256, 257)
LARGE_LENGTHS = (16384, 32768)
# Off-by-one lengths of the large thresholds: fewer dtypes, as each costs more than all small inputs.
LARGE_EDGE_LENGTHS = (16385, 32767)
LARGE_EDGE_DTYPES = (torch.int64, torch.float32)
VARIANTS = tuple((stable, descending) for stable in (False, True) for descending in (False, True))
MIN_ELEMENTS = 512  # rows enough that Kwker serves the call (it leaves tiny tensors to torch)

# (bits of the same-size integer type, exponent bits, mantissa bits) of each float type.
_FLOAT_LAYOUT = {torch.float16: (torch.int16, 5, 10), torch.bfloat16: (torch.int16, 8, 7),
                 torch.float32: (torch.int32, 8, 23), torch.float64: (torch.int64, 11, 52)}


def _short(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _generator(name: str) -> torch.Generator:
    # Seeded by the input's name (not hash(), which is salted per process).
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def _ties(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Few distinct values, each many times: the order of equal keys shows."""
    high = 2 if dtype == torch.bool else 8
    return torch.randint(0, high, (n,), generator=gen).to(dtype)


def _random(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Values over the dtype's whole range (floats: normal), few or no ties."""
    if dtype.is_floating_point:
        return torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=gen).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=gen, dtype=torch.int64).to(dtype)


def _special_bits(dtype: torch.dtype) -> list[int]:
    """Bit patterns of NaNs with payloads (quiet, signalling, negative), ±inf, ±0, the smallest
    subnormal and the largest finite value, as signed integers of the float's size."""
    _, exponent_bits, mantissa_bits = _FLOAT_LAYOUT[dtype]
    total = 1 + exponent_bits + mantissa_bits
    sign, exponent = 1 << (total - 1), ((1 << exponent_bits) - 1) << mantissa_bits
    quiet = 1 << (mantissa_bits - 1)
    patterns = [exponent | quiet, exponent | quiet | 1, exponent | 1, sign | exponent | quiet,
                sign | exponent | quiet | 3, (1 << total) - 1, exponent, sign | exponent, 0, sign, 1,
                sign | 1, exponent - 1]
    return [p - (1 << total) if p & sign else p for p in patterns]  # as two's-complement integers


def _specials(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Normal values with a quarter of the elements special (NaN payloads, ±0, ±inf, subnormals)."""
    int_type = _FLOAT_LAYOUT[dtype][0]
    x = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)
    bits = torch.tensor(_special_bits(dtype), dtype=torch.int64).to(int_type)
    where = torch.randperm(n, generator=gen)[: max(1, n // 4)]
    x.view(int_type)[where] = bits[torch.randint(0, bits.numel(), (where.numel(),), generator=gen)]
    return x


_SORT_DATA = {"ties": _ties, "random": _random, "specials": _specials}


def _rows(length: int) -> int:
    return max(1, math.ceil(MIN_ELEMENTS / length)) if length < LARGE_LENGTHS[0] else 1


def _sort_input(name: str, data: str, dtype: torch.dtype, length: int, layout: str) -> Callable:
    """Builds the tensor whose last dim is sorted: rows of a row-major block ("contiguous"), columns of
    one (the sorted dim strided: "transposed"), or every other element of wider rows ("sliced")."""
    rows = _rows(length)

    def make() -> torch.Tensor:
        def block(height: int, width: int) -> torch.Tensor:
            return _SORT_DATA[data](height * width, dtype, _generator(name)).reshape(height, width)

        if layout == "transposed":  # a single row: the middle column of three (an offset, too)
            return block(length, rows).t() if rows > 1 else block(length, 3)[:, 1]
        sorted_rows = block(rows, 2 * length)[:, ::2] if layout == "sliced" else block(rows, length)
        return sorted_rows if rows > 1 else sorted_rows[0]

    return make


def _sort_call(stable: bool, descending: bool, out: bool) -> Callable:
    def run(x: torch.Tensor):
        if not out:
            return torch.sort(x, dim=-1, stable=stable, descending=descending)
        values, indices = torch.empty_like(x), torch.empty(x.shape, dtype=torch.long)
        return torch.sort(x, dim=-1, stable=stable, descending=descending, out=(values, indices))

    return run


def _sort_inputs_for(dtype: torch.dtype, lengths, data: str, layout: str = "contiguous",
                     out: bool = False, variants=VARIANTS) -> list[ProbeInput]:
    inputs = []
    for length in lengths:
        shape = (_rows(length), length) if _rows(length) > 1 else (length,)
        for stable, descending in variants:
            name = (f"sort {_short(dtype)} {data} {'x'.join(map(str, shape))} {layout} "
                    f"{'stable' if stable else 'unstable'} {'descending' if descending else 'ascending'}"
                    f"{' out=' if out else ''}")
            inputs.append(ProbeInput(name, _sort_input(name, data, dtype, length, layout),
                                     _sort_call(stable, descending, out)))
    return inputs


def sort_probe_inputs() -> list[ProbeInput]:
    inputs = []
    for dtype in SORT_DTYPES:
        inputs += _sort_inputs_for(dtype, SMALL_LENGTHS + MEDIUM_LENGTHS + LARGE_LENGTHS, "ties")
        inputs += _sort_inputs_for(dtype, MEDIUM_LENGTHS + LARGE_LENGTHS[-1:], "random",
                                   variants=[(False, False), (False, True)])
    for dtype in LARGE_EDGE_DTYPES:
        inputs += _sort_inputs_for(dtype, LARGE_EDGE_LENGTHS, "ties")
    for dtype in FLOAT_DTYPES:
        inputs += _sort_inputs_for(dtype, (17, 257, 16384), "specials")
    for dtype in (torch.bool, torch.int64, torch.float16, torch.float32):
        for layout in ("transposed", "sliced"):
            inputs += _sort_inputs_for(dtype, (17, 257, 16385), "ties", layout=layout)
    for dtype in (torch.int64, torch.bfloat16, torch.float32):
        inputs += _sort_inputs_for(dtype, (17, 257, 16384), "ties", out=True)
    return inputs


# --- topk -------------------------------------------------------------------------------------------

TOPK_DTYPES = SORT_DTYPES[1:]  # torch's topk rejects bool
# Row lengths (Kwker serves rows of 128 and more) and ks on both sides of torch's switch from
# partial_sort (k * 64 <= n) to nth_element, of the heap's 64-element blocks and of the threshold
# filter's 512-element minimum.
TOPK_LENGTHS = (128, 640)


def _topk_ks(length: int) -> list[int]:
    return sorted({1, 2, 3, max(1, length // 64), length // 64 + 1, length // 2, length} - {0})


def _topk_call(k: int, largest: bool, sorted_: bool, out: bool) -> Callable:
    def run(x: torch.Tensor):
        if not out:
            return torch.topk(x, k, dim=-1, largest=largest, sorted=sorted_)
        shape = (*x.shape[:-1], k)
        values, indices = torch.empty(shape, dtype=x.dtype), torch.empty(shape, dtype=torch.long)
        return torch.topk(x, k, dim=-1, largest=largest, sorted=sorted_, out=(values, indices))

    return run


def _topk_inputs_for(dtype: torch.dtype, data: str, layout: str = "contiguous", out: bool = False,
                     lengths=TOPK_LENGTHS) -> list[ProbeInput]:
    inputs = []
    for length in lengths:
        shape = (_rows(length), length) if _rows(length) > 1 else (length,)
        for k in _topk_ks(length):
            for largest in (True, False):
                for sorted_ in ((True, False) if k == length // 2 else (True,)):
                    name = (f"topk {_short(dtype)} {data} {'x'.join(map(str, shape))} {layout} k={k} "
                            f"{'largest' if largest else 'smallest'}{'' if sorted_ else ' unsorted'}"
                            f"{' out=' if out else ''}")
                    inputs.append(ProbeInput(name, _sort_input(name, data, dtype, length, layout),
                                             _topk_call(k, largest, sorted_, out)))
    return inputs


def topk_probe_inputs() -> list[ProbeInput]:
    inputs = []
    for dtype in TOPK_DTYPES:
        inputs += _topk_inputs_for(dtype, "ties")
        inputs += _topk_inputs_for(dtype, "random", lengths=(640,))
    for dtype in FLOAT_DTYPES:
        inputs += _topk_inputs_for(dtype, "specials", lengths=(640,))
    for dtype in (torch.int64, torch.float32):
        inputs += _topk_inputs_for(dtype, "ties", layout="transposed", lengths=(640,))
        inputs += _topk_inputs_for(dtype, "ties", out=True, lengths=(640,))
    return inputs


# --- optimizers ------------------------------------------------------------------------------------

# Parameter lengths around every vector width and tail (4, 8, 16 lanes), Kwker's 16384-element chunks
# and its 4096-element square-root blocks.
OPTIM_LENGTHS = (1, 7, 16, 31, 33, 100, 4097, 16385)
OPTIM_STEPS = 3  # the first step (state created) and two more


def _optim_gradients(total: int, dtype: torch.dtype, gen: torch.Generator) -> list[torch.Tensor]:
    """One gradient per step: normal values with an eighth of them zero, huge or tiny (subnormal
    squares: the square root's small-input path), scaled differently each step."""
    grads = []
    for step in range(OPTIM_STEPS):
        g = torch.randn(total, generator=gen, dtype=torch.float64) * 10.0 ** (step - 1)
        where = torch.randperm(total, generator=gen)[: max(1, total // 8)]
        specials = torch.tensor([0.0, -0.0, 1e15, -1e-25, 1e-30, 3e-39], dtype=torch.float64)
        g[where] = specials[torch.randint(0, specials.numel(), (where.numel(),), generator=gen)]
        grads.append(g.to(dtype))
    return grads


def _optim_input(name: str, dtype: torch.dtype, optimizer: Callable) -> ProbeInput:
    total = sum(OPTIM_LENGTHS)

    def make() -> torch.Tensor:
        return torch.randn(total, generator=_generator(name), dtype=torch.float64).to(dtype)

    def run(x: torch.Tensor):
        gen = _generator(name + " gradients")
        params = [torch.nn.Parameter(piece.clone()) for piece in x.split(OPTIM_LENGTHS)]
        opt = optimizer(params)
        for grad in _optim_gradients(total, dtype, gen):
            for p, g in zip(params, grad.split(OPTIM_LENGTHS)):
                p.grad = g.clone()
            opt.step()
        state = [t for p in params for t in opt.state[p].values() if isinstance(t, torch.Tensor)]
        return tuple(p.detach() for p in params) + tuple(state)

    return ProbeInput(name, make, run)


_ADAM_CONFIGS = {
    "Adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
    "Adam weight_decay maximize": lambda ps: torch.optim.Adam(ps, lr=1e-2, betas=(0.8, 0.99),
                                                              weight_decay=0.1, maximize=True),
    "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-3),
    "AdamW betas=(0.3, 0.5)": lambda ps: torch.optim.AdamW(ps, lr=0.1, betas=(0.3, 0.5), eps=1e-3,
                                                           weight_decay=0.5),
}
_SGD_CONFIGS = {
    "SGD": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "SGD momentum weight_decay": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-4),
    "SGD nesterov maximize": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                                        maximize=True, weight_decay=0.01),
    "SGD dampening": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.5, dampening=0.3),
}


def _optim_probe_inputs(configs: dict) -> list[ProbeInput]:
    return [_optim_input(f"{name} {_short(dtype)} {OPTIM_STEPS} steps", dtype, make)
            for dtype in (torch.float32, torch.float64) for name, make in configs.items()]


def adam_probe_inputs() -> list[ProbeInput]:
    return _optim_probe_inputs(_ADAM_CONFIGS)


def sgd_probe_inputs() -> list[ProbeInput]:
    return _optim_probe_inputs(_SGD_CONFIGS)


# --- kthvalue, median, nanmedian -------------------------------------------------------------------

SELECT_DTYPES = SORT_DTYPES[1:]  # torch's kthvalue and median reject bool
# Kwker serves rows of 16 and more and samples rows of 2048 and more.
SELECT_LENGTHS = (16, 300, 3000)


def _with_out(run: Callable, out: bool) -> Callable:
    """run(x, out_tuple_or_None): called with fresh empty out= tensors when `out`."""
    def call(x: torch.Tensor):
        if not out:
            return run(x, None)
        return run(x, (torch.empty(0, dtype=x.dtype), torch.empty(0, dtype=torch.long)))

    return call


def _select_inputs_for(op: str, dtype: torch.dtype, data: str, layout: str = "contiguous", out: bool = False,
                       lengths=SELECT_LENGTHS) -> list[ProbeInput]:
    inputs = []
    for length in lengths:
        shape = (_rows(length), length) if _rows(length) > 1 else (length,)
        if op == "kthvalue":
            calls = {f"k={k}": (lambda k: lambda x, o: torch.kthvalue(x, k, dim=-1, out=o))(k)
                     for k in sorted({1, length // 3 + 1, (length + 1) // 2, length})}
        else:
            fn = getattr(torch, op)
            calls = {"dim=-1": lambda x, o, fn=fn: fn(x, dim=-1, out=o)}
            if not out:
                calls["all"] = lambda x, o, fn=fn: fn(x)
        for what, run in calls.items():
            name = f"{op} {_short(dtype)} {data} {'x'.join(map(str, shape))} {layout} {what}{' out=' if out else ''}"
            inputs.append(ProbeInput(name, _sort_input(name, data, dtype, length, layout), _with_out(run, out)))
    return inputs


def _select_probe_inputs(ops: tuple[str, ...]) -> list[ProbeInput]:
    inputs = []
    for op in ops:
        for dtype in SELECT_DTYPES:
            inputs += _select_inputs_for(op, dtype, "ties")
            inputs += _select_inputs_for(op, dtype, "random", lengths=(300, 3000))
        for dtype in FLOAT_DTYPES:
            inputs += _select_inputs_for(op, dtype, "specials", lengths=(300, 3000))
        for dtype in (torch.int64, torch.float32):
            inputs += _select_inputs_for(op, dtype, "ties", layout="transposed", lengths=(300,))
            inputs += _select_inputs_for(op, dtype, "ties", out=True, lengths=(300,))
    return inputs


def kthvalue_probe_inputs() -> list[ProbeInput]:
    return _select_probe_inputs(("kthvalue",))


def median_probe_inputs() -> list[ProbeInput]:
    return _select_probe_inputs(("median", "nanmedian"))


# --- searchsorted, bucketize --------------------------------------------------------------------------

SEARCH_DTYPES = SORT_DTYPES[1:]  # torch's searchsorted rejects bool
SEARCH_VALUES = 600


def _search_input(name: str, dtype: torch.dtype, data: str, m: int, rows: int) -> Callable:
    """One flat tensor: rows x m boundaries (sorted, NaNs last; or as drawn: "unsorted"), then values
    (half drawn from the boundaries: exact hits). run() splits it."""
    def make() -> torch.Tensor:
        gen = _generator(name)
        kind = "specials" if data == "specials" else "ties" if data == "ties" else "random"
        bd = _SORT_DATA[kind](rows * m, dtype, gen).reshape(rows, m)
        if data != "unsorted":
            bd = bd.sort(dim=-1, stable=True).values
        values = _SORT_DATA[kind](rows * SEARCH_VALUES, dtype, gen)
        hits = torch.randint(0, rows * m, (rows * SEARCH_VALUES // 2,), generator=gen)
        values[: hits.numel()] = bd.reshape(-1)[hits]
        return torch.cat([bd.reshape(-1), values])

    return make


def _search_call(op: str, m: int, rows: int, right: bool, out_int32: bool, sorter: bool, out: bool) -> Callable:
    def run(x: torch.Tensor):
        bd = x[: rows * m].reshape(rows, m) if rows > 1 else x[:m]
        values = x[rows * m:].reshape(rows, -1) if rows > 1 else x[m:]
        o = torch.empty(0, dtype=torch.int32 if out_int32 else torch.long) if out else None
        if op == "bucketize":
            return torch.bucketize(values, bd, out_int32=out_int32, right=right, out=o)
        order = torch.argsort(bd, dim=-1, stable=True).flip(-1).contiguous() if sorter else None
        return torch.searchsorted(bd, values, out_int32=out_int32, right=right, sorter=order, out=o)

    return run


def searchsorted_probe_inputs() -> list[ProbeInput]:
    inputs = []
    cases = [(d, data, m, 1) for d in SEARCH_DTYPES for data in ("ties", "random") for m in (16, 1000)]
    cases += [(d, data, 300, 1) for d in FLOAT_DTYPES for data in ("specials", "unsorted")]
    cases += [(d, "ties", 40, 3) for d in (torch.int64, torch.float32, torch.bfloat16)]
    for dtype, data, m, rows in cases:
        for right in (False, True):
            for op, out_int32, sorter, out in (("searchsorted", right, False, False), ("bucketize", not right, False, right),
                                               ("searchsorted", False, True, not right)):
                if op == "bucketize" and rows > 1:
                    continue
                name = (f"{op} {_short(dtype)} {data} {rows}x{m} right={right} int32={out_int32}"
                        f"{' sorter' if sorter else ''}{' out=' if out else ''}")
                inputs.append(ProbeInput(name, _search_input(name, dtype, data, m, rows),
                                         _search_call(op, m, rows, right, out_int32, sorter, out)))
    return inputs


# --- unique ------------------------------------------------------------------------------------------

UNIQUE_DTYPES = SORT_DTYPES[1:]  # Kwker leaves bool to torch


def unique_probe_inputs() -> list[ProbeInput]:
    inputs = []
    calls = {"inverse counts": lambda x: torch.unique(x, return_inverse=True, return_counts=True),
             "plain": lambda x: torch.unique(x),
             "unsorted inverse": lambda x: torch.unique(x, sorted=False, return_inverse=True)}
    for dtype in UNIQUE_DTYPES:
        for data in ("ties", "random") + (("specials",) if dtype.is_floating_point else ()):
            for n in (300, 40000):
                for what, run in calls.items():
                    name = f"unique {_short(dtype)} {data} {n} {what}"
                    inputs.append(ProbeInput(name, (lambda name, data, dtype, n: lambda: _SORT_DATA[data](
                        n, dtype, _generator(name)).reshape(-1, 20 if n % 20 == 0 else 1))(name, data, dtype, n), run))
    # Along a dim: rows drawn from a few distinct rows (repeats, adjacent ones too).
    row_calls = {"dim=0 inverse counts": lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True),
                 "dim=1": lambda x: torch.unique(x, dim=1),
                 "consecutive dim=0": lambda x: torch.unique_consecutive(x, dim=0, return_inverse=True, return_counts=True)}
    for dtype in SORT_DTYPES:
        for data in ("ties", "random") + (("specials",) if dtype.is_floating_point else ()):
            for what, run in row_calls.items():
                name = f"unique rows {_short(dtype)} {data} 300x4 {what}"

                def make(name=name, data=data, dtype=dtype):
                    gen = _generator(name)
                    pool = _SORT_DATA[data](6 * 4, dtype, gen).reshape(6, 4)
                    return pool[torch.randint(0, 6, (300,), generator=gen)]

                inputs.append(ProbeInput(name, make, run))
    return inputs


# --- quantile, nanquantile -------------------------------------------------------------------------

def quantile_probe_inputs() -> list[ProbeInput]:
    inputs = []
    for dtype in (torch.float32, torch.float64):
        for data in ("ties", "random", "specials"):
            for shape, dim in (((3000,), None), ((20, 300), 1), ((300, 20), 0)):
                for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
                    for op in ("quantile", "nanquantile"):
                        name = f"{op} {_short(dtype)} {data} {'x'.join(map(str, shape))} dim={dim} {mode}"

                        def make(name=name, data=data, dtype=dtype, shape=shape):
                            n = math.prod(shape)
                            return _SORT_DATA[data](n, dtype, _generator(name)).reshape(shape)

                        def run(x, op=op, dim=dim, mode=mode, dtype=dtype):
                            q = torch.tensor([0.0, 0.1, 0.35, 0.5, 0.99, 1.0], dtype=dtype)
                            fn = getattr(torch, op)
                            return fn(x, q, dim=dim, interpolation=mode), fn(x, 0.3, dim=dim, keepdim=True,
                                                                             interpolation=mode)

                        inputs.append(ProbeInput(name, make, run))
    return inputs


# --- embedding (embedding_dense_backward) ----------------------------------------------------------

EMBEDDING_DTYPES = FLOAT_DTYPES


def _wide_floats(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Normals of magnitudes 1e-3..1e3 (their sums depend on the order of the adds), an eighth of them
    -0.0, +0.0 or subnormal; no NaN or infinity (Kwker leaves NaN results to torch)."""
    x = torch.randn(n, generator=gen, dtype=torch.float64) * 10.0 ** torch.randint(-3, 4, (n,), generator=gen)
    tiny = torch.finfo(dtype).tiny
    specials = torch.tensor([0.0, -0.0, tiny / 4, -tiny / 8], dtype=torch.float64)
    where = torch.randperm(n, generator=gen)[: max(1, n // 8)]
    x[where] = specials[torch.randint(0, specials.numel(), (where.numel(),), generator=gen)]
    return x.to(dtype)


def _skewed_indices(n: int, num_weights: int, index_dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """n indices in [0, num_weights), most of them on a few rows (long runs of equal indices)."""
    x = (torch.randn(n, generator=gen).abs() * max(1, num_weights // 6)).long().clamp(max=num_weights - 1)
    return x.to(index_dtype)


def _embedding_input(name: str, dtype: torch.dtype, index_dtype: torch.dtype, n: int, dim: int, num_weights: int,
                     padding_idx: int, scale: bool, out_of_range: bool = False) -> ProbeInput:
    def make() -> torch.Tensor:
        return _wide_floats(n * dim, dtype, _generator(name)).reshape(n, dim)

    def run(grad: torch.Tensor):
        indices = _skewed_indices(n, num_weights, torch.long, _generator(name + " indices"))
        if out_of_range:  # torch skips indices outside [0, num_weights) (without scale_grad_by_freq)
            indices[::9] = num_weights
            indices[4::13] = -1
        return torch.ops.aten.embedding_dense_backward(grad, indices.to(index_dtype), num_weights, padding_idx, scale)

    return ProbeInput(name, make, run)


def embedding_probe_inputs() -> list[ProbeInput]:
    inputs = []
    # (rows, dim, num_weights, padding_idx, scale_grad_by_freq): dims around torch's 16-bit vector steps
    # (32 under AVX2, 64 under AVX-512) and its scalar tails (rows of 31, 33, 40, 64, 65, 100 elements);
    # few rows (long sums) and many.
    cases = [(300, 16, 7, -1, False), (300, 16, 7, 2, True), (200, 33, 40, 0, False), (64, 65, 3, -1, True),
             (500, 1, 5, -1, False), (100, 64, 2, 1, True), (80, 31, 4, -1, True), (60, 40, 3, -1, True),
             (40, 100, 6, 0, True), (2500, 4, 1200, 3, False)]
    for dtype in EMBEDDING_DTYPES:
        for i, (n, dim, num_weights, padding_idx, scale) in enumerate(cases):
            index_dtype = torch.int32 if i % 2 else torch.int64
            name = (f"embedding_dense_backward {_short(dtype)} {n}x{dim} {_short(index_dtype)} "
                    f"num_weights={num_weights} padding_idx={padding_idx}{' scale_grad_by_freq' if scale else ''}")
            inputs.append(_embedding_input(name, dtype, index_dtype, n, dim, num_weights, padding_idx, scale))
        name = f"embedding_dense_backward {_short(dtype)} 300x12 int64 num_weights=10 out-of-range indices"
        inputs.append(_embedding_input(name, dtype, torch.int64, 300, 12, 10, -1, False, out_of_range=True))
    return inputs


# --- embedding_bag (max mode: _embedding_bag, _embedding_bag_forward_only, the dense backward) --------

def _bag_weights(n: int, dtype: torch.dtype, data: str, gen: torch.Generator) -> torch.Tensor:
    """"ties": a few small integers (equal maxima); "signed_zero": -0.0, +0.0 and negatives (maxima of
    either zero); "specials": normals with NaN payloads, ±inf, ±0 and subnormals among them."""
    if data == "ties":
        return torch.randint(-2, 3, (n,), generator=gen).to(dtype)
    if data == "signed_zero":
        pool = torch.tensor([0.0, -0.0, -1.0, -0.0, 0.0, -2.5], dtype=torch.float64)
        return pool[torch.randint(0, pool.numel(), (n,), generator=gen)].to(dtype)
    return _specials(n, dtype, gen)


def _bag_offsets(num_indices: int, num_bags: int, gen: torch.Generator) -> torch.Tensor:
    """num_bags sorted offsets starting at 0, a quarter of the bags empty (repeated offsets)."""
    cuts = torch.randint(0, num_indices + 1, (num_bags - 1,), generator=gen)
    empty = torch.rand(num_bags - 1, generator=gen) < 0.25
    cuts = torch.where(empty, cuts.roll(1), cuts)
    return torch.cat([torch.zeros(1, dtype=torch.long), cuts.sort().values])


def _bag_input(name: str, dtype: torch.dtype, data: str, index_dtype: torch.dtype, num_weights: int, dim: int,
               num_indices: int, num_bags: int, include_last_offset: bool, padding_idx: int,
               row_pad: int) -> ProbeInput:
    def make() -> torch.Tensor:
        return _bag_weights(num_weights * (dim + row_pad), dtype, data, _generator(name)).reshape(num_weights, -1)

    def run(x: torch.Tensor):
        weight = x[:, :dim]  # rows of stride dim + row_pad
        gen = _generator(name + " bags")
        indices = torch.randint(0, num_weights, (num_indices,), generator=gen)
        indices[1::3] = indices[0::3][: indices[1::3].numel()]  # repeats inside bags: self-ties
        offsets = _bag_offsets(num_indices, num_bags, gen)
        if include_last_offset:
            offsets = torch.cat([offsets, torch.tensor([num_indices])])
        indices, offsets = indices.to(index_dtype), offsets.to(index_dtype)
        args = (weight, indices, offsets, False, 2, False, None, include_last_offset, padding_idx)
        forward_only = torch.ops.aten._embedding_bag_forward_only(*args)
        output, offset2bag, bag_size, max_indices = torch.ops.aten._embedding_bag(*args)
        grad = _wide_floats(output.numel(), dtype, _generator(name + " grad")).reshape(output.shape)
        grad_weight = torch.ops.aten._embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, max_indices,
                                                                    num_weights, False, 2, None, padding_idx)
        return forward_only + (output, offset2bag, bag_size, max_indices, grad_weight)

    return ProbeInput(name, make, run)


def embedding_bag_probe_inputs() -> list[ProbeInput]:
    inputs = []
    # (num_weights, dim, num_indices, num_bags, include_last_offset, padding_idx, row_pad)
    cases = [(20, 16, 300, 40, False, -1, 0), (30, 33, 200, 25, True, 4, 3), (8, 64, 100, 12, False, 1, 0),
             (500, 1, 600, 90, True, -1, 1)]
    for dtype in FLOAT_DTYPES:
        for data in ("ties", "signed_zero", "specials"):
            for i, (num_weights, dim, n, bags, last, padding_idx, row_pad) in enumerate(cases):
                if data == "signed_zero" and i % 2:
                    continue
                index_dtype = torch.int32 if (i + len(data)) % 2 else torch.int64
                rows = f"{num_weights}x{dim}{f'+{row_pad}' if row_pad else ''}"
                name = (f"embedding_bag max {_short(dtype)} {data} {rows}"
                        f" {_short(index_dtype)} {n} indices {bags} bags padding_idx={padding_idx}"
                        f"{' include_last_offset' if last else ''}")
                inputs.append(_bag_input(name, dtype, data, index_dtype, num_weights, dim, n, bags, last, padding_idx,
                                         row_pad))
    return inputs


# --- coalesce (sparse COO) ---------------------------------------------------------------------------

COALESCE_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                   torch.bfloat16, torch.float32, torch.float64)


def _coalesce_values(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return _wide_floats(n, dtype, gen)
    return _random(n, dtype, gen)  # integers over their whole range: sums wrap


def _coalesce_input(name: str, dtype: torch.dtype, nnz: int, sizes: tuple, dense: tuple, distinct: int,
                    order: str) -> ProbeInput:
    def make() -> torch.Tensor:
        return _coalesce_values(nnz * math.prod(dense), dtype, _generator(name)).reshape(nnz, *dense)

    def run(values: torch.Tensor):
        gen = _generator(name + " indices")
        pool = torch.stack([torch.randint(0, s, (distinct,), generator=gen) for s in sizes])
        indices = pool[:, torch.randint(0, distinct, (nnz,), generator=gen)]
        if order == "sorted":
            keys = torch.zeros(nnz, dtype=torch.long)
            for d, s in enumerate(sizes):
                keys = keys * s + indices[d]
            indices = indices[:, torch.sort(keys, stable=True).indices]
        s = torch.sparse_coo_tensor(indices, values, (*sizes, *dense), check_invariants=False)
        c = s.coalesce()
        return c._indices(), c._values(), c.is_coalesced(), c._nnz()

    return ProbeInput(name, make, run)


def coalesce_probe_inputs() -> list[ProbeInput]:
    inputs = []
    # (nnz, sparse sizes, dense sizes, distinct coordinates, order): heavy duplication, nnz on both sides
    # of torch's 1-D integer radix sort (32768: torch's sort order of equal keys changes there).
    cases = [(100, (30,), (), 7, "random"), (1000, (40, 50), (3,), 60, "random"),
             (5000, (8, 8, 8, 8), (), 300, "random"),
             (700, (1 << 31, 1 << 31), (), 50, "sorted"), (32767, (100, 100), (), 500, "random"),
             (32768, (1 << 20,), (), 500, "random"), (40000, (64, 64, 64), (), 3000, "random")]
    for dtype in COALESCE_DTYPES:
        for nnz, sizes, dense, distinct, order in cases:
            if nnz >= 32767 and not dtype.is_floating_point and dtype != torch.int64:
                continue  # the order of the adds matters for floats only; one integer type is enough
            name = (f"coalesce {_short(dtype)} nnz={nnz} sizes={'x'.join(map(str, sizes))}"
                    f"{' dense=' + 'x'.join(map(str, dense)) if dense else ''} distinct={distinct} {order}")
            inputs.append(_coalesce_input(name, dtype, nnz, sizes, dense, distinct, order))
    return inputs


PROBE_INPUTS: dict[str, Callable[[], list[ProbeInput]]] = {
    "sort": sort_probe_inputs,
    "topk": topk_probe_inputs,
    "kthvalue": kthvalue_probe_inputs,
    "median": median_probe_inputs,
    "searchsorted": searchsorted_probe_inputs,
    "unique": unique_probe_inputs,
    "quantile": quantile_probe_inputs,
    "embedding": embedding_probe_inputs,
    "embedding_bag": embedding_bag_probe_inputs,
    "coalesce": coalesce_probe_inputs,
    "adam": adam_probe_inputs,
    "sgd": sgd_probe_inputs,
}
