#!/usr/bin/env bash
# Sets up everything Kwker needs on a fresh machine, idempotently and quickly the second time:
# system packages (ccache, GoogleTest), a virtual environment with torch, and the extension build.
#   KWKER_TORCH=2.13.0 bash scripts/setup.sh   builds against torch 2.13.0 in .venv-torch2.13.0
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/env.sh

mkdir -p build
exec 9>"build/.setup-torch$TORCH_VERSION.lock"
flock 9   # one setup per torch version at a time: they share its venv and build folder

missing=()
command -v ccache >/dev/null || missing+=(ccache)
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
REQS=("${TORCH_REQS[@]}" numpy hypothesis pytest "scikit-build-core>=0.10" matplotlib)
stamp="$VENV/.kwker-reqs"
if [ "$(cat "$stamp" 2>/dev/null)" != "${REQS[*]}" ]; then
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "${REQS[@]}"
  echo "${REQS[*]}" > "$stamp"
fi

# The extension, built against this venv's torch; the build folder persists and ccache serves
# unchanged files, so a rebuild after a one-file change takes seconds.
"$PY" -m pip install -q --no-build-isolation --no-deps \
  -C build-dir="build/torch-$TORCH_VERSION" .
"$PY" -c "import kwker._native as n; assert n.available(), n.load_error(); print('setup: kwker built for torch', __import__('torch').__version__, 'isa', n.isa())"
