#!/usr/bin/env python3
"""Hugging Face `tokenizers` (Rust) on the same corpus as bench/tokenizer_bench.cpp.

  RAYON_NUM_THREADS=N python3 bench/tokenizer_bench_hf.py --tokenizer PATH/tokenizer.json \\
      --corpus FILE [--threads N] [--rounds 5] [--cold]

Documents are cut at blank lines exactly as the C++ bench cuts them and
encoded with encode_batch_fast (add_special_tokens=False), which runs on
RAYON_NUM_THREADS threads (set it to --threads; the script refuses a
mismatch). Prints one line per round and "median_s ... MB/s ... tokens ...".
"""
import argparse
import os
import statistics
import sys
import time

from tokenizers import Tokenizer


def documents(text):
    docs = []
    begin = 0
    while begin < len(text):
        end = text.find(b"\n\n", begin)
        if end < 0:
            end = len(text)
        docs.append(text[begin:min(end + 2, len(text))])
        begin = end + 2
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cold", action="store_true")
    a = ap.parse_args()
    if os.environ.get("RAYON_NUM_THREADS") != str(a.threads):
        sys.exit(f"set RAYON_NUM_THREADS={a.threads} (tokenizers reads it once, at start)")
    with open(a.corpus, "rb") as f:
        raw = f.read()
    # The corpus is UTF-8 (tokenizers takes str); the C++ bench reads the same bytes.
    docs = [d.decode("utf-8") for d in documents(raw)]
    tok = Tokenizer.from_file(a.tokenizer)
    # encode_batch_fast (tokenizers >= 0.21) skips the offsets, which the C++
    # tokenizer does not compute either.
    fast = hasattr(tok, "encode_batch_fast")
    times = []
    tokens = 0
    for r in range(a.rounds):
        if a.cold:
            tok = Tokenizer.from_file(a.tokenizer)
        encode = tok.encode_batch_fast if fast else tok.encode_batch
        t0 = time.perf_counter()
        enc = encode(docs, add_special_tokens=False)
        s = time.perf_counter() - t0
        tokens = sum(len(e.ids) for e in enc)
        times.append(s)
        print(f"round {r}: {s:.4f} s, {len(raw) / s / 1e6:.2f} MB/s")
    med = statistics.median(times)
    print(f"median_s {med:.4f} MB/s {len(raw) / med / 1e6:.2f} tokens {tokens} documents {len(docs)} "
          f"bytes {len(raw)} threads {a.threads} {'encode_batch_fast' if fast else 'encode_batch'}")


if __name__ == "__main__":
    main()
