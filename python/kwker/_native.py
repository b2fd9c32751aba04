"""Loads the C++ extension (a torch op library, no Python bindings) and reports why when it cannot.

`import kwker` never fails because of the extension: if it cannot load, a warning is given once,
`available()` is False, `load_error()` says why, and torch runs as usual.
"""

from __future__ import annotations

import os
import pathlib
import threading
import warnings

_lock = threading.Lock()
_state: dict = {"tried": False, "ok": False, "error": None}

LIBRARY_NAME = "libkwker_torch.so"


_ALL = ("1", "all", "true", "yes")
_NONE = ("", "0", "false", "no", "none")


def _disable_setting() -> str:
    return os.environ.get("KWKER_DISABLE", "").strip().lower()


def disabled_by_env() -> bool:
    """KWKER_DISABLE=1 (or all/true/yes) switches everything off: the library is not even loaded."""
    return _disable_setting() in _ALL


def families_disabled_by_env() -> frozenset[str]:
    """The kernel families KWKER_DISABLE=sort,topk names (the library still loads; they are never
    registered). Names of families this version does not have are kept, not rejected: a setting
    written for a newer Kwker must not break an older one."""
    setting = _disable_setting()
    if setting in _ALL or setting in _NONE:
        return frozenset()
    return frozenset(name.strip() for name in setting.split(",") if name.strip())


def library_path() -> pathlib.Path:
    return pathlib.Path(__file__).with_name(LIBRARY_NAME)


def _load() -> None:
    import torch

    if disabled_by_env():
        raise RuntimeError("disabled by KWKER_DISABLE")
    path = library_path()
    if not path.exists():
        raise RuntimeError(f"{path.name} is not built (pip install --no-build-isolation .)")
    torch.ops.load_library(str(path))
    built_for = torch.ops.kwker.build_info()
    if f'"torch": "{torch.__version__}"' not in built_for:
        raise RuntimeError(f"built for another torch ({built_for}); this is torch {torch.__version__}")


def ensure_loaded() -> bool:
    """Loads the extension once; returns whether it is usable."""
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            try:
                _load()
                _state["ok"] = True
            except Exception as exc:  # any failure leaves torch untouched
                _state["error"] = f"{type(exc).__name__}: {exc}"
                if not disabled_by_env():
                    warnings.warn(f"kwker: native kernels unavailable, torch runs as usual ({_state['error']})",
                                  RuntimeWarning, stacklevel=3)
        return _state["ok"]


def available() -> bool:
    return ensure_loaded()


def load_error() -> str | None:
    ensure_loaded()
    return _state["error"]


def ops():
    """torch.ops.kwker, after a successful load."""
    import torch

    if not ensure_loaded():
        raise RuntimeError(f"kwker native library unavailable: {_state['error']}")
    return torch.ops.kwker


def isa() -> str:
    """The ISA the kernels use now: 'scalar', 'avx2' or 'avx512'."""
    return ops().isa()


def detected_isa() -> str:
    """The best ISA this CPU and OS support."""
    return ops().detected_isa()


def set_isa_cap(name: str) -> str:
    """Caps the ISA ('scalar', 'avx2', 'avx512'); returns the ISA now in use. For tests and benchmarks:
    do not call while kernels run on other threads. KWKER_ISA sets the same cap at start-up."""
    return ops().set_isa_cap(name)


def build_info() -> dict:
    import json

    return json.loads(ops().build_info())


def register(families, enable_globally: bool) -> None:
    """Registers exactly `families`: the dispatcher overrides (C++) and, for the optimizer families,
    the patches of torch.optim's step functions (optim.py). enable_globally=False leaves the global
    switch as it is (accelerated() and the probe switch families on per thread)."""
    from . import optim

    ops().install(list(families), enable_globally)
    optim.patch(families)


def deregister() -> None:
    """Deregisters every family: torch's own kernels and step functions are back exactly."""
    from . import optim

    ops().uninstall()
    optim.patch(())
