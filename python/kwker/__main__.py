"""python -m kwker <command>: bench, doctor, audit (--help on each says more)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kwker", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    from .cli import audit, bench, doctor

    bench.add_parser(commands)
    doctor.add_parser(commands)
    audit.add_parser(commands)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
