#!/usr/bin/env bash
# Keeps the folder layering one-way (docs/design.md): a folder's code may
# include only folders below it. Prints each offending include.
set -uo pipefail
root="$1"
status=0
check() {  # folder, allowed include prefixes... (EXCLUDE_DIR: a subfolder checked on its own)
  local folder="$1"; shift
  local allowed="$*"
  while IFS= read -r line; do
    file="${line%%:*}"
    inc="$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")"
    top="${inc%%/*}"
    ok=0
    for a in $allowed; do [ "$top" = "$a" ] && ok=1; done
    # Same-directory includes without a folder prefix are fine.
    [[ "$inc" != */* ]] && ok=1
    if [ $ok = 0 ]; then
      echo "layering: $file includes \"$inc\" but $folder may use only: $allowed"
      status=1
    fi
  done < <(grep -rHn --include='*.h' --include='*.cpp' ${EXCLUDE_DIR:+--exclude-dir="$EXCLUDE_DIR"} '#include "' \
             "$root/$folder" 2>/dev/null | sed "s|$root/||")
}
check batching   batching
check src/core   batching core
check tp         batching core tp
check src/models batching core tp models
check dsl        core dsl
check runner     batching core tp models runner
EXCLUDE_DIR=cli check src/front  batching core tp models dsl runner front
check src/server batching core tp models dsl runner front server
# The command-line program sits above everything (it starts the server too).
check src/front/cli batching core tp models dsl runner front server
# Tracing is in two rooms (docs/design.md): the client records and submits
# traces, the worker runs them. The worker room never includes the client
# room (nor any other part of front/: it is what a server's worker runs).
while IFS= read -r line; do
  file="${line%%:*}"
  inc="$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")"
  if [[ "$inc" == front/* && "$inc" != front/trace_worker/* ]]; then
    echo "layering: $file includes \"$inc\" but src/front/trace_worker may use only front/trace_worker"
    status=1
  fi
done < <(grep -rHn --include='*.h' --include='*.cpp' '#include "' "$root/src/front/trace_worker" 2>/dev/null | sed "s|$root/||")
[ -d "$root/src/front/trace_worker" ] && [ -d "$root/src/front/trace_client" ] || {
  echo "layering: src/front/trace_client and src/front/trace_worker are the tracing rooms"; status=1; }
# runner/ is in rooms, lowest first: a room includes only rooms before it
# (docs/design.md).
check_room() {  # room, allowed rooms...
  local room="$1"; shift
  local allowed="$*"
  while IFS= read -r line; do
    file="${line%%:*}"
    inc="$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")"
    [[ "$inc" != runner/* ]] && continue
    r="${inc#runner/}"; r="${r%%/*}"
    ok=0
    for a in $allowed; do [ "$r" = "$a" ] && ok=1; done
    if [ $ok = 0 ]; then
      echo "layering: $file includes \"$inc\" but runner/$room may use only: $allowed"
      status=1
    fi
  done < <(grep -rHn --include='*.h' --include='*.cpp' '#include "' "$root/runner/$room" 2>/dev/null | sed "s|$root/||")
}
check_room step         step
check_room sampling     step sampling
check_room scheduler    step scheduler
check_room model_runner step sampling model_runner
check_room executor     step sampling model_runner executor
check_room engine       step sampling scheduler model_runner executor engine
for f in "$root"/runner/*.h "$root"/runner/*.cpp; do
  [ -e "$f" ] && { echo "layering: ${f#$root/} sits in runner/ itself; it belongs in a room"; status=1; }
done
# The flat-batch row arithmetic lives in batching/ alone: no other library
# folder narrows a request's rows out of a token range by hand.
if grep -rnE 'narrow\(0, *[a-z_>.-]*token_start|token_start *\+ *[a-z_>.-]*num_tokens' \
     "$root/src" "$root/runner" "$root/tp" "$root/dsl" --include='*.h' --include='*.cpp'; then
  echo "layering: request rows computed by hand outside batching/ (use batching/batch_groups.h)"
  status=1
fi
# Public headers include only public headers.
if grep -rn '#include "' "$root/include/nnsight"; then
  echo "layering: public headers must include only <nnsight/...> and external headers"
  status=1
fi
[ $status = 0 ] && echo "layering: ok"
exit $status
