#!/usr/bin/env bash
# Compiles every C++ block of the user guide alone, exactly as written: one
# translation unit per block with <nnsight/nnsight.hpp> and the block's own
# #include lines, nothing else (tests/docs/extract_snippets.cpp --each).
# Syntax and types only (-fsyntax-only): linking is Docs.CodeBlocksCompile's.
#
#   each_block_compiles.sh EXTRACTOR CXX OUT_DIR ROOT "FLAGS" DOC.md...
set -euo pipefail
extractor="$1" cxx="$2" out="$3" root="$4" flags="$5"
shift 5
rm -rf "$out"
mkdir -p "$out"
cd "$root"
"$extractor" --each "$out" "$@"
export cxx flags
failed=0
# shellcheck disable=SC2016
find "$out" -name '*.cpp' -print0 | sort -z |
  xargs -0 -P "$(nproc)" -n 1 sh -c '$cxx -std=c++17 -fsyntax-only $flags "$0" 2>"$0.log" || { cat "$0.log"; echo "FAILED: $0"; exit 1; }' ||
  failed=1
n=$(find "$out" -name '*.cpp' | wc -l)
if ((failed)); then
  echo "some of the $n documented blocks do not compile alone (above: the block's file and line)"
  exit 1
fi
echo "all $n documented blocks compile alone"
