# Shared settings for scripts/*. Sourced, not run.
NNSIGHT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NNSIGHT_HOME="${NNSIGHT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/nnsight}"
NNSIGHT_BUILD_DIR="${NNSIGHT_BUILD_DIR:-$NNSIGHT_ROOT/build}"
export NNSIGHT_HOME
log() { printf '[nnsight] %s\n' "$*" >&2; }
die() { printf '[nnsight] error: %s\n' "$*" >&2; exit 1; }
