#!/usr/bin/env bash
# Keeps the folder layering one-way (docs/design.md): a folder's code may
# include only folders below it. Prints each offending include.
set -uo pipefail
root="$1"
status=0
check() {  # folder, allowed include prefixes...
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
  done < <(grep -rHn --include='*.h' --include='*.cpp' '#include "' "$root/$folder" 2>/dev/null | sed "s|$root/||")
}
check batching   batching
check src/core   batching core
check tp         batching core tp
check src/models batching core tp models
check dsl        core dsl
check runner     batching core tp models runner
check src/front  batching core tp models dsl runner front
# Public headers include only public headers.
if grep -rn '#include "' "$root/include/nnsight"; then
  echo "layering: public headers must include only <nnsight/...> and external headers"
  status=1
fi
[ $status = 0 ] && echo "layering: ok"
exit $status
