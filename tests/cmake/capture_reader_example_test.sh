#!/usr/bin/env bash
# examples/capture_reader on the default model: the reader follows an engine
# started with capture on (layers 5 and 10) from another process and saves
# what it saw; it must have seen one record per layer per forward step.
#   capture_reader_example_test.sh NNSIGHT_CLI CAPTURE_READER
set -euo pipefail
cli="$1" reader="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
id="example-$$"
"$reader" --engine-id "$id" --out "$work/acts.safetensors" --wait-s 300 >"$work/reader.out" 2>"$work/reader.err" &
rpid=$!
"$cli" generate --model smollm2-135m --prompt "The capital of France is" --max-tokens 4 --json --no-progress \
  --capture --capture-layers 5,10 --engine-id "$id" >"$work/gen.out"
status=0
wait "$rpid" || status=$?
cat "$work/gen.out" "$work/reader.out" "$work/reader.err"
[ "$status" = 0 ] || { echo "capture example: the reader failed ($status)"; exit 1; }
# One forward per generated token (the prefill makes the first), two layers each.
tokens="$(grep -o '"token_ids":\[[0-9,]*\]' "$work/gen.out" | tr -cd ',' | wc -c)"
expected=$(( (tokens + 1) * 2 ))
grep -q "wrote $expected records to" "$work/reader.err" \
  || { echo "capture example: expected $expected records ($((tokens + 1)) tokens x 2 layers)"; exit 1; }
[ -s "$work/acts.safetensors" ] || { echo "capture example: no file written"; exit 1; }
echo "capture example: ok"
