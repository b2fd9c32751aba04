#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs all tests: the core's GoogleTest suite (every ISA
# this CPU has) and the pytest differential suite against torch. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh

cmake -S . -B build/core-tests -G Ninja -DKWKER_BUILD_TORCH=OFF -DKWKER_BUILD_TESTS=ON >/dev/null
cmake --build build/core-tests
# The full ctest log only when something failed; its summary line always.
ctest --test-dir build/core-tests --output-on-failure -j2 > build/ctest.log 2>&1 || { cat build/ctest.log; exit 1; }
tail -n 3 build/ctest.log

"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@" tests
