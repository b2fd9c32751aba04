"""Fixtures and helpers shared by the trust-tool tests (test_probe, test_doctor, test_controls, test_audit).

    cache_dir     an empty, temporary KWKER_CACHE_DIR (tests never touch the real ~/.cache/kwker);
                  afterwards Kwker is uninstalled and no fault is left injected
    run_python    runs `python -c CODE` (or -m ...) in a fresh process with that cache directory
    sort_served   how many calls of one covered torch.sort Kwker itself served (0: not registered/on)

Import the fixtures into a test module: from trust_fixtures import cache_dir  # noqa: F401
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    from kwker import _native

    assert _native.available(), f"kwker native library unavailable: {_native.load_error()}"
    path = tmp_path / "kwker-cache"
    monkeypatch.setenv("KWKER_CACHE_DIR", str(path))
    monkeypatch.delenv("KWKER_DISABLE", raising=False)
    try:
        yield path
    finally:
        import kwker.torch_ops as kto

        if _native.available():  # (a test may pretend it is not)
            for family in kto.KERNELS:
                _native.ops().inject_fault(family, False)
            kto.uninstall()


def run_python(args: list[str], cache_dir, **env) -> subprocess.CompletedProcess:
    """`python ARGS` in a fresh process, KWKER_CACHE_DIR=cache_dir, no inherited KWKER_DISABLE/ISA."""
    child_env = {k: v for k, v in os.environ.items() if k not in ("KWKER_DISABLE", "KWKER_ISA")}
    child_env.update({"KWKER_CACHE_DIR": str(cache_dir), **env})
    return subprocess.run([sys.executable, *args], env=child_env, capture_output=True, text=True,
                          timeout=120)


def sort_served() -> int:
    """Kwker's served count for one torch.sort that Kwker covers, under the current switch."""
    import kwker.torch_ops as kto

    kto.reset_stats()
    torch.sort(torch.randn(4096, generator=torch.Generator().manual_seed(0)))
    return kto.stats()["sort"]["kwker"]
