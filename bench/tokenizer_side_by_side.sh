#!/usr/bin/env bash
# Tokenization speed of this library beside Hugging Face's Rust `tokenizers`:
# the same tokenizer.json, the same corpus, the same thread count, the two
# programs alternating (PAIRS times each), medians reported. Also checks that
# both produced the same number of tokens.
#
#   bench/tokenizer_side_by_side.sh [TOKENIZER_JSON ...]
#
# Environment: THREADS (default "1 2"), PAIRS (default 3), ROUNDS per run
# (default 5), VENV (a venv with `tokenizers`; default
# ~/.cache/nnsight/pretok-venv), BUILD (default build), CORPUS (default: made
# by bench/make_tokenizer_corpus.py under /tmp).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
BUILD="${BUILD:-$root/build}"
VENV="${VENV:-$HOME/.cache/nnsight/pretok-venv}"
THREADS="${THREADS:-1 2}"
PAIRS="${PAIRS:-3}"
ROUNDS="${ROUNDS:-5}"
CORPUS="${CORPUS:-/tmp/nnsight-tokenizer-corpus.txt}"
[ -f "$CORPUS" ] || "$VENV/bin/python" "$here/make_tokenizer_corpus.py" "$CORPUS"
if [ $# -eq 0 ]; then
  set -- "$root/tests/data/tokenizer/smollm2/tokenizer.json" \
    "$root/tests/data/tokenizer/bpe_families/qwen2/tokenizer.json" \
    "$root/tests/data/tokenizer/bpe_families/llama3/tokenizer.json"
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; tokenizers $("$VENV/bin/python" -c 'import tokenizers; print(tokenizers.__version__)')"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for tj in "$@"; do
  for t in $THREADS; do
    ours=() theirs=() ntok_ours="" ntok_theirs=""
    for ((p = 0; p < PAIRS; ++p)); do
      line=$("$BUILD/bench/tokenizer_bench" --tokenizer "$tj" --corpus "$CORPUS" --threads "$t" --rounds "$ROUNDS" | tail -1)
      ours+=("$(awk '{print $4}' <<<"$line")"); ntok_ours=$(awk '{print $6}' <<<"$line")
      line=$(RAYON_NUM_THREADS=$t "$VENV/bin/python" "$here/tokenizer_bench_hf.py" --tokenizer "$tj" --corpus "$CORPUS" \
        --threads "$t" --rounds "$ROUNDS" | tail -1)
      theirs+=("$(awk '{print $4}' <<<"$line")"); ntok_theirs=$(awk '{print $6}' <<<"$line")
    done
    a=$(printf '%s\n' "${ours[@]}" | median)
    b=$(printf '%s\n' "${theirs[@]}" | median)
    same=$([ "$ntok_ours" = "$ntok_theirs" ] && echo "same tokens ($ntok_ours)" || echo "TOKEN COUNTS DIFFER: $ntok_ours vs $ntok_theirs")
    printf '%-70s threads %d  nnsight %8.2f MB/s  tokenizers %8.2f MB/s  ratio %.2f  %s\n' \
      "${tj#$root/}" "$t" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {print a / b}')" "$same"
  done
done
