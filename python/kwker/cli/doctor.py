"""`python -m kwker doctor`: what Kwker does on this machine, and why each kernel family is on or off.

Exit status: 0 when every family is on or was switched off by the user; 1 when the native library is
unavailable or a family differed from torch on the probe.
"""

from __future__ import annotations

import dataclasses
import json
import os

import torch

from .. import __version__, _native, probe
from .. import torch_ops as kto


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "doctor", help="show versions, ISA, threads and each kernel family's state (on/off and why)",
        description="Prints Kwker's and torch's versions, the build, the CPU and ISA in use, torch's "
                    "threads, each kernel family's state (on, or off and why: it differed from torch "
                    "on the probe, the user disabled it, the native library is unavailable) and the "
                    "probe cache. Probes the families the cache has no verdict on.")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--reprobe", action="store_true",
                        help="ignore the probe cache: probe every family again and rewrite the cache")
    parser.set_defaults(run=run)


def run(args) -> int:
    report = collect(reprobe=args.reprobe)
    print(json.dumps(report, indent=2) if args.json else "\n".join(text_lines(report)))
    return 0 if healthy(report) else 1


def collect(reprobe: bool = False) -> dict:
    """The report as a dict (what --json prints)."""
    states = kto.kernel_states(reprobe=reprobe)  # first: it loads the library, or learns why not
    loaded = _native.available()
    return {
        "kwker": __version__,
        "torch": torch.__version__,
        "native_library": {"path": str(_native.library_path()), "loaded": loaded,
                           "load_error": _native.load_error()},
        "build": _native.build_info() if loaded else None,
        "cpu": {"model": probe.cpu_model(), "logical_cpus": os.cpu_count()},
        "isa": {"in_use": _native.isa(), "detected": _native.detected_isa(),
                "KWKER_ISA": os.environ.get("KWKER_ISA")} if loaded else None,
        "threads": torch.get_num_threads(),
        "kernels": [dataclasses.asdict(state) for state in states],
        "KWKER_DISABLE": os.environ.get("KWKER_DISABLE"),
        "KWKER_DISABLE_unknown_names": sorted(_native.families_disabled_by_env() - set(kto.KERNELS)),
        "probe_cache": probe.cache_status() if loaded else {"dir": str(probe.cache_dir()), "path": None},
    }


def healthy(report: dict) -> bool:
    return not any(k["reason"] in (kto.OFF_UNAVAILABLE, kto.OFF_BY_PROBE) for k in report["kernels"])


def text_lines(report: dict) -> list[str]:
    native = report["native_library"]
    lines = [f"Kwker {report['kwker']}, torch {report['torch']}"]
    if native["loaded"]:
        build = report["build"]
        lines.append(f"native library: {native['path']}")
        lines.append(f"build: for torch {build['torch']}, {build['compiler']}, "
                     f"ISAs compiled: {', '.join(build['isas_compiled'])}")
    else:
        lines.append(f"native library: not loaded ({native['load_error']})")
    lines.append(f"CPU: {report['cpu']['model']} ({report['cpu']['logical_cpus']} logical CPUs)")
    if report["isa"]:
        isa = report["isa"]
        cap = f", capped by KWKER_ISA={isa['KWKER_ISA']}" if isa["KWKER_ISA"] else ""
        lines.append(f"ISA: {isa['in_use']} in use ({isa['detected']} detected{cap})")
    lines.append(f"threads: {report['threads']} (torch.get_num_threads())")
    lines.append("kernels:")
    width = max(len(k["name"]) for k in report["kernels"])
    for kernel in report["kernels"]:
        lines.append(f"  {kernel['name']:{width}}  {_state_text(kernel)}")
    if report["KWKER_DISABLE_unknown_names"]:
        lines.append(f"note: KWKER_DISABLE names no family of this version: "
                     f"{', '.join(report['KWKER_DISABLE_unknown_names'])}")
    lines.append(f"probe cache: {_cache_text(report['probe_cache'])}")
    return lines


def _state_text(kernel: dict) -> str:
    if kernel["on"]:
        return f"on ({kernel['detail']})" if kernel["detail"] else "on"
    return f"off: {kernel['reason']}" + (f" ({kernel['detail']})" if kernel["detail"] else "")


def _cache_text(cache: dict) -> str:
    if cache["path"] is None:
        return f"{cache['dir']} (not consulted: the native library is not loaded)"
    if cache["in_memory_only"]:
        return f"{cache['path']} could not be written; the verdict is held in this process only"
    if not cache["exists"]:
        return f"{cache['path']} (none yet)"
    return f"{cache['path']} (written {_age_text(cache['age_s'])} ago)"


def _age_text(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 1.5 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"
