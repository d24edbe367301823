#!/usr/bin/env python3
"""Golden data for tests/core/tokenizer/*: token ids from Hugging Face `tokenizers`
(an independent BPE implementation) for the SmolLM2 vocabulary.

Reads the vocabulary, merges, token types and BOS/EOS from the default GGUF
model with the `gguf` package, builds a `tokenizers.Tokenizer` from them with
SmolLM2's pre-tokenizer (Sequence[Digits(individual_digits=True),
ByteLevel(add_prefix_space=False, use_regex=True)]), a ByteLevel decoder and the
control tokens as special added tokens, and writes

  smollm2/tokenizer.json         that tokenizer, as `tokenizers` saves it
  smollm2/tokenizer_config.json  bos/eos tokens and add_bos/add_eos from the GGUF
  golden.json                    test strings and, for several pipelines
                                 ("variants"), the ids `tokenizers` produces

The C++ tests load tokenizer.json, patch in each variant's pre_tokenizer (and
ignore_merges), and compare ids; variants with a "pre" name are also checked
through the llama.cpp-named pipelines (TokenizerSpec::pre).

Usage: python3 make_golden.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]
Requires: gguf, tokenizers (tested with tokenizers 0.23.3).
"""
import json
import os
import random
import sys

import tokenizers
from gguf import GGUFReader
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers as pt

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.join(
    os.environ.get("NNSIGHT_HOME", os.path.expanduser("~/.cache/nnsight")),
    "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
MAX_TOKENIZER_JSON_BYTES = 3 * 1024 * 1024

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def read_gguf(path):
    r = GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(key, default=None):
        f = r.fields.get(key)
        return default if f is None else f.parts[f.data[0]][0].item()

    f = r.fields["tokenizer.ggml.token_type"]
    return {
        "tokens": strings("tokenizer.ggml.tokens"),
        "merges": strings("tokenizer.ggml.merges"),
        "types": [int(f.parts[i][0]) for i in f.data],
        "pre": bytes(r.fields["tokenizer.ggml.pre"].parts[r.fields["tokenizer.ggml.pre"].data[0]]).decode(),
        "bos": scalar("tokenizer.ggml.bos_token_id", -1),
        "eos": scalar("tokenizer.ggml.eos_token_id", -1),
        "unk": scalar("tokenizer.ggml.unknown_token_id", -1),
        "add_bos": bool(scalar("tokenizer.ggml.add_bos_token", False)),
        "add_eos": bool(scalar("tokenizer.ggml.add_eos_token", False)),
    }


def build(g, pre_tokenizer, ignore_merges=False, normalizer=None):
    vocab = {t: i for i, t in enumerate(g["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in g["merges"]]
    unk = g["tokens"][g["unk"]] if g["unk"] >= 0 else None
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, ty in zip(g["tokens"], g["types"]) if ty == 3]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return tok


def variants():
    no_regex_byte_level = pt.ByteLevel(add_prefix_space=False, use_regex=False)
    return [
        # name, llama.cpp pre name (or None: tokenizer.json only), pre_tokenizer, ignore_merges[, normalizer]
        ("smollm", "smollm",
         pt.Sequence([pt.Digits(individual_digits=True),
                      pt.ByteLevel(add_prefix_space=False, use_regex=True)]), False),
        ("gpt2", "gpt2", pt.ByteLevel(add_prefix_space=False, use_regex=True), False),
        ("llama-bpe", "llama-bpe",
         pt.Sequence([pt.Split(Regex(LLAMA3_RE), "isolated"), no_regex_byte_level]), True),
        ("qwen2", "qwen2",
         pt.Sequence([pt.Split(Regex(QWEN2_RE), "isolated"), no_regex_byte_level]), False, normalizers.NFC()),
        ("prefix_space", None,
         pt.Sequence([pt.Digits(individual_digits=False),
                      pt.ByteLevel(add_prefix_space=True, use_regex=True)]), False),
        ("merged_with_next", None,
         pt.Sequence([pt.Split(Regex(r"\s+"), "merged_with_next"), no_regex_byte_level]), False),
        ("merged_with_previous", None,
         pt.Sequence([pt.Split(",", "merged_with_previous"), pt.Split(Regex(r"\p{N}"), "merged_with_previous"),
                      no_regex_byte_level]), False),
        ("contiguous_inverted", None,
         pt.Sequence([pt.Split(Regex(r"\p{L}"), "contiguous", invert=True), no_regex_byte_level]), False),
        ("removed", None,
         pt.Sequence([pt.Split(Regex(r"[ \t]"), "removed"), no_regex_byte_level]), False),
    ]


NAMED_STRINGS = [
    "The capital of France is",
    "12345",
    "3.14159",
    "café naïve",
    "I ❤️ 🐍",
    "   hello",
    "a\n\nb\n",
    "<|im_start|>user\nHi<|im_end|>",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "def add(a, b):\n    return a + b  # sum\n\n\tif x != 0x1F: print(f\"{x!r}\")\n",
    "",
    " ",
    "hello world   ",
    "It's I'LL we've they'RE don't",
    "<|im_start|<|im_end|>>",
    "日本語のテキストと中文",
    "Ünïcödé ÀÉÎÕÜ ß ﬁ",
    "x'ſ y'K z'\u212a",
    "a\u00a0b\u2009c\u3000d\u180ee\u200bf\u0085g\u2028h\x0bi\x0cj\x1ck",
    "٣٤٥ ²³ ½ Ⅻ १२३ 1,000,000",
    "👨‍👩‍👧 👍🏽 🇫🇷",
    "line one\r\nline two\r\n\r\n",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "================================================================================",
    "a, b,, c,1,22 ,333",
    # Bytes the SmolLM2 vocabulary has no token for (0x04; 0xF1 leads U+40000):
    # they become the unknown token.
    "a\x04b \U00040000!",
]

# About 1 KB of ordinary English, also used by the speed check.
PARAGRAPH = (
    "Tokenizers turn text into the integer ids that a language model reads. A byte-level "
    "BPE tokenizer first cuts the text into pieces with a regular expression, so that "
    "words, numbers, punctuation and runs of whitespace are handled separately; then, "
    "inside each piece, it starts from single bytes and repeatedly merges the adjacent "
    "pair with the best rank until no listed merge applies. Because every byte has a "
    "token of its own, any input can be encoded, including emoji, accented letters and "
    "even bytes that are not valid UTF-8, and decoding the ids gives back exactly the "
    "original bytes. The merge ranks come from training: pairs that were frequent in the "
    "training corpus were merged first, which is why common words such as \"the\" and "
    "\"and\" end up as single tokens while rare words are split into several pieces. "
    "Special tokens like <|im_start|> and <|im_end|> mark the turns of a conversation; "
    "they are matched as whole strings before the regular expression runs, so that they "
    "are never broken apart. In 2024, small models with 135 million parameters could "
    "already answer simple questions, which makes them handy for tests."
)

ATOMS = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
         + ["the", " the", "ing", " and", "hello", "World", "  ", " ", " ", "\n", "\n\n", "\t", "\r\n", "\r"]
         + list("'.,!?;:-_()[]{}<>/\\\"`~@#$%^&*+=|")
         + ["'s", "'S", "'ll", "'LL", "'ve", "'re", "'d", "'m", "'t", "'ſ", "'\u212a"]
         + ["é", "ñ", "ü", "ç", "ß", "Å", "ﬁ", "日本語", "中", "한국어", "مرحبا", "привет", "αβγ", "नमस्ते"]
         + ["🐍", "❤️", "👍🏽", "👨‍👩‍👧", "🇫🇷", "…", "—", "“", "”", "€", "©", "\u00ad"]
         + ["٣", "²", "½", "Ⅻ", "१", "໑", "１２"]
         + ["\u00a0", "\u2009", "\u3000", "\u180e", "\u200b", "\u0085", "\u2028", "\x0b", "\x0c", "\x1c", "\x7f", "\x00"]
         + ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "<", "|>", "<repo_name>", "<filename>"])


def random_strings(n, seed=20240601):
    rng = random.Random(seed)
    return ["".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
    g = read_gguf(model)
    assert g["pre"] == "smollm", g["pre"]

    out_dir = os.path.join(HERE, "smollm2")
    os.makedirs(out_dir, exist_ok=True)
    base = build(g, variants()[0][2])
    tj = os.path.join(out_dir, "tokenizer.json")
    base.save(tj, pretty=False)
    size = os.path.getsize(tj)
    if size > MAX_TOKENIZER_JSON_BYTES:
        os.remove(tj)
        sys.exit(f"tokenizer.json would be {size} bytes (> 3 MB); not checked in")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({
            "add_bos_token": g["add_bos"],
            "add_eos_token": g["add_eos"],
            "bos_token": g["tokens"][g["bos"]],
            "eos_token": g["tokens"][g["eos"]],
            "unk_token": g["tokens"][g["unk"]],
        }, f, indent=2, ensure_ascii=False)
        f.write("\n")

    strings = NAMED_STRINGS + [PARAGRAPH] + random_strings(80)
    golden = {
        "generator": f"make_golden.py with tokenizers {tokenizers.__version__}",
        "model": os.path.basename(model),
        "bos_id": g["bos"], "eos_id": g["eos"], "unk_id": g["unk"],
        "add_bos": g["add_bos"], "add_eos": g["add_eos"],
        "vocab_size": len(g["tokens"]),
        "paragraph_index": len(NAMED_STRINGS),
        "strings": strings,
        "variants": [],
    }
    for name, pre, pre_tokenizer, ignore_merges, *normalizer in variants():
        normalizer = normalizer[0] if normalizer else None
        tok = build(g, pre_tokenizer, ignore_merges, normalizer)
        ids = [tok.encode(s, add_special_tokens=False).ids for s in strings]
        for s, i in zip(strings, ids):
            if pre is not None and g["unk"] not in i and normalizer is None:
                assert tok.decode(i, skip_special_tokens=False) == s, (name, s)
        golden["variants"].append({
            "name": name,
            "pre": pre,
            "pre_tokenizer": json.loads(tok.to_str())["pre_tokenizer"],
            "normalizer": json.loads(tok.to_str())["normalizer"],
            "ignore_merges": ignore_merges,
            "ids": ids,
            # Hugging Face's decode with skip_special_tokens=True, for the smollm pipeline.
            "decoded_skip_special": [tok.decode(i, skip_special_tokens=True) for i in ids]
            if name == "smollm" else None,
        })
    with open(os.path.join(HERE, "golden.json"), "w") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"tokenizer.json: {size} bytes; {len(strings)} strings x {len(golden['variants'])} variants")


if __name__ == "__main__":
    main()
