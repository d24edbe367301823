#!/usr/bin/env bash
# Configures, builds and runs examples/consumer with find_package(nnsight):
# against this build installed into a scratch prefix (default), or, with a
# fourth argument "build-tree", against the build tree itself
# (CMAKE_PREFIX_PATH=<build dir>, no install step).
set -euo pipefail
src="$1" build="$2" model="$3" mode="${4:-install}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$build"
if [ "$mode" = install ]; then
  cmake --install "$build" --prefix "$work/prefix" >/dev/null
  prefix="$work/prefix"
fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src/examples/consumer" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer" "$model" "The capital of France is"
