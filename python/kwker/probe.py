"""The probe: a kernel family is registered only after it gave torch's own answers, bit for bit, on
this machine, on the probe inputs of probe_inputs.py.

verdicts(families) answers from the cache when it holds a verdict for this machine (a small JSON file:
no measurable start-up cost), else probes and writes the cache. The cache is per kwker version, torch
version, native library build, ISA in use, CPU and probe inputs; a file that is corrupt, unreadable, of
another schema or for other circumstances (stale) is re-probed, never trusted. Where it cannot be
written (read-only directory) the verdict is kept in memory for the process, with one warning.

Cache directory: $KWKER_CACHE_DIR, else $XDG_CACHE_HOME/kwker, else ~/.cache/kwker.

Probing registers the probed families (switched on for no thread), runs each input with Kwker off and
on for this thread, and leaves them registered: the caller (torch_ops) registers what it wants next.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
import tempfile
import time
import warnings
from dataclasses import dataclass

import torch

from . import _native
from .bench.exactness import first_difference
from .probe_inputs import PROBE_INPUTS, ProbeInput

SCHEMA = 1
_BITS_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

# Verdicts that could not be written, by cache path: {"key": ..., "families": {...}}.
_in_memory: dict[str, dict] = {}
_warned_unwritable = False


@dataclass(frozen=True)
class FamilyVerdict:
    passed: bool
    inputs_run: int                  # up to and including the first input that differed
    failed_input: str | None         # the ProbeInput name that differed (None when passed, or none ran)
    difference: str | None           # how it differed (or why the family could not be probed)
    probed_at: float                 # time.time() of the probe
    seconds: float                   # how long the family's probe took


@dataclass(frozen=True)
class _Raised:
    """An exception as a comparable result: Kwker must raise where torch does, with its message."""

    type: str
    message: str


# --- the cache --------------------------------------------------------------------------------------

def cache_dir() -> pathlib.Path:
    override = os.environ.get("KWKER_CACHE_DIR")
    if override:
        return pathlib.Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = pathlib.Path(xdg) if os.path.isabs(xdg) else pathlib.Path.home() / ".cache"  # XDG: absolute only
    return base / "kwker"


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo ({} where there is none)."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return fields


def cpu_model() -> str:
    import platform

    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_key() -> dict:
    """Everything a verdict depends on: a cached verdict holds only while all of it is unchanged."""
    from . import __version__

    library = _native.library_path().stat()
    return {
        "kwker": __version__,
        "torch": torch.__version__,
        "build": _native.build_info(),
        "library": [library.st_size, library.st_mtime_ns],  # a rebuilt library is probed again
        "isa": _native.isa(),
        "detected_isa": _native.detected_isa(),
        "cpu": cpu_model(),
        "cpu_flags": _digest(_cpuinfo().get("flags", "")),
        "probe_inputs": _probe_input_digests(),
    }


@functools.lru_cache(maxsize=1)
def _probe_input_digests() -> dict[str, str]:
    # By the inputs' names, which say what each input is: another table is probed again.
    return {family: _digest("\n".join(i.name for i in inputs()))
            for family, inputs in sorted(PROBE_INPUTS.items())}


def cache_path(key: dict) -> pathlib.Path:
    """One file per kwker, torch, ISA and CPU, so two venvs or a KWKER_ISA cap do not overwrite each
    other; the rest of the key is checked inside the file."""
    slot = _digest(json.dumps([key["kwker"], key["isa"], key["cpu"], key["cpu_flags"]]))
    return cache_dir() / f"probe-torch{key['torch']}-{key['isa']}-{slot}.json"


# The JSON type of each FamilyVerdict field, to check a cache file against.
_VERDICT_FIELDS = {"passed": (bool,), "inputs_run": (int,), "failed_input": (str, type(None)),
                   "difference": (str, type(None)), "probed_at": (int, float), "seconds": (int, float)}


def _verdict_from_json(entry) -> FamilyVerdict:
    """Raises ValueError unless `entry` is a well-formed verdict (a cache file is never trusted)."""
    if not isinstance(entry, dict) or set(entry) != set(_VERDICT_FIELDS):
        raise ValueError(f"not a verdict: {entry!r}")
    for name, types in _VERDICT_FIELDS.items():
        value = entry[name]
        if not isinstance(value, types) or (isinstance(value, bool) and types != (bool,)):
            raise ValueError(f"verdict field {name}={value!r}")
    return FamilyVerdict(**entry)


def _read_cache(path: pathlib.Path, key: dict) -> dict[str, FamilyVerdict]:
    """The verdicts cached for `key`; {} when there are none, or none that can be trusted."""
    held = _in_memory.get(str(path))
    if held is not None and held["key"] == key:
        return dict(held["families"])
    try:
        content = json.loads(path.read_text())
        if not isinstance(content, dict) or content.get("schema") != SCHEMA or content.get("key") != key:
            return {}
        if not isinstance(content.get("families"), dict):
            return {}
        return {name: _verdict_from_json(entry) for name, entry in content["families"].items()}
    except (OSError, ValueError):  # ValueError: not JSON, not UTF-8, not a verdict
        return {}


def _write_cache(path: pathlib.Path, key: dict, families: dict[str, FamilyVerdict]) -> None:
    global _warned_unwritable
    content = {"schema": SCHEMA, "key": key,
               "families": {name: dataclasses.asdict(v) for name, v in sorted(families.items())}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a process reading it meanwhile sees the old file or the new one.
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".probe-", suffix=".tmp",
                                         delete=False) as tmp:
            json.dump(content, tmp, indent=1)
        try:
            os.replace(tmp.name, path)
        except OSError:
            os.unlink(tmp.name)
            raise
        _in_memory.pop(str(path), None)
    except OSError as error:
        _in_memory[str(path)] = {"key": key, "families": dict(families)}
        if not _warned_unwritable:
            _warned_unwritable = True
            warnings.warn(f"kwker: cannot write the probe cache {path} ({error}); the probe's verdict is "
                          f"kept in memory for this process (set KWKER_CACHE_DIR to a writable directory)",
                          RuntimeWarning, stacklevel=4)


def cache_status() -> dict:
    """Where this machine's verdicts are cached: directory, file, whether the file exists, its age in
    seconds, and whether the verdict is held in memory only (the file could not be written)."""
    path = cache_path(cache_key())
    try:
        age_s = max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        age_s = None
    return {"dir": str(path.parent), "path": str(path), "exists": age_s is not None, "age_s": age_s,
            "in_memory_only": str(path) in _in_memory}


# --- probing ----------------------------------------------------------------------------------------

def verdicts(families, reprobe: bool = False) -> dict[str, FamilyVerdict]:
    """The verdict on each of `families`: cached, or probed now (and cached). reprobe=True ignores the
    cache and rewrites it. May leave the probed families registered (see the module docstring)."""
    key = cache_key()
    path = cache_path(key)
    known = {} if reprobe else _read_cache(path, key)
    missing = [name for name in families if name not in known]
    if missing:
        known.update(probe(missing))
        _write_cache(path, key, known)
    return {name: known[name] for name in families}


def probe(families) -> dict[str, FamilyVerdict]:
    """Runs each family against torch on its probe inputs, here and now (no cache)."""
    ops = _native.ops()
    _native.register(families, False)
    counted_before = any(c["calls"] for c in json.loads(ops.stats()).values())
    previous_state = ops.set_thread_state(-1)
    previous_threads = torch.get_num_threads()
    # One thread: results do not depend on the thread count (rows are split as torch splits them), and
    # torch's own parallel radix sort costs 100 ms a call where another process keeps a core busy.
    torch.set_num_threads(1)
    try:
        return {name: _probe_family(name, ops) for name in families}
    finally:
        ops.set_thread_state(previous_state)
        torch.set_num_threads(previous_threads)
        if not counted_before:  # the probe's own calls are not the program's (stats() stays meaningful)
            ops.reset_stats()


def _probe_family(name: str, ops) -> FamilyVerdict:
    started, at = time.perf_counter(), time.time()
    make_inputs = PROBE_INPUTS.get(name)
    if make_inputs is None:
        return FamilyVerdict(False, 0, None, "no probe inputs for this family (kwker/probe_inputs.py)",
                             at, 0.0)
    count = 0
    for count, probe_input in enumerate(make_inputs(), 1):
        difference = _difference_on(probe_input, ops)
        if difference is not None:
            return FamilyVerdict(False, count, probe_input.name, difference, at,
                                 time.perf_counter() - started)
    return FamilyVerdict(count > 0, count, None, None if count else "the family's probe inputs are empty",
                         at, time.perf_counter() - started)


def _difference_on(probe_input: ProbeInput, ops) -> str | None:
    """None when Kwker's result is torch's bit for bit (and Kwker left the input alone)."""
    try:
        x = probe_input.make()
    except Exception as error:  # a broken input proves nothing: the family is not trusted
        return f"the probe input could not be built ({type(error).__name__}: {error})"
    original = x.clone()
    ops.set_thread_state(0)
    expected = _outcome(probe_input, x)
    ops.set_thread_state(1)
    actual = _outcome(probe_input, x)
    ops.set_thread_state(-1)
    if not torch.equal(_bits(original), _bits(x)):
        return "kwker modified its input"
    if _same_bits(expected, actual):
        return None
    return first_difference(expected, actual, "result") or "results differ"


def _outcome(probe_input: ProbeInput, x):
    try:
        return probe_input.run(x)
    except Exception as error:
        return _Raised(type(error).__name__, str(error))


def _bits(t):
    """The elements as same-size integers (a view): NaN payloads and the sign of zero compare."""
    return t.view(_BITS_VIEW[t.element_size()])


def _same_bits(expected, actual) -> bool:
    """Raw-bit equality of results, strides included; fast (first_difference then says how results
    differ, when they do)."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return False
        same_layout = (expected.dtype == actual.dtype and expected.shape == actual.shape
                       and expected.stride() == actual.stride()
                       and expected.storage_offset() == actual.storage_offset())
        return same_layout and torch.equal(_bits(expected), _bits(actual))
    if isinstance(expected, (tuple, list)):
        return (type(expected) is type(actual) and len(expected) == len(actual)
                and all(_same_bits(e, a) for e, a in zip(expected, actual)))
    return expected == actual
