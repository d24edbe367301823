#!/usr/bin/env bash
# Runs the documented notebook cells in cling (cppyy-cling, installed by
# scripts/setup into $NNSIGHT_HOME/venv) against a fresh `cmake --install` of
# this build, the way a xeus-cling user loads an installed library.
#   cling_test.sh SOURCE_DIR BUILD_DIR FILE.md|FILE.ipynb ...
# Fails (never skips) when cling is missing.
set -euo pipefail
src="$1" build="$2"
shift 2
source "$src/scripts/cling_env.sh"
if [ ! -x "$NNSIGHT_CLING_PYTHON" ]; then
  echo "FAIL: no cling: $NNSIGHT_CLING_PYTHON is missing (scripts/setup creates the venv and installs cppyy-cling)"
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
files=()
for f in "$@"; do files+=("$src/$f"); done
"$NNSIGHT_CLING_PYTHON" "$src/tests/cling/run_cells.py" --prefix "$work/prefix" "${files[@]}"
