"""`python -m kwker audit -- script.py args...`: runs a script with and without Kwker, alternating, each
run in a fresh process, and says how long each side took and whether their outputs agree.

Exit status: 0 when every run's output agrees with every other's; 1 when outputs differ (between
the sides, or between runs of one side: the script is then not deterministic); 2 for bad options or
no such script; 3 when a run fails (exits non-zero, or does not write --output).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from .. import torch_ops as kto
from .audit_outputs import Tolerance, difference, load

SIDES = ("torch", "kwker")  # the order of each pair of runs
EXIT_AGREE, EXIT_DIFFER, EXIT_USAGE, EXIT_RUN_FAILED = 0, 1, 2, 3
STDERR_TAIL_LINES = 40


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "audit", help="run a script with and without Kwker: times, speed-up, do the outputs agree",
        description="Runs `python script.py args...` RUNS times with Kwker installed before the script "
                    "starts and RUNS times without, alternating, each in a fresh process; reports wall "
                    "and CPU time, the speed-up, whether the outputs agree (stdout, or --output), and "
                    "which Kwker kernels the script hit.",
        epilog="exit status: 0 outputs agree, 1 outputs differ, 2 bad options or no such script, "
               "3 a run failed")
    parser.add_argument("-n", "--runs", type=int, default=3, metavar="RUNS",
                        help="runs per side (default 3)")
    parser.add_argument("--output", type=pathlib.Path, metavar="FILE",
                        help="compare this file, which the script writes (relative to the current "
                             "directory), instead of its stdout: .npy, .pt/.pth, .json, .txt; other "
                             "suffixes byte for byte")
    parser.add_argument("--rtol", type=float, default=0.0, metavar="R",
                        help="relative tolerance for floating-point values (default 0: exact)")
    parser.add_argument("--atol", type=float, default=0.0, metavar="A",
                        help="absolute tolerance for floating-point values (default 0: exact)")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- script.py args...",
                        help="the script and its arguments")
    parser.set_defaults(run=run)


@dataclass
class Run:
    side: str
    number: int  # 1-based, per side
    wall_s: float
    cpu_s: float
    returncode: int
    stdout: pathlib.Path
    stderr: pathlib.Path
    output: pathlib.Path | None  # the captured --output file, when the run wrote one
    stats: dict | None  # kto.stats() at the end of a Kwker run

    @property
    def label(self) -> str:
        return f"{self.side} run {self.number}"


def run(args) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.runs < 1 or args.rtol < 0 or args.atol < 0:
        print("kwker audit: give a script (python -m kwker audit [options] -- script.py args...), "
              "RUNS >= 1 and tolerances >= 0", file=sys.stderr)
        return EXIT_USAGE
    if not pathlib.Path(command[0]).is_file():
        print(f"kwker audit: no such script: {command[0]}", file=sys.stderr)
        return EXIT_USAGE
    # The probe (if this machine has no verdict cached yet) runs here, not in a timed run.
    states = kto.kernel_states()
    tol = Tolerance(args.rtol, args.atol)
    with tempfile.TemporaryDirectory(prefix="kwker-audit-") as workdir, _set_aside(args.output, workdir):
        runs = _run_all(command, args.runs, args.output, pathlib.Path(workdir))
        if _failed(runs[-1], args.output):
            _report_failure(runs[-1], args.output)
            return EXIT_RUN_FAILED
        print(f"kwker audit: {' '.join(command)}: {args.runs} runs with Kwker and {args.runs} without, "
              f"alternating, each in a fresh process")
        for line in _timing_lines(runs):
            print(line)
        agree, lines = _compare(runs, args.output, tol)
        for line in lines + _kernel_lines(runs, states):
            print(line)
    return EXIT_AGREE if agree else EXIT_DIFFER


# --- running ----------------------------------------------------------------------------------------

def _run_all(command, runs_per_side: int, output: pathlib.Path | None, workdir: pathlib.Path) -> list[Run]:
    """Runs torch, kwker, torch, kwker, ...; stops at the first run that fails (it is the last one)."""
    runs: list[Run] = []
    total = 2 * runs_per_side
    for number in range(1, runs_per_side + 1):
        for side in SIDES:
            _progress(len(runs), total, f"{side} run {number}")
            runs.append(_run_once(side, number, command, output, workdir))
            if _failed(runs[-1], output):
                _progress_end()
                return runs
    _progress(total, total, "done")
    _progress_end()
    return runs


def _failed(run: Run, output: pathlib.Path | None) -> bool:
    return run.returncode != 0 or (output is not None and run.output is None)


def _run_once(side: str, number: int, command, output, workdir: pathlib.Path) -> Run:
    name = f"{side}-{number}"
    stdout, stderr, stats_file = (workdir / f"{name}.{what}" for what in ("stdout", "stderr", "stats.json"))
    runner = [sys.executable, "-m", "kwker._audit_runner", "--kwker", "on" if side == "kwker" else "off"]
    if side == "kwker":
        runner += ["--stats-file", str(stats_file)]
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        returncode = subprocess.run([*runner, "--", *command], stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL).returncode
    wall_s, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(side, number, wall_s, cpu_s, returncode, stdout, stderr,
               _capture(output, workdir / f"{name}{output.suffix}") if output else None,
               json.loads(stats_file.read_text()) if stats_file.exists() else None)


def _capture(output: pathlib.Path, destination: pathlib.Path) -> pathlib.Path | None:
    # Moved away after each run, so the next run must write its own (a stale file cannot pass for it).
    if not output.exists():
        return None
    shutil.move(output, destination)
    return destination


@contextlib.contextmanager
def _set_aside(output: pathlib.Path | None, workdir: str):
    """A file already at --output is moved away for the audit and put back after it."""
    if output is None or not output.exists():
        yield
        return
    kept = pathlib.Path(workdir) / "original-output"
    shutil.move(output, kept)
    try:
        yield
    finally:
        shutil.move(kept, output)


def _progress(done: int, total: int, label: str) -> None:
    width = 30
    filled = width * done // total
    line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"
    # A terminal gets one bar redrawn in place; a log gets a line per step.
    sys.stderr.write(f"\r{line:<{width + 30}}" if sys.stderr.isatty() else line + "\n")
    sys.stderr.flush()


def _progress_end() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\n")


def _report_failure(failed: Run, output: pathlib.Path | None) -> None:
    if failed.returncode != 0:
        print(f"kwker audit: {failed.label} failed (exit status {failed.returncode}); its stderr:",
              file=sys.stderr)
    else:
        print(f"kwker audit: {failed.label} did not write {output}; its stderr:", file=sys.stderr)
    tail = failed.stderr.read_text(errors="replace").splitlines()[-STDERR_TAIL_LINES:]
    for line in tail or ["(empty)"]:
        print(f"  | {line}", file=sys.stderr)


# --- the report -------------------------------------------------------------------------------------

def _timing_lines(runs: list[Run]) -> list[str]:
    lines = [f"  {'':10} {'wall time':28} CPU time (user+sys)"]
    medians = {}
    for side in SIDES:
        walls = [r.wall_s for r in runs if r.side == side]
        cpus = [r.cpu_s for r in runs if r.side == side]
        medians[side] = (statistics.median(walls), statistics.median(cpus))
        lines.append(f"  {side:10} {_spread(walls):28} {_spread(cpus)}")
    wall_ratio = medians["torch"][0] / medians["kwker"][0]
    cpu_ratio = medians["torch"][1] / medians["kwker"][1]
    lines.append(f"  {'speed-up':10} {f'{wall_ratio:.2f}x':28} {cpu_ratio:.2f}x")
    lines.append("  (median, and the range min - max over the runs)")
    return lines


def _spread(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.3f} s ({min(seconds):.3f} - {max(seconds):.3f})"


def _compare(runs: list[Run], output: pathlib.Path | None, tol: Tolerance) -> tuple[bool, list[str]]:
    """Each side's runs against that side's first run, then Kwker's first run against torch's."""
    what = str(output) if output else "stdout"
    first = {side: next(r for r in runs if r.side == side) for side in SIDES}
    problems = []
    for run in runs:
        if run is not first[run.side]:
            found = _difference(first[run.side], run, output, tol, what)
            if found:
                problems.append(f"  {run.label} differs from {first[run.side].label} (the script is not "
                                f"deterministic: its outputs cannot judge Kwker): {found}")
    found = _difference(first["torch"], first["kwker"], output, tol, what)
    if found:
        problems.append(f"  {first['kwker'].label} differs from {first['torch'].label}: {found}")
    if problems:
        return False, [f"outputs ({what}, {tol}): DIFFER"] + problems
    # Kwker's results are torch's bit for bit, so a tolerance usually turns out not to be needed.
    identical = tol.exact or not any(_difference(first["torch"], r, output, Tolerance(), what) for r in runs)
    agreement = "identical" if identical else "agree within the tolerance"
    return True, [f"outputs ({what}, {tol}): {agreement} in all {len(runs)} runs"]


def _difference(expected: Run, actual: Run, output, tol: Tolerance, what: str) -> str | None:
    if output is None:
        return difference(_stdout(expected), _stdout(actual), tol, what)
    try:
        return difference(load(expected.output), load(actual.output), tol, what)
    except Exception as error:  # an unreadable output cannot be shown to agree
        return f"{what}: cannot be compared ({type(error).__name__}: {error})"


def _stdout(run: Run):
    raw = run.stdout.read_bytes()
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


def _kernel_lines(runs: list[Run], states: list[kto.KernelState]) -> list[str]:
    """What Kwker's kernels did in the Kwker runs, from kto.stats() at the end of each."""
    kwker_runs = [r for r in runs if r.side == "kwker" and r.stats is not None]
    totals: dict[str, dict] = {}
    for run in kwker_runs:
        for name, counters in run.stats.items():
            total = totals.setdefault(name, {"calls": 0, "kwker": 0, "torch": 0, "fallback_reasons": {}})
            for key in ("calls", "kwker", "torch"):
                total[key] += counters[key]
            for reason, count in counters["fallback_reasons"].items():
                total["fallback_reasons"][reason] = total["fallback_reasons"].get(reason, 0) + count
    lines = [f"kernels hit (totals over the {len(kwker_runs)} Kwker runs):"]
    for name, total in sorted(totals.items()):
        if total["calls"]:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(total["fallback_reasons"].items()))
            lines.append(f"  {name}: {total['calls']} calls, {total['kwker']} served by Kwker, "
                         f"{total['torch']} fell back to torch" + (f" ({reasons})" if reasons else ""))
    if len(lines) == 1:
        lines.append("  none: the script made no call that a registered Kwker kernel covers")
    for state in states:
        if not state.on:
            lines.append(f"  note: {state.name} is off: {state.reason} ({state.detail}); "
                         f"see python -m kwker doctor")
    return lines
