#!/usr/bin/env python3
"""Writes the tokenization benchmark's corpus (about 4 MB of UTF-8) from files
in this repository, so that every machine measures the same text:
docs/*.md and README.md (English prose with code blocks), the C++ sources
under src/ (code), and the multilingual hard strings of
tests/data/tokenizer/bpe_families/golden.json (CJK, Cyrillic, Khmer, Arabic,
emoji, odd whitespace), repeated. Documents are separated by blank lines.

  python3 bench/make_tokenizer_corpus.py OUT [--megabytes 4]
"""
import argparse
import glob
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--megabytes", type=float, default=4.0)
    a = ap.parse_args()
    prose = [open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
    prose.append(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read())
    code = [open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.cpp"),
                                                                      recursive=True))]
    with open(os.path.join(ROOT, "tests", "data", "tokenizer", "bpe_families", "golden.json"), encoding="utf-8") as f:
        golden = json.load(f)
    hard = "\n".join(c["text"] for c in golden["families"][0]["cases"][:44])
    parts = []
    size = 0
    target = int(a.megabytes * 1e6)
    k = 0
    while size < target:
        for doc in (prose[k % len(prose)], code[k % len(code)], hard):
            text = doc.replace("\n\n", "\n").strip("\n") + "\n\n"
            parts.append(text)
            size += len(text.encode("utf-8"))
        k += 1
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("".join(parts))
    print(f"{a.out}: {size} bytes, {len(parts)} documents")


if __name__ == "__main__":
    main()
