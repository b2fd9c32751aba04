"""The probe: families that differ from torch are left off; the verdict is cached, and a cache that
cannot be trusted (corrupt, unreadable, of another schema, stale) is probed again without a crash."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

import kwker.torch_ops as kto
from kwker import _native, probe
from kwker.probe_inputs import PROBE_INPUTS
from trust_fixtures import cache_dir, sort_served  # noqa: F401

# The doctor pads family names to the longest one: "sort" as its report column shows it.
SORT_COLUMN = "sort".ljust(max(len(name) for name in kto.KERNELS)) + "  "


def cache_file():
    return probe.cache_path(probe.cache_key())


def cached_content() -> dict:
    return json.loads(cache_file().read_text())


@pytest.fixture
def probe_calls(monkeypatch):
    """The family lists probe.probe() was called with, in order (it still probes)."""
    calls = []
    real_probe = probe.probe

    def counting_probe(families):
        calls.append(list(families))
        return real_probe(families)

    monkeypatch.setattr(probe, "probe", counting_probe)
    return calls


def test_every_family_has_probe_inputs_with_unique_names():
    for family in kto.KERNELS:
        assert family in PROBE_INPUTS, f"{family} has no probe inputs (kwker/probe_inputs.py)"
        names = [i.name for i in PROBE_INPUTS[family]()]
        assert names and len(names) == len(set(names)), f"{family}: probe input names must be unique"


def test_every_sort_probe_input_is_served_by_kwker(cache_dir):
    # A probe input that torch's own kernel serves (too small, say) proves nothing about Kwker's.
    for probe_input in PROBE_INPUTS["sort"]():
        x = probe_input.make()
        with kto.accelerated():
            kto.reset_stats()
            probe_input.run(x)
            assert kto.stats()["sort"]["kwker"] == 1, f"Kwker did not serve '{probe_input.name}'"


def test_sort_probe_inputs_cover_the_hard_cases():
    names = " | ".join(i.name for i in PROBE_INPUTS["sort"]())
    for wanted in ("ties", "specials", "transposed", "sliced", "out=", "stable", "unstable",
                   "descending", "ascending", "x16 ", "x17 ", "x256 ", "x257 ", " 16384 ", " 32768 "):
        assert wanted in names, wanted
    for dtype in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                  "float64"):
        assert f"sort {dtype} " in names, dtype


def test_special_values_hold_nan_payloads_and_signed_zeros():
    from kwker.probe_inputs import _specials

    x = _specials(4096, torch.float32, torch.Generator().manual_seed(1))
    bits = set(x.view(torch.int32).tolist())
    assert {0x7FC00001, 0x7F800001, -0x00400000, 0, -0x80000000} <= bits  # payload NaNs, -NaN, +0, -0


def test_first_install_probes_and_writes_the_cache(cache_dir, probe_calls):
    assert kto.install()
    assert probe_calls == [list(kto.KERNELS)]
    content = cached_content()
    assert content["schema"] == probe.SCHEMA and content["key"] == probe.cache_key()
    verdict = content["families"]["sort"]
    assert verdict["passed"] and verdict["failed_input"] is None and verdict["probed_at"] > 0
    assert verdict["inputs_run"] == len(PROBE_INPUTS["sort"]())
    assert sort_served() == 1
    assert kto.stats()["sort"]["calls"] == 1, "the probe's own calls must not stay in the counters"


def test_probe_leaves_thread_state_and_torch_threads_as_they_were(cache_dir):
    threads = torch.get_num_threads()
    previous = _native.ops().set_thread_state(0)
    try:
        probe.verdicts(["sort"])
        assert _native.ops().set_thread_state(0) == 0
    finally:
        _native.ops().set_thread_state(previous)
        _native.deregister()
    assert torch.get_num_threads() == threads


def test_later_installs_read_the_cache(cache_dir, probe_calls):
    kto.install()
    kto.uninstall()
    probed_at = cached_content()["families"]["sort"]["probed_at"]
    assert kto.install()
    with kto.accelerated():
        pass
    kto.uninstall()
    assert kto.install(only=["sort"])
    assert probe_calls == [list(kto.KERNELS)], "only the first install may probe"
    assert cached_content()["families"]["sort"]["probed_at"] == probed_at
    assert sort_served() == 1


def test_a_cached_failure_is_honored_by_every_way_of_registering(cache_dir, monkeypatch):
    kto.install()
    kto.uninstall()
    content = cached_content()
    content["families"]["sort"].update(passed=False, failed_input="sort float32 x", difference="made up")
    cache_file().write_text(json.dumps(content))
    monkeypatch.setattr(probe, "probe", lambda families: pytest.fail("the cached verdict must be used"))

    assert kto.install()
    assert kto.is_installed() and sort_served() == 0
    kto.uninstall()
    kto.install(only=["sort"])
    assert sort_served() == 0
    kto.uninstall()
    with kto.accelerated():
        assert sort_served() == 0


def test_a_family_made_to_differ_is_left_off_and_doctor_says_why(cache_dir, capsys):
    from kwker.__main__ import main

    _native.ops().inject_fault("sort", True)
    try:
        assert kto.install()
        assert kto.is_installed() and sort_served() == 0, "a family that differed must not be registered"
        verdict = cached_content()["families"]["sort"]
        assert not verdict["passed"] and verdict["failed_input"].startswith("sort ")
        assert "differ" in verdict["difference"]

        assert main(["doctor"]) == 1
        text = capsys.readouterr().out
        assert f"{SORT_COLUMN}off: differed on probe" in text and verdict["failed_input"] in text
        assert main(["doctor", "--json"]) == 1
        state = next(s for s in json.loads(capsys.readouterr().out)["kernels"] if s["name"] == "sort")
        assert state["on"] is False and state["reason"] == kto.OFF_BY_PROBE
        assert verdict["failed_input"] in state["detail"]
    finally:
        _native.ops().inject_fault("sort", False)
        kto.uninstall()

    assert main(["doctor", "--reprobe"]) == 0
    assert f"{SORT_COLUMN}on" in capsys.readouterr().out
    assert cached_content()["families"]["sort"]["passed"]
    kto.install()
    assert sort_served() == 1


def _stale_key(content: dict) -> dict:
    content["key"]["library"] = [0, 0]
    return content


CORRUPTIONS = {
    "garbage bytes": lambda content: b"\x00\xff\xfe garbage",
    "truncated JSON": lambda content: json.dumps(content)[:40].encode(),
    "a JSON list": lambda content: b"[1, 2, 3]",
    "another schema": lambda content: json.dumps({**content, "schema": 999}).encode(),
    "no families": lambda content: json.dumps({k: v for k, v in content.items() if k != "families"}).encode(),
    "passed is a string": lambda content: json.dumps(
        {**content, "families": {"sort": {**content["families"]["sort"], "passed": "yes"}}}).encode(),
    "a verdict field missing": lambda content: json.dumps(
        {**content, "families": {"sort": {"passed": True}}}).encode(),
    "stale (other library build)": lambda content: json.dumps(_stale_key(content)).encode(),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS), ids=list(CORRUPTIONS))
def test_an_untrustworthy_cache_is_probed_again(cache_dir, probe_calls, corruption):
    kto.install()
    kto.uninstall()
    content = cached_content()
    # Each corruption claims the opposite of the truth where it can: a trusted cache would switch sort off.
    content["families"]["sort"]["passed"] = False
    cache_file().write_bytes(CORRUPTIONS[corruption](content))

    assert kto.install()
    assert len(probe_calls) == 2, "the corrupt cache must have been probed again"
    assert sort_served() == 1
    assert cached_content()["families"]["sort"]["passed"], "the cache must have been rewritten"


def test_an_unreadable_cache_file_is_probed_again(cache_dir, probe_calls, monkeypatch):
    kto.install()
    kto.uninstall()
    path = cache_file()
    path.unlink()
    path.mkdir()  # reading fails (IsADirectoryError), and so does replacing it
    monkeypatch.setattr(probe, "_warned_unwritable", False)
    with pytest.warns(RuntimeWarning, match="cannot write the probe cache"):
        assert kto.install()
    assert len(probe_calls) == 2 and sort_served() == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="chmod does not stop root from reading")
def test_a_cache_file_without_read_permission_is_probed_again_and_replaced(cache_dir, probe_calls):
    kto.install()
    kto.uninstall()
    cache_file().chmod(0)
    assert kto.install()
    assert len(probe_calls) == 2 and sort_served() == 1
    assert cached_content()["families"]["sort"]["passed"]


def unwritable_dir(tmp_path, how: str):
    if how == "chmod":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        path = tmp_path / "read-only"
        path.mkdir(mode=0o500)
        return path
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return blocker / "cache"  # cannot be created (its parent is a file): unwritable even for root


@pytest.mark.parametrize("how", ["chmod", "under a file"])
def test_a_read_only_cache_dir_works_with_one_warning(tmp_path, monkeypatch, probe_calls, how):
    monkeypatch.setenv("KWKER_CACHE_DIR", str(unwritable_dir(tmp_path, how)))
    monkeypatch.setattr(probe, "_warned_unwritable", False)
    try:
        with pytest.warns(RuntimeWarning, match="kept in memory"):
            assert kto.install()
        assert sort_served() == 1
        kto.uninstall()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no second warning
            assert kto.install()
        assert probe_calls == [list(kto.KERNELS)], "the in-memory verdict must be reused in this process"
        assert probe.cache_status()["in_memory_only"]
    finally:
        kto.uninstall()


def test_cache_dir_honors_kwker_cache_dir_then_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KWKER_CACHE_DIR", str(tmp_path / "override"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert probe.cache_dir() == tmp_path / "override"
    monkeypatch.delenv("KWKER_CACHE_DIR")
    assert probe.cache_dir() == tmp_path / "xdg" / "kwker"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec says: ignore it
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert probe.cache_dir() == tmp_path / "home" / ".cache" / "kwker"
