"""The child process of `python -m kwker audit`: runs a script as `python script.py args` would, with
Kwker installed before it starts (--kwker on) or not at all (--kwker off).

    python -m kwker._audit_runner --kwker on|off [--stats-file FILE] -- script.py args...

With --kwker on, kto.stats() is written to FILE as JSON when the process exits (the script's own exit,
sys.exit and an uncaught exception included), so the audit can say which kernels the script hit.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import runpy
import sys


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kwker._audit_runner")
    parser.add_argument("--kwker", choices=("on", "off"), required=True)
    parser.add_argument("--stats-file", help="where to write kto.stats() at exit (with --kwker on)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- script.py args...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no script given")
    if args.kwker == "on":
        _install_kwker(args.stats_file)
    _run_as_main(command[0], command[1:])


def _install_kwker(stats_file: str | None) -> None:
    from . import _native
    from . import torch_ops as kto

    if not kto.install():
        sys.exit(f"kwker audit: Kwker could not be installed ({_native.load_error()})")
    if stats_file:
        atexit.register(_write_stats, stats_file)


def _write_stats(path: str) -> None:
    from . import torch_ops as kto

    with open(path, "w") as out:
        json.dump(kto.stats(), out)


def _run_as_main(script: str, script_args: list[str]) -> None:
    # As `python script.py`: argv, and the script's directory first on sys.path (not this one's).
    sys.argv = [script, *script_args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
