# Shared settings for scripts/*. Sourced, not run.
NNSIGHT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NNSIGHT_HOME="${NNSIGHT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/nnsight}"
NNSIGHT_BUILD_DIR="${NNSIGHT_BUILD_DIR:-$NNSIGHT_ROOT/build}"
export NNSIGHT_HOME
log() { printf '[nnsight] %s\n' "$*" >&2; }
die() { printf '[nnsight] error: %s\n' "$*" >&2; exit 1; }
# configure_fuzz_build BUILD_DIR: configures the clang build of the graph
# language alone (dsl/fuzz/CMakeLists.txt: graph_fuzzer and dsl_sanitized_tests,
# ASan + UBSan) in BUILD_DIR unless it is configured already.
configure_fuzz_build() {
  local build="$1"
  [ -f "$build/CMakeCache.txt" ] && return 0
  command -v clang >/dev/null && command -v clang++ >/dev/null || die "clang is needed (apt-get install clang libclang-rt-14-dev)"
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  log "configuring the fuzz build in $build"
  CC=clang CXX=clang++ cmake -S "$NNSIGHT_ROOT" -B "$build" "${gen[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNNSIGHT_BUILD_FUZZ=ON \
    -DNNSIGHT_BUILD_TESTS=OFF -DNNSIGHT_BUILD_BENCH=OFF -DNNSIGHT_BUILD_EXAMPLES=OFF >/dev/null
}

# configure_sanitized BUILD_DIR address|thread: configures a clang build of
# everything with NNSIGHT_SANITIZE (cmake/nnsightSanitizers.cmake) in BUILD_DIR
# unless it is configured already. The address build also carries libFuzzer's
# coverage instrumentation and the fuzz targets (scripts/fuzz-http).
configure_sanitized() {
  local build="$1" kind="$2"
  [ -f "$build/CMakeCache.txt" ] && return 0
  command -v clang >/dev/null && command -v clang++ >/dev/null || die "clang is needed (apt-get install clang libclang-rt-14-dev)"
  local gen=() fuzz=OFF
  command -v ninja >/dev/null && gen=(-G Ninja)
  [ "$kind" = address ] && fuzz=ON
  log "configuring the $kind-sanitized build in $build"
  CC=clang CXX=clang++ cmake -S "$NNSIGHT_ROOT" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DNNSIGHT_SANITIZE="$kind" -DNNSIGHT_BUILD_FUZZ="$fuzz" -DNNSIGHT_BUILD_BENCH=OFF >/dev/null
}

# gpu_binaries DEFAULT_TARGETS: sets `build` (where the GPU binaries are) and
# TORCH_DIR. Binaries built elsewhere and checked here (NNSIGHT_GPU_BUILD and
# TORCH_DIR, which scripts/gpu-prebuilt check sets) are taken as they are;
# otherwise scripts/gpu-build builds NNSIGHT_GPU_TARGETS (default
# DEFAULT_TARGETS) into build-gpu and names its torch on its last line.
gpu_binaries() {
  if [ -n "${NNSIGHT_GPU_BUILD:-}" ]; then
    [ -n "${TORCH_DIR:-}" ] || die "NNSIGHT_GPU_BUILD is set without TORCH_DIR"
    build="$NNSIGHT_GPU_BUILD"
    log "the binaries in $build (scripts/gpu-prebuilt), not built here"
  else
    TORCH_DIR=$(NNSIGHT_GPU_TARGETS="${NNSIGHT_GPU_TARGETS:-$1}" "$NNSIGHT_ROOT/scripts/gpu-build" |
      sed -n 's/^TORCH_DIR=//p' | tail -1)
    [ -n "$TORCH_DIR" ] || die "scripts/gpu-build failed"
    build="$NNSIGHT_ROOT/build-gpu"
  fi
}
