"""Replace torch's CPU kernels with Kwker's, through torch's dispatcher.

    install()        register Kwker's kernels at the CPU key and switch them on, process-wide
    uninstall()      deregister them: torch's own kernels are back exactly
    accelerated()    context manager: Kwker on for this thread inside the block only
    is_installed()   whether install() is in effect
    stats()          per-kernel counters: calls, served by Kwker, fell back to torch (and why)

Registration changes torch's dispatch table, which torch reads without a lock: call install() and
uninstall() while no other thread runs torch ops (at start-up, say). accelerated() registers once on
first use and from then on only flips a thread-local flag, so it is safe with other threads running.
"""

from __future__ import annotations

import contextlib
import json
import threading

from . import _native

# Kernel families Kwker can serve, by the name used in stats(), exclude= and only=.
KERNELS = ("sort",)

_lock = threading.Lock()


def _select(exclude, only) -> list[str]:
    names = list(KERNELS if only is None else only)
    unknown = [n for n in list(names) + list(exclude or ()) if n not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kwker kernel(s) {unknown}; known: {list(KERNELS)}")
    return [n for n in names if n not in set(exclude or ())]


def install(exclude=None, only=None) -> bool:
    """Registers Kwker's kernels (all of KERNELS, or `only`, less `exclude`) and switches them on
    for every thread. Returns False (and torch runs as usual) when the native library is unavailable."""
    if not _native.available():
        return False
    with _lock:
        _native.ops().install(_select(exclude, only), True)
    return True


def uninstall() -> None:
    """Deregisters every Kwker kernel; torch's own kernels are back exactly."""
    if not _native.available():
        return
    with _lock:
        _native.ops().uninstall()


def is_installed() -> bool:
    return _native.available() and bool(_native.ops().is_installed())


@contextlib.contextmanager
def accelerated(exclude=None, only=None):
    """Kwker's kernels on for the calling thread inside the block, whatever install() says.

    The first use registers the kernels (switched off for other threads unless install() was called),
    so make that first use before starting threads that run torch ops."""
    if not _native.available():
        yield
        return
    ops = _native.ops()
    with _lock:
        if not ops.is_registered():
            ops.install(_select(exclude, only), False)
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
