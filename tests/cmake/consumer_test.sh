#!/usr/bin/env bash
# Installs this build into a scratch prefix, then configures, builds and runs
# examples/consumer against it with find_package(nnsight): the package config
# and install rules work for a user's own project.
set -euo pipefail
src="$1" build="$2" model="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src/examples/consumer" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/build/consumer" "$model" "The capital of France is"
