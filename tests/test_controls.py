"""Turning Kwker off: KWKER_DISABLE=1 (nothing loaded), KWKER_DISABLE=family,... (loaded, those
families never registered nor probed), install(exclude=...) and install(only=...)."""

from __future__ import annotations

import json

import pytest

import kwker.torch_ops as kto
from kwker import _native
from trust_fixtures import cache_dir, run_python, sort_served  # noqa: F401

# Prints what a fresh process sees: is the library loaded, does install() work, who served a sort.
REPORT = """
import json, warnings, torch
warnings.simplefilter("error")  # KWKER_DISABLE must not warn
import kwker._native as native, kwker.torch_ops as kto
installed = kto.install()
torch.sort(torch.randn(4096))
print(json.dumps({"available": native.available(), "installed": installed,
                  "stats": kto.stats(), "families_off": sorted(native.families_disabled_by_env())}))
"""


def probed_families(cache_dir) -> set[str]:
    """The families with a cached probe verdict."""
    return {name for path in cache_dir.glob("probe-*.json")
            for name in json.loads(path.read_text())["families"]}


def fresh_process_report(cache_dir, disable: str) -> dict:
    result = run_python(["-c", REPORT], cache_dir, KWKER_DISABLE=disable)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("setting", ["1", "all"])
def test_kwker_disable_all_loads_nothing(cache_dir, setting):
    report = fresh_process_report(cache_dir, setting)
    assert report == {"available": False, "installed": False, "stats": {}, "families_off": []}
    assert not cache_dir.exists(), "nothing may be probed"


@pytest.mark.parametrize("setting", ["sort", " Sort , topk "])
def test_kwker_disable_by_name_leaves_that_family_unregistered(cache_dir, setting):
    report = fresh_process_report(cache_dir, setting)
    assert report["available"] and report["installed"]
    assert report["stats"]["sort"]["calls"] == 0, "a disabled family must not even be registered"
    assert "sort" in report["families_off"]
    assert "sort" not in probed_families(cache_dir), "a disabled family must not be probed either"


def test_kwker_disable_0_leaves_kwker_on(cache_dir):
    report = fresh_process_report(cache_dir, "0")
    assert report["installed"] and report["stats"]["sort"]["kwker"] == 1


@pytest.mark.parametrize("setting, everything, families", [
    ("1", True, set()), ("all", True, set()), ("True", True, set()), ("yes", True, set()),
    ("", False, set()), ("0", False, set()), ("false", False, set()), ("no", False, set()),
    ("sort", False, {"sort"}), ("sort,topk", False, {"sort", "topk"}),
    (" SORT, ,topk ", False, {"sort", "topk"}),
])
def test_kwker_disable_settings(monkeypatch, setting, everything, families):
    monkeypatch.setenv("KWKER_DISABLE", setting)
    assert _native.disabled_by_env() is everything
    assert _native.families_disabled_by_env() == families


def test_kwker_disable_by_name_in_process(cache_dir, monkeypatch):
    monkeypatch.setenv("KWKER_DISABLE", "sort")
    assert kto.install() and sort_served() == 0
    kto.uninstall()
    with kto.accelerated():
        assert sort_served() == 0
    kto.uninstall()
    monkeypatch.setenv("KWKER_DISABLE", "nosuchkernel")  # a name this version does not know: no error
    assert kto.install() and sort_served() == 1


def test_exclude_and_only(cache_dir):
    assert kto.install(exclude=["sort"]) and sort_served() == 0
    kto.uninstall()
    assert kto.install(only=[]) and sort_served() == 0
    kto.uninstall()
    assert kto.install(only=["sort"]) and sort_served() == 1
    kto.uninstall()
    with kto.accelerated(exclude=["sort"]):
        assert sort_served() == 0
    kto.uninstall()
    with pytest.raises(ValueError, match="unknown kwker kernel"):
        kto.install(exclude=["no-such-kernel"])
    assert not _native.ops().is_registered()


def test_states_follow_the_controls(cache_dir, monkeypatch):
    kto.install(exclude=["sort"])
    states = {s.name: s for s in kto.kernel_states()}
    assert list(states) == list(kto.KERNELS)
    assert (states["sort"].on, states["sort"].reason) == (False, kto.OFF_BY_USER)
    assert all(s.on for name, s in states.items() if name != "sort")
    kto.uninstall()
    assert all(s.on for s in kto.kernel_states())
    monkeypatch.setenv("KWKER_DISABLE", "sort")
    state = {s.name: s for s in kto.kernel_states()}["sort"]
    assert (state.on, state.reason, state.detail) == (False, kto.OFF_BY_USER, "KWKER_DISABLE=sort")
