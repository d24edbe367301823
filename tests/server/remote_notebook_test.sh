#!/usr/bin/env bash
# Notebook cells (cling) tracing a model that `nnsight serve` holds: starts the
# server from this build on a free port, then runs tests/server/remote_notebook.md
# through tests/cling/cling_test.sh with NNSIGHT_REMOTE_URL set.
#   remote_notebook_test.sh SOURCE_DIR BUILD_DIR NNSIGHT_CLI
set -euo pipefail
src="$1" build="$2" cli="$3"
out="$(mktemp)"
"$cli" serve --model smollm2-135m --port 0 --no-progress > "$out" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 600); do
  grep -q "listening on" "$out" && break
  kill -0 $pid 2>/dev/null || { echo "FAIL: the server did not start"; exit 1; }
  sleep 0.2
done
url="$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$out")"
[ -n "$url" ] || { echo "FAIL: the server did not say where it listens"; exit 1; }
export NNSIGHT_REMOTE_URL="$url"
"$src/tests/cling/cling_test.sh" "$src" "$build" tests/server/remote_notebook.md
