"""Bit-exact differential helpers for the test suite: Kwker against torch itself.

    assert_bit_identical(expected, actual)   tensors (and tuples/lists/dicts of them, and Raised) are
                                             the same: type, dtype, shape, strides (unless
                                             strides=False), storage offset, and raw bytes. Floats are
                                             compared as integer views of their bits, so NaN payloads
                                             and the sign of zero count.
    run_both(fn, *args, **kwargs)            (torch_result, kwker_result, served): fn run once with
                                             kto.disabled() (the oracle) and once with
                                             kto.accelerated(); served is how many calls Kwker's own
                                             kernels served during the second run (stats() delta).
                                             An exception becomes a Raised(type, message) result, so
                                             errors are compared like values.

fn is called twice and must build anything it writes into (out= tensors) itself, on each call.

    num_threads(n)                           context: torch.set_num_threads(n), restored after.
    assert_reaches_kwker(fn, x, families)    fn(x) (a scripted or compiled function) with Kwker on is
                                             served by each family and gives torch's bits.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from dataclasses import dataclass

import torch

# Integer dtype with the same element size, to compare raw bits.
_BITS_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass(frozen=True)
class Raised:
    """An exception, as a comparable result."""

    type: type
    message: str

    def __repr__(self) -> str:
        return f"Raised({self.type.__name__}: {self.message!r})"


def require_native():
    """Fails (does not skip) when the native library cannot be used."""
    from kwker import _native

    assert _native.available(), f"kwker native library unavailable: {_native.load_error()}"


def raw_bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements reinterpreted as same-size integers (a view, same shape and strides)."""
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view(_BITS_VIEW[t.element_size()])


def _describe_mismatch(e: torch.Tensor, a: torch.Tensor, where: str) -> str:
    eb, ab = raw_bits(e).contiguous().reshape(-1), raw_bits(a).contiguous().reshape(-1)
    diff = (eb != ab).nonzero().reshape(-1)
    first = int(diff[0])
    pos = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), e.shape)) if e.dim() else ()
    width = 2 * e.element_size()
    mask = (1 << (8 * e.element_size())) - 1

    def show(flat_bits, flat_vals, i):
        return f"{flat_vals[i].item()!r} (0x{int(flat_bits[i]) & mask:0{width}x})"

    ev, av = e.contiguous().reshape(-1), a.contiguous().reshape(-1)
    lo, hi = max(0, first - 3), min(eb.numel(), first + 4)
    return (f"{where}: {diff.numel()} of {eb.numel()} elements differ; first at {pos}: "
            f"torch {show(eb, ev, first)}, kwker {show(ab, av, first)}; "
            f"torch[{lo}:{hi}]={ev[lo:hi].tolist()}, kwker[{lo}:{hi}]={av[lo:hi].tolist()}")


def difference(expected, actual, *, strides: bool = True, where: str = "result") -> str | None:
    """None when `actual` is bit for bit `expected`, else a description of the first difference."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"{where}: Tensor expected, got {actual!r}"
        checks = [("type", type(expected), type(actual)),
                  ("dtype", expected.dtype, actual.dtype),
                  ("device", expected.device, actual.device),
                  ("layout", expected.layout, actual.layout),
                  ("shape", tuple(expected.shape), tuple(actual.shape))]
        if strides:
            checks += [("strides", expected.stride(), actual.stride()),
                       ("storage_offset", expected.storage_offset(), actual.storage_offset())]
        for what, e, a in checks:
            if e != a:
                return f"{where}: {what} {e} expected, got {a}"
        if expected.numel() and not torch.equal(raw_bits(expected), raw_bits(actual)):
            return _describe_mismatch(expected, actual, where)
        return None
    if isinstance(expected, Raised) or isinstance(actual, Raised):
        return None if expected == actual else f"{where}: {expected!r} expected, got {actual!r}"
    if type(expected) is not type(actual):
        return f"{where}: {type(expected).__name__} expected, got {type(actual).__name__}: {actual!r}"
    if isinstance(expected, (tuple, list)):
        if len(expected) != len(actual):
            return f"{where}: {len(expected)} items expected, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            d = difference(e, a, strides=strides, where=f"{where}[{i}]")
            if d:
                return d
        return None
    if isinstance(expected, dict):
        if list(expected) != list(actual):
            return f"{where}: keys {list(expected)} expected, got {list(actual)}"
        for k in expected:
            d = difference(expected[k], actual[k], strides=strides, where=f"{where}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(expected, float) and isinstance(actual, float):
        import struct

        same = struct.pack("<d", expected) == struct.pack("<d", actual)
        return None if same else f"{where}: {expected!r} expected, got {actual!r}"
    return None if expected == actual else f"{where}: {expected!r} expected, got {actual!r}"


def assert_bit_identical(expected, actual, *, strides: bool = True, context: str = "") -> None:
    d = difference(expected, actual, strides=strides)
    if d:
        raise AssertionError(f"{context}: {d}" if context else d)


# -- running an op with torch's kernels and with Kwker's ----------------------------------------------

_TRIGGERED = re.compile(r"\s*\(Triggered internally at .*\)\s*$", re.S)


def _call(fn, args, kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # errors are results too
            result = Raised(type(exc), str(exc))
    # The "(Triggered internally at file:line)" suffix names a C++ source location, not behaviour.
    messages = [f"{w.category.__name__}: {_TRIGGERED.sub('', str(w.message))}" for w in caught]
    return result, messages


def counters() -> dict:
    """kto.stats(): {kernel: {"calls", "kwker", "torch", "fallback_reasons"}}."""
    import kwker.torch_ops as kto

    return kto.stats()


def stats_delta(before: dict, after: dict) -> dict:
    """Per kernel: calls/kwker/torch deltas, and fallback reason deltas (non-zero ones)."""
    out = {}
    for name, a in after.items():
        b = before.get(name, {"calls": 0, "kwker": 0, "torch": 0, "fallback_reasons": {}})
        reasons = {r: n - b["fallback_reasons"].get(r, 0) for r, n in a["fallback_reasons"].items()}
        out[name] = {"calls": a["calls"] - b["calls"], "kwker": a["kwker"] - b["kwker"],
                     "torch": a["torch"] - b["torch"],
                     "fallback_reasons": {r: n for r, n in reasons.items() if n}}
    return out


class Both(tuple):
    """(torch_result, kwker_result, served), plus .torch_warnings, .kwker_warnings, .delta (the
    stats() delta of the Kwker run) and .torch_delta (of the torch run)."""

    def __new__(cls, torch_result, kwker_result, served, **extra):
        self = super().__new__(cls, (torch_result, kwker_result, served))
        self.__dict__.update(extra)
        return self

    torch = property(lambda self: self[0])
    kwker = property(lambda self: self[1])
    served = property(lambda self: self[2])

    def reasons(self) -> dict:
        return {k: v["fallback_reasons"] for k, v in self.delta.items() if v["fallback_reasons"]}


def run_both(fn, *args, **kwargs) -> Both:
    """fn(*args, **kwargs) with torch's kernels (kto.disabled()) and with Kwker's (kto.accelerated())."""
    import kwker.torch_ops as kto

    require_native()
    s0 = counters()
    with kto.disabled():
        t_result, t_warnings = _call(fn, args, kwargs)
    s1 = counters()
    with kto.accelerated():
        k_result, k_warnings = _call(fn, args, kwargs)
    s2 = counters()
    torch_delta, delta = stats_delta(s0, s1), stats_delta(s1, s2)
    leaked = {k: v["kwker"] for k, v in torch_delta.items() if v["kwker"]}
    assert not leaked, f"Kwker served calls inside kto.disabled(): {leaked} (the oracle is not torch)"
    served = sum(v["kwker"] for v in delta.values())
    return Both(t_result, k_result, served, torch_warnings=t_warnings, kwker_warnings=k_warnings,
                delta=delta, torch_delta=torch_delta)


def assert_same(both: Both, *, strides: bool = True, warnings_too: bool = True, context: str = "") -> None:
    """torch's and Kwker's results of run_both are bit-identical (and gave the same warnings)."""
    assert_bit_identical(both.torch, both.kwker, strides=strides, context=context)
    if warnings_too:
        assert both.torch_warnings == both.kwker_warnings, (
            f"{context}: warnings differ: torch {both.torch_warnings}, kwker {both.kwker_warnings}")


@contextlib.contextmanager
def num_threads(n: int):
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def assert_reaches_kwker(fn, x, families) -> None:
    import kwker.torch_ops as kto

    expected = fn(x)
    before = {f: kto.stats()[f]["kwker"] for f in families}
    with kto.accelerated():
        actual = fn(x)
    for family in families:
        assert kto.stats()[family]["kwker"] > before[family], f"{family} not reached"
    assert_bit_identical(expected, actual)


def family_delta(both: Both, family: str) -> dict:
    """The family's counters for the Kwker side of run_both (zeros if it was never called)."""
    return both.delta.get(family, {"calls": 0, "kwker": 0, "torch": 0, "fallback_reasons": {}})


def assert_served(both: Both, what: str, allowed=(), *, family: str) -> None:
    """Kwker served the call, or fell back for one of the `allowed` reasons."""
    d = family_delta(both, family)
    fell_back_as_allowed = any(d["fallback_reasons"].get(r, 0) for r in allowed)
    assert d["kwker"] >= 1 or fell_back_as_allowed, (
        f"{what}: Kwker did not serve {family} (calls {d['calls']}, fallback reasons {d['fallback_reasons']})")


def assert_torchs(both: Both, what: str, *, family: str) -> None:
    """Kwker left the call to torch."""
    d = family_delta(both, family)
    assert d["kwker"] == 0, f"{what}: Kwker served a call it should leave to torch"
