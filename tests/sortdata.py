"""Inputs for the sort tests: value distributions (as exact bit patterns where it matters) and layouts.

Everything is deterministic in its arguments (seeded numpy generators), so a failure reproduces from
the test id alone.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import torch

DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
NAMES = {d: str(d).removeprefix("torch.") for d in DTYPES}

# (mantissa bits, exponent bits, unsigned numpy type of the same width)
_FLOAT_FORMAT = {torch.float16: (10, 5, np.uint16), torch.bfloat16: (7, 8, np.uint16),
                 torch.float32: (23, 8, np.uint32), torch.float64: (52, 11, np.uint64)}
_SIGNED_OF = {np.uint8: np.int8, np.uint16: np.int16, np.uint32: np.int32, np.uint64: np.int64}
_NP_INT = {torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16, torch.int32: np.int32,
           torch.int64: np.int64}


def nan_patterns(dtype) -> list[int]:
    """Several NaN bit patterns: quiet and signalling, payloads, and negative NaNs."""
    m, e, _ = _FLOAT_FORMAT[dtype]
    w = 1 + m + e
    sign, exp = 1 << (w - 1), ((1 << e) - 1) << m
    quiet = 1 << (m - 1)
    mant_all = (1 << m) - 1
    positive = [exp | quiet, exp | quiet | 1, exp | mant_all, exp | 1, exp | (quiet >> 1) | 0b101]
    return positive + [sign | p for p in (exp | quiet, exp | mant_all, exp | 1)]


def special_patterns(dtype) -> dict[str, int]:
    m, e, _ = _FLOAT_FORMAT[dtype]
    w = 1 + m + e
    sign, exp_all = 1 << (w - 1), ((1 << e) - 1) << m
    one = ((1 << (e - 1)) - 1) << m
    return {"+0": 0, "-0": sign, "+inf": exp_all, "-inf": sign | exp_all,
            "min_sub": 1, "-min_sub": sign | 1, "max_sub": (1 << m) - 1, "-max_sub": sign | ((1 << m) - 1),
            "tiny": 1 << m, "-tiny": sign | (1 << m), "max": exp_all - 1, "-max": sign | (exp_all - 1),
            "one": one, "-one": sign | one, "one+ulp": one + 1, "one-ulp": one - 1}


def from_bits(bits: np.ndarray, dtype) -> torch.Tensor:
    _, _, ut = _FLOAT_FORMAT[dtype]
    signed = np.ascontiguousarray(bits.astype(ut)).view(_SIGNED_OF[ut])
    return torch.from_numpy(signed.copy()).view(dtype)


def to_bits(t: torch.Tensor) -> np.ndarray:
    _, _, ut = _FLOAT_FORMAT[t.dtype]
    view = {np.uint16: torch.int16, np.uint32: torch.int32, np.uint64: torch.int64}[ut]
    return t.contiguous().view(view).numpy().view(ut)


def seed_of(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


DISTRIBUTIONS = ("random", "sorted", "reversed", "equal", "few", "organ_pipe", "sawtooth",
                 "extremes", "nan_inf", "signed_zero", "denormal", "ties_special", "one_tie")
FLOAT_ONLY = ("nan_inf", "signed_zero", "denormal")


def applicable(dtype) -> tuple[str, ...]:
    if dtype.is_floating_point:
        return DISTRIBUTIONS
    return tuple(d for d in DISTRIBUTIONS if d not in FLOAT_ONLY)


def _random_floats(rng, dtype, n) -> torch.Tensor:
    lo, hi = (-14, 15) if dtype == torch.float16 else (-30, 30)
    mags = np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)
    return torch.from_numpy(mags).to(dtype)


def _random(rng, dtype, n) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.from_numpy(rng.integers(0, 2, n).astype(bool))
    if dtype.is_floating_point:
        return _random_floats(rng, dtype, n)
    info = np.iinfo(_NP_INT[dtype])
    return torch.from_numpy(rng.integers(info.min, info.max, n, dtype=_NP_INT[dtype], endpoint=True))


def _pick(rng, pool: torch.Tensor, n) -> torch.Tensor:
    return pool[torch.from_numpy(rng.integers(0, pool.numel(), n))]


def _mix_bits(rng, dtype, base: torch.Tensor, patterns: list[int], fraction: float) -> torch.Tensor:
    bits = to_bits(base).copy()
    where = rng.random(bits.size) < fraction
    bits[where] = rng.choice(np.array(patterns, dtype=np.uint64), int(where.sum())).astype(bits.dtype)
    return from_bits(bits, dtype)


def values(dtype, n: int, dist: str, seed: int = 0) -> torch.Tensor:
    """A contiguous 1-D tensor of n elements of `dtype` following `dist`."""
    rng = np.random.default_rng(seed_of(NAMES[dtype], n, dist, seed))
    if n == 0:
        return torch.empty(0, dtype=dtype)
    if dist == "random":
        return _random(rng, dtype, n)
    if dist in ("sorted", "reversed"):
        pool = _few_pool(rng, dtype, max(2, n // 3)) if dtype == torch.bool else _random(rng, dtype, n)
        s = torch.sort(_pick(rng, pool, n) if dtype == torch.bool else pool, stable=True).values
        return s if dist == "sorted" else s.flip(0)
    if dist == "equal":
        return _random(rng, dtype, 1).expand(n).clone()
    if dist == "few":
        return _pick(rng, _few_pool(rng, dtype, int(rng.integers(2, 6))), n)
    if dist == "organ_pipe":
        half = torch.sort(_pick(rng, _few_pool(rng, dtype, 12), (n + 1) // 2), stable=True).values
        return torch.cat([half, half.flip(0)])[:n].clone()
    if dist == "sawtooth":
        period = int(rng.integers(2, 9))
        return (torch.arange(n) % period).to(dtype)
    if dist == "extremes":
        if dtype == torch.bool:
            return _random(rng, dtype, n)
        if dtype.is_floating_point:
            sp = special_patterns(dtype)
            pats = list(sp.values()) + nan_patterns(dtype)[:2]
            return _mix_bits(rng, dtype, _random(rng, dtype, n), pats, 0.7)
        info = np.iinfo(_NP_INT[dtype])
        pool = sorted({int(info.min), int(info.min) + 1, -1 if info.min else 2, 0, 1, int(info.max) - 1,
                       int(info.max), int(info.max) // 2, int(info.min) // 2})
        ext = torch.tensor(pool, dtype=dtype)
        out = _random(rng, dtype, n)
        where = torch.from_numpy(rng.random(n) < 0.7)
        out[where] = _pick(rng, ext, int(where.sum()))
        return out
    if dist == "nan_inf":
        sp = special_patterns(dtype)
        out = _mix_bits(rng, dtype, _random(rng, dtype, n), nan_patterns(dtype), 0.25)
        return _mix_bits(rng, dtype, out, [sp["+inf"], sp["-inf"], sp["+0"], sp["-0"]], 0.12)
    if dist == "signed_zero":
        sp = special_patterns(dtype)
        base = _pick(rng, torch.tensor([1.0, -1.0, 0.5, -2.0]).to(dtype), n)
        return _mix_bits(rng, dtype, base, [sp["+0"], sp["-0"]], 0.7)
    if dist == "denormal":
        m, e, ut = _FLOAT_FORMAT[dtype]
        w = 1 + m + e
        mant = rng.integers(1, 1 << m, n, dtype=np.uint64)
        if rng.random() < 0.5:  # few distinct subnormals: many ties that are not zero
            mant = rng.choice(mant[:4], n)
        sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(w - 1)
        sub = from_bits(mant | sign, dtype)
        sp = special_patterns(dtype)
        return _mix_bits(rng, dtype, sub, [sp["+0"], sp["-0"], sp["tiny"], sp["-tiny"], sp["min_sub"],
                                           sp["-min_sub"]], 0.3)
    if dist == "ties_special":
        # A few tie classes; for floats some classes hold several bit patterns that compare equal
        # (NaN payloads, +0.0/-0.0), so the tie order shows in the values too, not only in indices.
        if not dtype.is_floating_point:
            return _pick(rng, _few_pool(rng, dtype, int(rng.integers(2, 5))), n)
        sp = special_patterns(dtype)
        base = _pick(rng, torch.tensor([1.0, -3.0, 2.5]).to(dtype), n)
        out = _mix_bits(rng, dtype, base, nan_patterns(dtype), 0.25)
        return _mix_bits(rng, dtype, out, [sp["+0"], sp["-0"], sp["+inf"]], 0.25)
    if dist == "one_tie":
        # All keys distinct but one pair of equal ones (for floats: also a +0.0/-0.0 pair and a pair of
        # NaNs with different payloads). With distinct keys every correct sort agrees; a single tie is
        # where an unstable sort's order first shows.
        if dtype == torch.bool:
            return _random(rng, dtype, n)
        if dtype.is_floating_point:
            m, e, ut = _FLOAT_FORMAT[dtype]
            limit = ((1 << e) - 1) << m  # +inf: patterns below it are finite non-negative
            bits = np.unique(rng.integers(1, limit, 3 * n + 10, dtype=np.uint64))
            rng.shuffle(bits)
            bits = bits[:n]
            sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(m + e)
            bits = bits | sign
            if n >= 6:
                i = rng.choice(n, 6, replace=False)
                bits[i[0]], bits[i[1]] = bits[i[2]], bits[i[2]]  # an exact duplicate
                sp, nans = special_patterns(dtype), nan_patterns(dtype)
                bits[i[3]], bits[i[4]] = sp["-0"], sp["+0"]
                bits[i[5]] = nans[int(rng.integers(len(nans)))]
                bits[i[2]] = nans[(int(rng.integers(len(nans))) + 1) % len(nans)] if rng.random() < 0.5 else bits[i[2]]
            return from_bits(bits.astype(ut), dtype)
        info = np.iinfo(_NP_INT[dtype])
        span = int(info.max) - int(info.min) + 1
        if span <= n:
            return _random(rng, dtype, n)
        vals = rng.choice(min(span, 1 << 62), n, replace=False).astype(np.int64) if span > (1 << 40) else \
            rng.choice(span, n, replace=False).astype(np.int64)
        vals = vals + int(info.min) if span <= (1 << 40) else vals - (1 << 61)
        if n >= 2:
            i = rng.choice(n, 2, replace=False)
            vals[i[0]] = vals[i[1]]
        return torch.from_numpy(vals.astype(_NP_INT[dtype]))
    raise ValueError(dist)


def _few_pool(rng, dtype, k: int) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.tensor([False, True])
    pool = _random(rng, dtype, k)
    if dtype.is_floating_point:
        pool = torch.round(pool.double() * 4).to(dtype) if rng.random() < 0.5 else pool
    return pool


# -- layouts ----------------------------------------------------------------------------------------

LAYOUTS = ("contiguous", "transposed", "sliced", "expanded", "expanded_outer")


def make(dtype, shape, dist: str, layout: str = "contiguous", dim: int = -1, seed: int = 0) -> torch.Tensor:
    """A tensor of `shape` whose layout is `layout` relative to the sort dim `dim`:
    contiguous; transposed (dims reversed: dense, not contiguous); sliced (step 2 along `dim`, offset 1:
    not dense); expanded (stride 0 along `dim`); expanded_outer (stride 0 along another dim)."""
    shape = list(shape)
    nd = len(shape)
    d = dim % nd if nd else 0
    if layout == "contiguous" or nd == 0:
        return values(dtype, math.prod(shape), dist, seed).reshape(shape)
    if layout == "transposed":
        base = values(dtype, math.prod(shape), dist, seed).reshape(shape[::-1])
        return base.permute(*range(nd - 1, -1, -1))
    if layout == "sliced":
        big = list(shape)
        big[d] = 2 * shape[d] + 1
        base = values(dtype, math.prod(big), dist, seed).reshape(big)
        return _step_slice(base, d, 1, 2, shape[d])
    if layout in ("expanded", "expanded_outer"):
        e = d if layout == "expanded" else next((i for i in range(nd) if i != d), d)
        small = list(shape)
        small[e] = 1
        return values(dtype, math.prod(small), dist, seed).reshape(small).expand(shape)
    raise ValueError(layout)


def _step_slice(t: torch.Tensor, d: int, start: int, step: int, length: int) -> torch.Tensor:
    index = [slice(None)] * t.dim()
    index[d] = slice(start, start + step * length, step)
    return t[tuple(index)]
