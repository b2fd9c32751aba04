"""Times one corpus input on torch and on Kwker, in the same process, and checks their results agree.

Both sides run the same call on the same data; only the thread's Kwker switch differs (kto.disabled()
for torch, kto.accelerated() for Kwker). The timed runs alternate A B A B so that drifts of the machine
(frequency, other processes, a warming cache) fall on both sides alike.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import statistics
import time

import torch

from .. import _native
from .. import torch_ops as kto
from .corpus import BenchInput
from .exactness import first_difference


@dataclasses.dataclass(frozen=True)
class RepeatPolicy:
    min_runs: int  # timed runs per side, at least
    min_time_s: float  # timed seconds per side, at least, unless the input's time cap is reached

    @property
    def time_cap_s(self) -> float:
        # Alternation gives both sides the same number of runs, so a slow torch side would otherwise
        # run until a much faster Kwker side has its min_time_s; past min_runs this bounds the input.
        return 10 * self.min_time_s


@dataclasses.dataclass
class KwkerCounts:
    """What Kwker's counters (kto.stats()) say happened during some runs, summed over its kernels."""
    calls: int = 0
    served: int = 0
    fallback_reasons: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @classmethod
    def now(cls) -> "KwkerCounts":
        counts = cls()
        for kernel, kernel_stats in kto.stats().items():
            counts.calls += kernel_stats["calls"]
            counts.served += kernel_stats["kwker"]
            counts.fallback_reasons.update({f"{kernel}: {reason}": n
                                            for reason, n in kernel_stats["fallback_reasons"].items()})
        return counts

    def add_since(self, before: "KwkerCounts") -> None:
        after = KwkerCounts.now()
        self.calls += after.calls - before.calls
        self.served += after.served - before.served
        self.fallback_reasons.update(after.fallback_reasons - before.fallback_reasons)


class Side:
    """torch or Kwker: runs the call with Kwker switched off or on, keeps its times and counters."""

    def __init__(self, switch):
        self.switch = switch  # the kto context manager that sets this side's Kwker state
        self.times_s: list[float] = []
        self.counts = KwkerCounts()

    def run(self, entry: BenchInput, arguments: tuple):
        """Runs the call once; returns (result, seconds). The result is freed outside the timing."""
        before = KwkerCounts.now()
        with self.switch():
            start = time.perf_counter()
            result = entry.call(*arguments)
            elapsed = time.perf_counter() - start
        self.counts.add_since(before)
        return result, elapsed

    def timed_run(self, entry: BenchInput, arguments: tuple) -> None:
        self.times_s.append(self.run(entry, arguments)[1])

    def summary(self) -> dict:
        ms = sorted(t * 1e3 for t in self.times_s)
        q1, _, q3 = statistics.quantiles(ms, n=4, method="inclusive") if len(ms) > 1 else (ms[0],) * 3
        return {"median_ms": statistics.median(ms), "q1_ms": q1, "q3_ms": q3,
                "min_ms": ms[0], "max_ms": ms[-1], "runs": len(ms)}


def measure(entry: BenchInput, policy: RepeatPolicy) -> dict:
    """Checks and times one input; returns its record (see report.py for the fields)."""
    with _garbage_collector_paused():
        torch_side, kwker_side = Side(kto.disabled), Side(kto.accelerated)
        arguments, difference = _check(entry, torch_side, kwker_side)
        for side in (torch_side, kwker_side):  # warm-up: caches, Kwker's per-thread buffers
            side.run(entry, arguments)
        _alternate(entry, arguments, torch_side, kwker_side, policy)
    return _record(entry, arguments, torch_side, kwker_side, difference)


def _check(entry: BenchInput, torch_side: Side, kwker_side: Side):
    """Runs each side once on its own freshly built arguments and compares the results and what the
    arguments hold afterwards (out= buffers, in-place updates). Separate arguments keep an op that
    writes into them from handing one side's result to the other. Returns torch's arguments, for the
    timed runs, and the first difference (None when bit-exact)."""
    torch_arguments, kwker_arguments = entry.make_arguments(), entry.make_arguments()
    if first_difference(torch_arguments, kwker_arguments) is not None:
        raise RuntimeError("corpus error: two builds of the arguments differ; "
                           "the builder must be deterministic")
    expected, _ = torch_side.run(entry, torch_arguments)
    actual, _ = kwker_side.run(entry, kwker_arguments)
    difference = (first_difference(expected, actual)
                  or first_difference(torch_arguments, kwker_arguments, where="arguments after the call"))
    return torch_arguments, difference


def _alternate(entry, arguments, torch_side: Side, kwker_side: Side, policy: RepeatPolicy) -> None:
    start = time.perf_counter()
    while True:
        torch_side.timed_run(entry, arguments)
        kwker_side.timed_run(entry, arguments)
        runs = len(kwker_side.times_s)
        enough_time = min(sum(torch_side.times_s), sum(kwker_side.times_s)) >= policy.min_time_s
        capped = time.perf_counter() - start >= policy.time_cap_s
        if runs >= policy.min_runs and (enough_time or capped):
            return


@contextlib.contextmanager
def _garbage_collector_paused():
    # A collection in the middle of a timed run would be charged to whichever side it fell on.
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def describe_arguments(arguments: tuple) -> dict:
    """Shape, dtype and layout of the call's first tensor argument (the data being sorted)."""
    first = next(a for a in arguments if isinstance(a, torch.Tensor))
    return {"shape": list(first.shape), "dtype": str(first.dtype).removeprefix("torch."),
            "contiguous": first.is_contiguous()}


def _record(entry, arguments, torch_side: Side, kwker_side: Side, difference) -> dict:
    torch_times, kwker_times = torch_side.summary(), kwker_side.summary()
    counts = kwker_side.counts
    if torch_side.counts.served and difference is None:
        # Then the torch column did not time torch, and the comparison proved nothing.
        difference = (f"Kwker served {torch_side.counts.served} calls inside kto.disabled(): "
                      "the torch side is not torch")
    return {
        "id": entry.id, "family": entry.family, "op": entry.op, "origin": entry.origin,
        **describe_arguments(arguments),
        "torch": torch_times, "kwker": kwker_times,
        "ratio": torch_times["median_ms"] / kwker_times["median_ms"],
        "exact": difference is None, "difference": difference,
        "served": _served_fraction(counts),
        "kwker_calls": counts.calls, "kwker_served_calls": counts.served,
        "fallback_reasons": dict(counts.fallback_reasons),
        "torch_side_served_by_kwker": torch_side.counts.served,
        "error": None,
    }


def _served_fraction(counts: KwkerCounts) -> float | None:
    """The share of the Kwker side's op calls that Kwker served; None without the native library."""
    if not _native.available():
        return None
    return counts.served / counts.calls if counts.calls else 0.0


def failed_record(entry: BenchInput, error: Exception) -> dict:
    """The record of an input whose measurement raised: counted as not exact, no times."""
    try:
        described = describe_arguments(entry.make_arguments())
    except Exception:  # the builder itself may be what raised
        described = {"shape": None, "dtype": None, "contiguous": None}
    return {"id": entry.id, "family": entry.family, "op": entry.op, "origin": entry.origin, **described,
            "torch": None, "kwker": None, "ratio": None, "exact": False,
            "difference": None, "served": None, "kwker_calls": 0, "kwker_served_calls": 0,
            "fallback_reasons": {}, "torch_side_served_by_kwker": 0,
            "error": f"{type(error).__name__}: {error}"}
