#!/usr/bin/env bash
# Runs a notebook test against a fresh `cmake --install` of this build, with the
# nnsight-cpp17 kernel of this checkout (tests/notebook/harness.py).
#   notebook_test.sh SOURCE_DIR BUILD_DIR TEST.py [ARGS...]
# TEST.py gets the work folder BUILD_DIR/notebook-test (kept: executed
# notebooks, their HTML and the screenshot) and ARGS. Fails (never skips) when
# the venv or its Jupyter packages are missing.
set -euo pipefail
src="$1" build="$2" test="$3"
shift 3
source "$src/scripts/cling_env.sh"
if [ ! -x "$NNSIGHT_CLING_PYTHON" ] || ! "$NNSIGHT_CLING_PYTHON" -c 'import ipykernel, nbclient, nbconvert' 2>/dev/null; then
  echo "FAIL: $NNSIGHT_CLING_PYTHON lacks cppyy or the Jupyter packages (scripts/setup installs them)"
  exit 1
fi
work="$build/notebook-test"
mkdir -p "$work"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export NNSIGHT_PREFIX="$prefix"
export PYTHONPATH="$src/src/front/notebook/kernel"
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the checkout
export PATH="$(dirname "$NNSIGHT_CLING_PYTHON"):$PATH"   # the venv's jupyter
"$NNSIGHT_CLING_PYTHON" "$src/tests/notebook/$test" "$work" "$@"
