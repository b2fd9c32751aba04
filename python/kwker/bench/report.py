"""What a bench run produces: the printed table and verdict, the JSON file and the PNG plot.

A record (one per input, from measure.py) holds: id, family, op, origin, shape, dtype, contiguous;
torch and kwker, each {median_ms, q1_ms, q3_ms, min_ms, max_ms, runs}; ratio (torch median / kwker
median: the speed-up); exact and difference (None, or where the first differing bits are); served (the
share of the Kwker side's op calls Kwker served itself, None without the native library), kwker_calls,
kwker_served_calls, fallback_reasons; torch_side_served_by_kwker; error (None, or why it failed).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import statistics
import sys

import torch

import kwker
from .. import _native

# An input whose interquartile range exceeds this share of its median has untrustworthy times
# (usually other processes preempting the run); the summary names such inputs.
NOISY_IQR_PERCENT = 25

COLUMNS = (("id", 38, "<"), ("op", 22, "<"), ("shape", 12, "<"), ("dtype", 8, "<"), ("torch ms", 9, ">"),
           ("kwker ms", 9, ">"), ("ratio", 7, ">"), ("iqr%", 5, ">"), ("exact", 5, ">"), ("served", 6, ">"))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_metadata() -> dict:
    """The machine, the software and Kwker's state, for reading the results later."""
    available = _native.available()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average": list(os.getloadavg()),  # other work on the machine skews the times
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "kwker_version": kwker.__version__,
        "threads": torch.get_num_threads(),
        "kwker_available": available,
        "kwker_load_error": None if available else _native.load_error(),
        "kwker_isa": _native.isa() if available else None,
        "kwker_detected_isa": _native.detected_isa() if available else None,
        "build_info": _native.build_info() if available else None,
        "command": sys.argv,
    }


def header_lines(metadata: dict) -> list[str]:
    lines = [f"kwker bench: {metadata['cpu']}, {metadata['threads']} thread(s), "
             f"torch {metadata['torch_version']}, kwker {metadata['kwker_version']}",
             "load average {:.2f} {:.2f} {:.2f}".format(*metadata["load_average"])]
    if metadata["kwker_available"]:
        lines.append(f"kwker ISA {metadata['kwker_isa']} (CPU supports {metadata['kwker_detected_isa']})")
    else:
        lines.append(f"WARNING: kwker native library unavailable ({metadata['kwker_load_error']}): "
                     "both sides run torch, ratios mean nothing")
    return lines


def table_header() -> str:
    width = sum(w for _, w, _ in COLUMNS) + len(COLUMNS) - 1
    return _row_line([name for name, _, _ in COLUMNS]) + "\n" + "-" * width


def table_row(record: dict) -> str:
    """The record's line, plus lines saying what differs or failed when it is not exact, and why
    Kwker did not serve every call when it did not."""
    timed = record["error"] is None
    cells = [record["id"], record["op"], _shape(record["shape"]), record["dtype"] or "-",
             _ms(record["torch"]["median_ms"]) if timed else "-",
             _ms(record["kwker"]["median_ms"]) if timed else "-",
             f"{record['ratio']:.2f}x" if timed else "-",
             f"{_noise_percent(record):.0f}" if timed else "-",
             "yes" if record["exact"] else ("ERROR" if not timed else "NO"),
             "n/a" if record["served"] is None else f"{record['served']:.0%}"]
    line = _row_line(cells)
    if record["error"]:
        line += f"\n    error: {record['error']}"
    elif record["difference"]:
        line += f"\n    not bit-exact: {record['difference']}"
    if record["served"] is not None and record["served"] < 1:
        line += (f"\n    fell back to torch: {record['fallback_reasons']}" if record["fallback_reasons"]
                 else "\n    no call reached Kwker's kernels")
    return line


def summarize(records: list[dict], metadata: dict) -> dict:
    timed = [r for r in records if r["ratio"] is not None]
    by_family: dict[str, list[float]] = {}
    for r in timed:
        by_family.setdefault(r["family"], []).append(r["ratio"])
    worst = min(timed, key=lambda r: r["ratio"]) if timed else None
    summary = {
        "inputs": len(records),
        "family_median_ratio": {f: statistics.median(ratios) for f, ratios in by_family.items()},
        "median_ratio": statistics.median(r["ratio"] for r in timed) if timed else None,
        "worst": {"id": worst["id"], "ratio": worst["ratio"]} if worst else None,
        "not_exact": [r["id"] for r in records if not r["exact"]],
        "errors": [r["id"] for r in records if r["error"]],
        "not_fully_served": [r["id"] for r in records if r["served"] is not None and r["served"] < 1],
        "noisy": [r["id"] for r in timed if _noise_percent(r) > NOISY_IQR_PERCENT],
        "load_average_at_end": list(os.getloadavg()),
        "kwker_available": metadata["kwker_available"],
    }
    summary["verdict"] = verdict(summary)
    return summary


def verdict(summary: dict) -> str:
    n, not_exact = summary["inputs"], summary["not_exact"]
    if not_exact:
        errors = f", {len(summary['errors'])} of them raised" if summary["errors"] else ""
        head = f"FAIL: {len(not_exact)} of {n} outputs NOT bit-exact{errors} ({', '.join(not_exact)})"
    else:
        head = f"all {n} outputs bit-exact"
    parts = [head]
    if summary["median_ratio"] is not None:
        worst = summary["worst"]
        parts.append(f"median speed-up {summary['median_ratio']:.2f}x, "
                     f"worst {worst['ratio']:.2f}x ({worst['id']})")
    if summary["not_fully_served"]:
        parts.append(f"{len(summary['not_fully_served'])} input(s) not fully served by Kwker")
    if summary["noisy"]:
        parts.append(f"{len(summary['noisy'])} input(s) with noisy times")
    if not summary["kwker_available"]:
        parts.append("kwker native library unavailable: both sides ran torch")
    return "verdict: " + "; ".join(parts)


def summary_lines(summary: dict) -> list[str]:
    lines = ["median speed-up per op family: " + ", ".join(
        f"{family} {ratio:.2f}x" for family, ratio in summary["family_median_ratio"].items())]
    if summary["median_ratio"] is not None:
        lines.append(f"overall median speed-up {summary['median_ratio']:.2f}x; "
                     f"worst {summary['worst']['ratio']:.2f}x ({summary['worst']['id']})")
    lines.append(f"not bit-exact: {len(summary['not_exact'])} of {summary['inputs']}")
    if summary["not_fully_served"]:
        lines.append("not fully served by Kwker: " + ", ".join(summary["not_fully_served"]))
    if summary["noisy"]:
        lines.append(f"noisy times (iqr over {NOISY_IQR_PERCENT}% of the median; load average at the end "
                     "{:.2f}, is the machine busy?): ".format(summary["load_average_at_end"][0])
                     + ", ".join(summary["noisy"]))
    lines.append(summary["verdict"])
    return lines


def write_json(path: pathlib.Path, metadata: dict, summary: dict, records: list[dict],
               optimizer_rows: list[dict] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    results = {"metadata": metadata, "summary": summary, "records": records}
    if optimizer_rows is not None:
        results["optimizers"] = optimizer_rows
    path.write_text(json.dumps(results, indent=2) + "\n")


def write_plot(path: pathlib.Path, metadata: dict, summary: dict, records: list[dict]) -> None:
    """Log-scale bars from 1x to each input's speed-up, best at the top, colored by op family; inputs
    that are not bit-exact are hatched in red and labelled."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on benchmark machines
    import matplotlib.patches
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    timed = sorted((r for r in records if r["ratio"] is not None), key=lambda r: r["ratio"])
    families = list(dict.fromkeys(r["family"] for r in timed))
    colors = {f: plt.get_cmap("tab10")(i % 10) for i, f in enumerate(families)}
    ratios = [r["ratio"] for r in timed]
    fig, ax = plt.subplots(figsize=(10, 1.8 + 0.24 * len(timed)))
    # Bars start at 1x so that slower-than-torch inputs point left and stand out.
    bars = ax.barh(range(len(timed)), [ratio - 1 for ratio in ratios], left=1,
                   color=[colors[r["family"]] for r in timed])
    for bar, r in zip(bars, timed):
        if not r["exact"]:
            bar.set_hatch("xx")
            bar.set_edgecolor("red")
        ax.annotate(f"{r['ratio']:.2f}x", (r["ratio"], bar.get_y() + bar.get_height() / 2), fontsize=6,
                    xytext=(3 if r["ratio"] >= 1 else -3, 0), textcoords="offset points", va="center",
                    ha="left" if r["ratio"] >= 1 else "right")
    ax.set_yticks(range(len(timed)), [r["id"] + ("" if r["exact"] else "  NOT EXACT") for r in timed],
                  fontsize=7)
    ax.set_ylim(-0.7, len(timed) - 0.3)
    ax.set_xscale("log")
    ax.set_xlim(min(0.5, min(ratios, default=1) / 1.5), max(2.0, max(ratios, default=1) * 1.5))
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1, 2, 5)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("speed-up: torch median time / Kwker median time (log scale)")
    ax.set_title(_plot_title(metadata, summary), fontsize=8)
    ax.legend(handles=[matplotlib.patches.Patch(color=colors[f], label=f) for f in families],
              loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_title(metadata: dict, summary: dict) -> str:
    speed = (f"median {summary['median_ratio']:.2f}x, worst {summary['worst']['ratio']:.2f}x"
             if summary["median_ratio"] is not None else "no input timed")
    isa = f"ISA {metadata['kwker_isa']}" if metadata["kwker_available"] else \
        "NATIVE LIBRARY UNAVAILABLE: both sides ran torch"
    return (f"Kwker vs torch, {metadata['threads']} thread(s): {speed}, "
            f"{len(summary['not_exact'])} of {summary['inputs']} not bit-exact\n"
            f"{metadata['cpu']}; torch {metadata['torch_version']}, kwker {metadata['kwker_version']}, {isa}")


def _row_line(cells) -> str:
    return " ".join(f"{str(c):{align}{width}}" for c, (_, width, align) in zip(cells, COLUMNS))


def _shape(shape) -> str:
    return "-" if shape is None else "x".join(map(str, shape)) or "scalar"


def _ms(ms: float) -> str:
    return f"{ms:.1f}" if ms >= 100 else f"{ms:.2f}" if ms >= 1 else f"{ms:.3f}"


def _noise_percent(record: dict) -> float:
    """The larger relative interquartile range of the two sides: how much to trust the ratio."""
    return 100 * max((s["q3_ms"] - s["q1_ms"]) / s["median_ms"] for s in (record["torch"], record["kwker"]))
