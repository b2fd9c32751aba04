"""`python -m kwker bench`: times the corpus on torch and on Kwker, checks every result is bit-exact,
then the optimizer section (bench/optimizers.py: torch.optim steps against torch's default and fused).

Exit status: 0 when every output is bit-exact, 1 when any is not (or an input failed), 2 for bad options.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import torch

from ..bench import corpus, optimizers, report
from ..bench.measure import RepeatPolicy, failed_record, measure

OPTIMIZER_FAMILY = "optim"  # the optimizer section's name in --ops

DEFAULT_POLICY = RepeatPolicy(min_runs=5, min_time_s=0.2)
QUICK_POLICY = RepeatPolicy(min_runs=3, min_time_s=0.01)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench", help="benchmark Kwker against torch on real-workload inputs",
        description="Times each corpus input on torch and on Kwker in one process (alternating runs), "
                    "checks the outputs are bit-exact, prints a table and writes JSON and a PNG plot.")
    parser.add_argument("--threads", type=int, metavar="N", default=1,
                        help="torch.set_num_threads (default 1)")
    parser.add_argument("--ops", metavar="FAMILIES",
                        help=f"comma-separated op families to run (default all), e.g. sort; "
                             f"'{OPTIMIZER_FAMILY}' is the optimizer section")
    parser.add_argument("--optim-threads", metavar="N,M", default="1,2",
                        help="thread counts of the optimizer section (default 1,2)")
    parser.add_argument("--filter", metavar="SUBSTR",
                        help="run only inputs whose id contains SUBSTR (comma-separated: any of them)")
    parser.add_argument("--repeat", type=int, metavar="R",
                        help=f"timed runs per side, at least (default {DEFAULT_POLICY.min_runs})")
    parser.add_argument("--min-time", type=float, metavar="S",
                        help=f"timed seconds per side, at least (default {DEFAULT_POLICY.min_time_s})")
    parser.add_argument("--quick", action="store_true",
                        help=f"few repetitions ({QUICK_POLICY.min_runs} runs, {QUICK_POLICY.min_time_s} s): "
                             "checks exactness, times roughly")
    parser.add_argument("--list", action="store_true",
                        help="list the selected inputs and their origins; time nothing")
    parser.add_argument("--json", type=pathlib.Path, metavar="PATH",
                        help="results file (default bench-results/bench-<timestamp>.json)")
    parser.add_argument("--plot", type=pathlib.Path, metavar="PATH",
                        help="plot file (default: the JSON path with .png)")
    parser.add_argument("--no-plot", action="store_true", help="write no plot")
    parser.set_defaults(run=run)


def run(args) -> int:
    inputs = corpus.all_inputs()
    wanted_families = _split(args.ops)
    known = corpus.families(inputs) + [OPTIMIZER_FAMILY]
    unknown = sorted(set(wanted_families or ()) - set(known))
    if unknown:
        print(f"kwker bench: unknown op families {unknown}; known: {known}")
        return 2
    optimizer_threads = _thread_counts(args.optim_threads)
    if optimizer_threads is None:
        print(f"kwker bench: --optim-threads wants positive integers, got {args.optim_threads!r}")
        return 2
    with_optimizers = wanted_families is None or OPTIMIZER_FAMILY in wanted_families
    selected = corpus.select(inputs, wanted_families, _split(args.filter)) if (
        wanted_families is None or set(wanted_families) - {OPTIMIZER_FAMILY}) else []
    optimizer_names = [w.name for w in optimizers.WORKLOADS
                       if args.filter is None or any(f in w.name for f in _split(args.filter))]
    if not selected and not (with_optimizers and optimizer_names):
        print("kwker bench: no corpus input matches --ops/--filter")
        return 2
    if args.list:
        for entry in selected:
            print(f"{entry.id:40} {entry.origin}")
        if with_optimizers:
            for w in optimizers.WORKLOADS:
                if w.name in optimizer_names:
                    print(f"{OPTIMIZER_FAMILY + '/' + w.name:40} {w.origin}")
        return 0

    torch.set_num_threads(args.threads)
    policy = _policy(args)
    metadata = {**report.run_metadata(),
                "policy": {"min_runs": policy.min_runs, "min_time_s": policy.min_time_s,
                           "time_cap_s": policy.time_cap_s}}
    for line in report.header_lines(metadata):
        print(line)
    records = []
    if selected:
        print(f"{len(selected)} inputs, each: at least {policy.min_runs} runs "
              f"and {policy.min_time_s} s per side\n")
        print(report.table_header(), flush=True)
        for entry in selected:
            records.append(_measure_or_fail(entry, policy))
            print(report.table_row(records[-1]), flush=True)
    summary = report.summarize(records, metadata)
    if selected:
        print()
        for line in report.summary_lines(summary):
            print(line)
    optimizer_results = None
    if with_optimizers and optimizer_names:
        print(f"\noptimizer section: one step, median of at least {max(policy.min_runs, 20)} steps each, "
              f"exactness after {optimizers.EXACTNESS_STEPS} steps against torch's default path")
        optimizer_results = optimizers.run_section(optimizer_threads, max(policy.min_runs, 20),
                                                   policy.min_time_s, optimizer_names)
        exact = not optimizer_results["not_exact"]
        print(f"optimizer steps bit-exact with torch's default path: {'yes' if exact else 'NO'}"
              + ("" if exact else f" ({', '.join(optimizer_results['not_exact'])})"))
        summary["optimizers_not_exact"] = optimizer_results["not_exact"]
    _write_outputs(args, metadata, summary, records, optimizer_results)
    return 0 if not summary["not_exact"] and not summary.get("optimizers_not_exact") else 1


def _measure_or_fail(entry, policy) -> dict:
    # One input's failure (Kwker raising, say) is reported in its row; the others still run.
    try:
        return measure(entry, policy)
    except Exception as error:
        return failed_record(entry, error)


def _policy(args) -> RepeatPolicy:
    base = QUICK_POLICY if args.quick else DEFAULT_POLICY
    return RepeatPolicy(min_runs=args.repeat if args.repeat is not None else base.min_runs,
                        min_time_s=args.min_time if args.min_time is not None else base.min_time_s)


def _write_outputs(args, metadata, summary, records, optimizer_results) -> None:
    json_path = args.json or pathlib.Path("bench-results") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    report.write_json(json_path, metadata, summary, records,
                      optimizer_results["rows"] if optimizer_results else None)
    print(f"results: {json_path}")
    if args.no_plot or not records:
        return
    plot_path = args.plot or json_path.with_suffix(".png")
    try:
        report.write_plot(plot_path, metadata, summary, records)
    except ImportError:
        print("plot skipped: matplotlib is not installed (pip install 'kwker[bench]')")
        return
    print(f"plot: {plot_path}")


def _thread_counts(option: str) -> tuple[int, ...] | None:
    try:
        counts = tuple(int(part) for part in option.split(",") if part.strip())
    except ValueError:
        return None
    return counts if counts and all(n > 0 for n in counts) else None


def _split(option: str | None) -> list[str] | None:
    return [part.strip() for part in option.split(",") if part.strip()] if option else None
