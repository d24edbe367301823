#!/usr/bin/env bash
# Runs tests/server/python_clients_test.py with the project's venv python
# (scripts/setup installs openai and safetensors there). Fails, never skips,
# when they are missing.
#   python_clients_test.sh SOURCE_DIR BUILD_DIR NNSIGHT_CLI
set -euo pipefail
src="$1" build="$2" cli="$3"
source "$src/scripts/cling_env.sh"
if ! "$NNSIGHT_CLING_PYTHON" -c 'import openai, safetensors, numpy' 2>/dev/null; then
  echo "FAIL: $NNSIGHT_CLING_PYTHON lacks openai or safetensors (scripts/setup installs them)"
  exit 1
fi
export PYTHONDONTWRITEBYTECODE=1
"$NNSIGHT_CLING_PYTHON" "$src/tests/server/python_clients_test.py" "$cli" "$src" "$build/server-test"
