"""Replace torch's CPU kernels with Kwker's, through torch's dispatcher.

    install()        register Kwker's kernels at the CPU key and switch them on, process-wide
    uninstall()      deregister them: torch's own kernels are back exactly
    accelerated()    context manager: Kwker on for this thread inside the block only
    is_installed()   whether install() is in effect
    stats()          per-kernel counters: calls, served by Kwker, fell back to torch (and why)
    kernel_states()  each kernel family on or off, and why (what `python -m kwker doctor` shows)

A family is registered only if the probe trusts it on this machine (probe.py: run against torch on
probe inputs once, verdict cached) and KWKER_DISABLE does not name it.

Registration changes torch's dispatch table, which torch reads without a lock: call install() and
uninstall() while no other thread runs torch ops (at start-up, say). accelerated() registers once on
first use and from then on only flips a thread-local flag, so it is safe with other threads running.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass

from . import _native, probe

# Kernel families Kwker can serve, by the name used in stats(), exclude=, only= and KWKER_DISABLE.
KERNELS = ("sort", "adam", "sgd", "topk", "kthvalue", "median", "searchsorted", "unique", "quantile", "embedding",
           "embedding_bag", "coalesce")

_lock = threading.Lock()
# The families the user asked for (exclude=/only=) at the current registration; None: not registered.
_requested: list[str] | None = None


def _select(exclude, only) -> list[str]:
    names = list(KERNELS if only is None else only)
    unknown = [n for n in list(names) + list(exclude or ()) if n not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kwker kernel(s) {unknown}; known: {list(KERNELS)}")
    return [n for n in names if n not in set(exclude or ())]


def _trusted(requested: list[str]) -> list[str]:
    """The requested families that KWKER_DISABLE leaves on and the probe trusts (probing if need be)."""
    wanted = [n for n in requested if n not in _native.families_disabled_by_env()]
    verdicts = probe.verdicts(wanted)
    return [n for n in wanted if verdicts[n].passed]


def _register(requested: list[str], enable_globally: bool) -> None:
    global _requested
    _native.register(_trusted(requested), enable_globally)
    _requested = requested


def install(exclude=None, only=None) -> bool:
    """Registers Kwker's kernels (all of KERNELS, or `only`, less `exclude`, less what KWKER_DISABLE
    names or the probe does not trust) and switches them on for every thread. Returns False (and torch
    runs as usual) when the native library is unavailable."""
    if not _native.available():
        return False
    with _lock:
        _register(_select(exclude, only), True)
    return True


def uninstall() -> None:
    """Deregisters every Kwker kernel; torch's own kernels are back exactly."""
    if not _native.available():
        return
    global _requested
    with _lock:
        _native.deregister()
        _requested = None


def is_installed() -> bool:
    return _native.available() and bool(_native.ops().is_installed())


@contextlib.contextmanager
def accelerated(exclude=None, only=None):
    """Kwker's kernels on for the calling thread inside the block, whatever install() says.

    The first use registers the kernels (those the probe trusts and KWKER_DISABLE leaves on; switched
    off for other threads unless install() was called), so make that first use before starting threads
    that run torch ops."""
    if not _native.available():
        yield
        return
    ops = _native.ops()
    with _lock:
        if not ops.is_registered():
            _register(_select(exclude, only), False)
    previous = ops.set_thread_state(1)
    try:
        yield
    finally:
        ops.set_thread_state(previous)


@contextlib.contextmanager
def disabled():
    """Kwker's kernels off for the calling thread inside the block (torch's own kernels run)."""
    if not _native.available():
        yield
        return
    ops = _native.ops()
    previous = ops.set_thread_state(0)
    try:
        yield
    finally:
        ops.set_thread_state(previous)


def stats() -> dict:
    """{kernel: {"calls": n, "kwker": n, "torch": n, "fallback_reasons": {reason: n}}} since start-up
    or the last reset_stats(). Calls made while Kwker is switched off count under "torch"."""
    if not _native.available():
        return {}
    return json.loads(_native.ops().stats())


def reset_stats() -> None:
    if _native.available():
        _native.ops().reset_stats()


@dataclass(frozen=True)
class KernelState:
    name: str
    on: bool
    reason: str | None = None        # why it is off: one of the OFF_* strings below
    detail: str | None = None        # the input that differed and how, the load error, the setting;
                                     # when on: what the probe ran


OFF_UNAVAILABLE = "native library unavailable"
OFF_BY_USER = "disabled by the user"
OFF_BY_PROBE = "differed on probe"


def kernel_states(reprobe: bool = False) -> list[KernelState]:
    """Each family of KERNELS: on (registered by install(), or would be), or off and why. Probes the
    families the cache holds no verdict on (all of them with reprobe=True), keeping this process's
    registration as it was."""
    by_user = _off_by_user()
    if _native.disabled_by_env() or not _native.available():
        return [KernelState(n, False, OFF_BY_USER, by_user[n]) if n in by_user
                else KernelState(n, False, OFF_UNAVAILABLE, _native.load_error()) for n in KERNELS]
    with _lock:
        candidates = [n for n in KERNELS if n not in by_user]
        was_registered = _native.ops().is_registered()
        verdicts = probe.verdicts(candidates, reprobe=reprobe)
        _restore_registration(was_registered)
    states = []
    for name in KERNELS:
        if name in by_user:
            states.append(KernelState(name, False, OFF_BY_USER, by_user[name]))
        elif not verdicts[name].passed:
            states.append(KernelState(name, False, OFF_BY_PROBE, _probe_failure(verdicts[name])))
        else:
            states.append(KernelState(name, True, None, f"{verdicts[name].inputs_run} probe inputs "
                                                        f"bit-identical to torch"))
    return states


def _off_by_user() -> dict[str, str]:
    """{family: the setting that switched it off}: KWKER_DISABLE (all or by name), exclude=/only=."""
    setting = "KWKER_DISABLE=" + os.environ.get("KWKER_DISABLE", "")
    if _native.disabled_by_env():
        return {n: setting for n in KERNELS}
    off = {n: setting for n in KERNELS if n in _native.families_disabled_by_env()}
    if _requested is not None:
        off.update({n: "exclude=/only=" for n in KERNELS if n not in _requested and n not in off})
    return off


def _restore_registration(was_registered: bool) -> None:
    # A probe registers the probed families; put back what install()/accelerated() had registered.
    if _requested is not None:
        _native.register(_trusted(_requested), False)  # False keeps the global switch as it is
    elif not was_registered:
        _native.deregister()


def _probe_failure(verdict: probe.FamilyVerdict) -> str:
    if verdict.failed_input is None:
        return verdict.difference
    return f"input '{verdict.failed_input}': {verdict.difference}"
