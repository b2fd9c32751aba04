#!/usr/bin/env bash
# The main job: sets everything up, then runs the benchmark corpus (torch vs Kwker, alternating, one
# thread) and prints the table with its bit-exactness verdict. Extra arguments go to `kwker bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
"$VENV/bin/python" -m kwker bench "$@"
