"""`python -m kwker doctor`: versions, build, CPU and ISA, threads, each family's state, the cache."""

from __future__ import annotations

import json

import torch

import kwker
import kwker.torch_ops as kto
from kwker import _native, probe
from kwker.__main__ import main
from trust_fixtures import cache_dir, run_python  # noqa: F401

# The doctor pads family names to the longest one: "sort" as its report column shows it.
SORT_COLUMN = "sort".ljust(max(len(name) for name in kto.KERNELS)) + "  "


def test_text_report_in_a_fresh_process(cache_dir):
    result = run_python(["-m", "kwker", "doctor"], cache_dir)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert f"Kwker {kwker.__version__}, torch {torch.__version__}" in text
    assert f"build: for torch {torch.__version__}" in text
    assert f"ISA: {_native.isa()} in use ({_native.detected_isa()} detected)" in text
    assert f"CPU: {probe.cpu_model()}" in text
    assert "threads: " in text
    assert f"{SORT_COLUMN}on (" in text and "probe inputs bit-identical to torch" in text
    assert f"probe cache: {cache_dir}" in text and "ago)" in text


def test_json_report(cache_dir, capsys):
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kwker"] == kwker.__version__ and report["torch"] == torch.__version__
    assert report["native_library"]["loaded"] and report["build"]["torch"] == torch.__version__
    assert report["isa"]["in_use"] == _native.isa() and report["threads"] == torch.get_num_threads()
    assert [k["name"] for k in report["kernels"]] == list(kto.KERNELS)
    assert all(k["on"] for k in report["kernels"])
    cache = report["probe_cache"]
    assert cache["exists"] and cache["path"].startswith(str(cache_dir)) and cache["age_s"] >= 0


def test_reprobe_rewrites_the_cache(cache_dir, capsys):
    assert main(["doctor"]) == 0
    path = probe.cache_path(probe.cache_key())
    first = json.loads(path.read_text())["families"]["sort"]["probed_at"]
    assert main(["doctor"]) == 0
    assert json.loads(path.read_text())["families"]["sort"]["probed_at"] == first
    assert main(["doctor", "--reprobe"]) == 0
    assert json.loads(path.read_text())["families"]["sort"]["probed_at"] > first
    assert not _native.ops().is_registered(), "doctor must leave the registration as it found it"


def test_families_disabled_by_the_user(cache_dir, capsys):
    result = run_python(["-m", "kwker", "doctor"], cache_dir, KWKER_DISABLE="sort,nosuchkernel")
    assert result.returncode == 0, result.stderr
    assert f"{SORT_COLUMN}off: disabled by the user (KWKER_DISABLE=sort,nosuchkernel)" in result.stdout
    assert "KWKER_DISABLE names no family of this version: nosuchkernel" in result.stdout

    result = run_python(["-m", "kwker", "doctor"], cache_dir, KWKER_DISABLE="1")
    assert result.returncode == 0, result.stderr
    assert "native library: not loaded" in result.stdout
    assert f"{SORT_COLUMN}off: disabled by the user (KWKER_DISABLE=1)" in result.stdout

    kto.install(exclude=["sort"])
    assert main(["doctor"]) == 0
    assert f"{SORT_COLUMN}off: disabled by the user (exclude=/only=)" in capsys.readouterr().out
    assert kto.is_installed(), "doctor must leave the installation as it found it"


def test_native_library_unavailable(cache_dir, capsys, monkeypatch):
    monkeypatch.setitem(_native._state, "ok", False)
    monkeypatch.setitem(_native._state, "error", "RuntimeError: libkwker_torch.so is not built")
    assert main(["doctor"]) == 1
    text = capsys.readouterr().out
    assert "native library: not loaded (RuntimeError: libkwker_torch.so is not built)" in text
    assert f"{SORT_COLUMN}off: native library unavailable (RuntimeError: libkwker_torch.so is not built)" in text
    assert main(["doctor", "--json"]) == 1
    states = json.loads(capsys.readouterr().out)["kernels"]
    assert [s["name"] for s in states] == list(kto.KERNELS)
    assert all(s["reason"] == kto.OFF_UNAVAILABLE for s in states)
