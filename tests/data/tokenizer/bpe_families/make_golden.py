#!/usr/bin/env python3
"""Golden data for tests/core/tokenizer/bpe_families_test.cpp: token ids from
Hugging Face `tokenizers` for the byte-level BPE families llama.cpp names in
tokenizer.ggml.pre.

huggingface.co is not reachable from here, so each family's tokenizer is
rebuilt in `tokenizers` from its tokenizer.json configuration -- the exact
normalizer, pre_tokenizer (Split regexes, Digits, Punctuation, ByteLevel
settings), decoder and post_processor (BOS template) -- with a small
vocabulary trained by `tokenizers`' own BPE trainer on TRAIN_TEXT (the hard
corpus below plus some ordinary English and code) -- except Tekken, which
gets the first TEKKEN_RANKS ranks of its real vocabulary from the
`mistral-common` package. For each family this writes

  <family>/tokenizer.json   as `tokenizers` saves it
  <family>/tokenizer.gguf   the same vocabulary as llama.cpp's converter stores
                            it (tokenizer.ggml.model = gpt2, the llama.cpp
                            pre name, tokens, merges, token types, BOS)
  golden.json               per family: the strings, the ids `tokenizers`
                            gives (with special tokens), and its decode

The C++ test loads both files and checks that both give these ids and decode
back. Regenerate with

  python3 -m venv ~/.cache/nnsight/pretok-venv
  ~/.cache/nnsight/pretok-venv/bin/pip install tokenizers==0.23.3 gguf==0.19.0 mistral-common==1.13.1
  ~/.cache/nnsight/pretok-venv/bin/python tests/data/tokenizer/bpe_families/make_golden.py
"""
import json
import os
import random
import sys

import gguf
import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers as pt
from tokenizers import processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB_SIZE = 1200
# Tekken is the one family whose real vocabulary ships on PyPI (mistral-common).
TEKKEN_RANKS = 6000

# ---- the families' patterns, as their tokenizer.json / tiktoken files spell them ----
CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
CL100K = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN35 = (CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
O200K = (r"[^\r\n\p{L}\p{N}]?" + UPPER + "*" + LOWER + "+" + CONTRACTIONS + "?|"
         r"[^\r\n\p{L}\p{N}]?" + UPPER + "+" + LOWER + "*" + CONTRACTIONS + "?|"
         r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?" + UPPER + "*" + LOWER + "+|" r"[^\r\n\p{L}\p{N}]?" + UPPER + "+" + LOWER + "*|"
          r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Kimi K2's tiktoken pattern, with Oniguruma class intersection.
K2_UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
K2_LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
KIMI_K2 = (r"[\p{Han}]+|[^\r\n\p{L}\p{N}]?" + K2_UPPER + "*" + K2_LOWER + "+" + CONTRACTIONS + "?|"
           r"[^\r\n\p{L}\p{N}]?" + K2_UPPER + "+" + K2_LOWER + "*" + CONTRACTIONS + "?|"
           r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BAILING = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]"
           r"|\s+(?!\S)|\s+")
SEED_CODER = (CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+")
EXAONE_MOE = (CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?"
              r"|\s*[\r\n]|\s+(?!\S)|\s+")
JAIS2 = (CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
         + "|".join(r"\s{%d}(?!\S)" % n for n in (512, 256, 128, 64, 32, 16, 8, 4)) + r"|\s{1,2}(?!\S)|\s{1}")
TINY_AYA_DIGITS = r"\d{1,3}(?=(?:\d{3})*\b)"
# DeepSeek LLM's cased-letter class: Unicode ranges, written out.
DS_LETTER_RANGES = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF),
    (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377), (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386),
    (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B),
    (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D), (0x1F20, 0x1F45), (0x1F48, 0x1F4D),
    (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4),
    (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB),
    (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128), (0x212A, 0x212D),
    (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149), (0x214E, 0x214E), (0x2183, 0x2184),
    (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B),
    (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17),
    (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
]
DS_LETTERS = r"\s?[" + "".join(chr(a) if a == b else chr(a) + "-" + chr(b) for a, b in DS_LETTER_RANGES) + "]+"
DS_PUNCT = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"
DS_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
HAN_KANA = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
DS_V3 = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
         r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# BLOOM's pattern, with the nested class its tokenizer.json has.
BLOOM = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+"


def split(pattern, behavior="isolated"):
    return pt.Split(Regex(pattern), behavior)


def byte_level(use_regex):
    return pt.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=use_regex)


def splits_then_bytes(*patterns):
    return pt.Sequence([split(p) for p in patterns] + [byte_level(False)])


# name, llama.cpp pre name, normalizer, pre_tokenizer, ignore_merges, special tokens, BOS (added by the
# post-processor), whether a tokenizer.json of the family exists (Kimi K2 ships tiktoken files only)
FAMILIES = [
    ("gpt2", "gpt-2", None, byte_level(True), False, ["<|endoftext|>"], None, True),
    ("gpt_neox", "mpt", normalizers.NFC(), byte_level(True), False, ["<|endoftext|>", "<|padding|>"], None, True),
    ("olmo", "olmo", None, byte_level(True), False, ["<|endoftext|>", "<|padding|>"], None, True),
    ("starcoder", "starcoder", None, pt.Sequence([pt.Digits(individual_digits=True), byte_level(True)]), False,
     ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>"], None, True),
    ("command_r", "command-r", normalizers.NFC(),
     pt.Sequence([pt.Digits(individual_digits=True), byte_level(True)]), False,
     ["<BOS_TOKEN>", "<EOS_TOKEN>", "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>"],
     "<BOS_TOKEN>", True),
    ("llama3", "llama-bpe", None, splits_then_bytes(CL100K), True,
     ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
     "<|begin_of_text|>", True),
    ("dbrx", "dbrx", None, splits_then_bytes(CL100K), False, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None,
     True),
    ("qwen2", "qwen2", normalizers.NFC(), splits_then_bytes(QWEN2), False,
     ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>"], None, True),
    ("qwen35", "qwen35", normalizers.NFC(), splits_then_bytes(QWEN35), False,
     ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, True),
    ("deepseek_llm", "deepseek-llm", None,
     pt.Sequence([split(r"[\r\n]"), split(DS_LETTERS), split(DS_PUNCT), split(r"\s+$"), split(DS_CJK),
                  pt.Digits(individual_digits=False), byte_level(False)]), False,
     ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"], "<｜begin▁of▁sentence｜>", True),
    ("deepseek_coder", "deepseek-coder", None,
     pt.Sequence([split(r"[\r\n]"), split(r"\s?\p{L}+"), split(r"\s?\p{P}+"), split(DS_CJK),
                  pt.Digits(individual_digits=True), byte_level(False)]), False,
     ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜fim▁hole｜>"], "<｜begin▁of▁sentence｜>", True),
    ("deepseek_v3", "deepseek-v3", None, splits_then_bytes(r"\p{N}{1,3}", HAN_KANA, DS_V3), False,
     ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"], "<｜begin▁of▁sentence｜>", True),
    ("falcon", "falcon", None,
     pt.Sequence([pt.Punctuation("contiguous"), byte_level(True), pt.Digits(individual_digits=False),
                  split("[0-9][0-9][0-9]")]), False, [">>TITLE<<", ">>ABSTRACT<<", "<|endoftext|>"], None, True),
    ("tekken", "tekken", None, splits_then_bytes(TEKKEN), True,
     ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
      "[/TOOL_RESULTS]", "[TOOL_CALLS]"], "<s>", True),
    ("gpt4o", "gpt-4o", None, splits_then_bytes(O200K), False, ["<|endoftext|>", "<|im_start|>"], None, True),
    ("tiny_aya", "tiny_aya", None, splits_then_bytes(TINY_AYA_DIGITS, O200K), False, ["<BOS_TOKEN>"],
     "<BOS_TOKEN>", True),
    ("bloom", "bloom", None, splits_then_bytes(BLOOM), False, ["<unk>", "<s>", "</s>", "<pad>"], None, True),
    ("kimi_k2", "kimi-k2", None, splits_then_bytes(KIMI_K2), False, ["[BOS]", "[EOS]", "<|im_user|>"], None, False),
    ("superbpe", "superbpe", None, splits_then_bytes(r"\p{N}+", r"(?=(\d{3})+(?!\d))"), False, ["<|endoftext|>"],
     None, True),
    ("bailingmoe", "bailingmoe", None, splits_then_bytes(BAILING), False, ["<|startoftext|>", "<|endoftext|>"], None,
     True),
    ("seed_coder", "seed-coder", None, splits_then_bytes(SEED_CODER), False, ["<[begin▁of▁sentence]>"], None, True),
    ("exaone_moe", "exaone-moe", None, splits_then_bytes(EXAONE_MOE), False, ["[BOS]", "<|endofturn|>"], None, True),
    ("jais2", "jais-2", None, splits_then_bytes(JAIS2), False, ["<|endoftext|>"], None, True),
]

# ---- the hard corpus ----
STRINGS = [
    "The capital of France is Paris.",
    "Hello world",
    " leading space",
    "   three leading spaces and trailing   ",
    "tabs\tand\t\ttabs\t",
    "line one\nline two\n\n\nline five\r\nwindows\r\n",
    "a  b   c    d     e      f" + " " * 20 + "g",
    "indented:\n    four\n        eight\n\t\tmixed \t \n",
    "It's I'LL we've they'RE don't she'd I'm y'all 'tis",
    "x'ſ y'K z'\u212a",
    "12345 1234567 3.14159 1,000,000 0x1F 2024-06-01 007",
    "٣٤٥ ²³ ½ Ⅻ १२३ ١٢٣٤ １２３４",
    "👨\u200d👩\u200d👧\u200d👦 family, 👍🏽 thumbs, 🇫🇷 flag, ❤️ heart, 🏳️\u200d🌈",
    "日本語のテキストと中文，还有标点。カタカナ",
    "漢字だけの文章です東京都",
    "한국어 텍스트입니다. 안녕하세요!",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "ខ្ញុំស្រលាញ់ភាសាខ្មែរ",
    "नमस्ते दुनिया। हिन्दी",
    "مرحبا بالعالم، كيف حالك؟",
    "Ελληνικά: Καλημέρα κόσμε",
    "café naïve résumé Ünïcödé ÀÉÎÕÜ ß ﬁ Ω K Å",
    "decomposed: e\u0301 a\u0308 n\u0303 \u212b \u2126 and composed é ä ñ",
    "zero\u200bwidth\u200cjoiner\u200d soft\u00adhyphen \ufeffbom",
    "nbsp\u00a0thin\u2009ideo\u3000mongol\u180ee nel\u0085ls\u2028ps\u2029end",
    "controls \x00\x01\x07\x1b[0m\x7f",
    "odd \ufffe\uffff \U0010ffff \ue000 \U000e0001 \ufe0f",
    "combining alone \u0301\u0308 and stacked a\u0301\u0302\u0303\u0304",
    "def add(a, b):\n    return a + b  # sum\n\n\tif x != 0x1F: print(f\"{x!r}\")\n",
    "for (int i = 0; i < n; ++i) { s += a[i] * b[i]; }  // dot",
    "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>",
    "path/to/file.txt and https://example.com/a?b=c&d=e#f",
    "!!! ??? ... --- *** ((())) [[[]]] {{{}}} ,,, ;;;",
    "CamelCaseWord HTTPServer iPhone McDonald's ALLCAPS lowercase",
    "Mixed: ABCdef GHIjkl mnoPQR stuVWX",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "================================================================",
    "",
    " ",
    "\n",
    "  \n  \n",
    "İstanbul'da Türkçe karakterler: ğüşıöç",
    "Ça va? Où est l'hôtel? C'est l'été!",
]
PARAGRAPH = (
    "Tokenizers turn text into the integer ids that a language model reads. A byte-level "
    "BPE tokenizer first cuts the text into pieces with a regular expression, so that "
    "words, numbers, punctuation and runs of whitespace are handled separately; then, "
    "inside each piece, it starts from single bytes and repeatedly merges the adjacent "
    "pair with the best rank until no listed merge applies. In 2024, small models with "
    "135 million parameters could already answer simple questions.\n")


def special_strings(specials):
    a = specials[0]
    b = specials[-1]
    return [
        a + "text between" + b,
        "before " + a + " after " + b + "\n",
        a + a + b,
        "half " + a[:-1] + " not special " + a[1:],
        "x" + a + "   " + b + "y",
    ]


def random_strings(specials, n, seed):
    rng = random.Random(seed)
    atoms = (["the", " the", "ing", " and", "  ", " ", "\n", "\n\n", "\t", "\r\n", "'s", "'LL", "'ſ", "123",
              "4567", "é", "e\u0301", "日本", "中文", "한국", "привет", "ខ្មែរ", "🐍", "👍🏽", "👨\u200d👩\u200d👧",
              "\u00a0", "\u3000", "\u200b", "٣", "²", "1,000", ".", "!!", "?", "/", "//", "(", ")", "->", "==",
              "Word", "WORD", "wOrd"] + specials)
    return ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 30))) for _ in range(n)]


def train_text():
    text = list(STRINGS) + [PARAGRAPH] * 20
    for root in ("/usr/lib/python3.11/json", "/usr/lib/python3.11/email"):
        for name in sorted(os.listdir(root)):
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    text.append(f.read())
    return text


def byte_level_spelling(data):
    """Bytes in the GPT-2 byte alphabet, as tokenizer.json vocabularies spell them."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = {b: chr(c) for b, c in zip(bs, cs)}
    return "".join(table[b] for b in data)


def tekken_vocab(specials):
    """The first TEKKEN_RANKS ranks of the real Tekken vocabulary (mistral-common's
    tekken_240911.json), after its 1000 special-token ids, as a BPE vocabulary with
    merges derived the way transformers converts tiktoken files: every split of a
    token into two lower-ranked tokens is a merge, ordered by the merged token's rank."""
    import base64
    import mistral_common
    path = os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    assert data["config"]["pattern"] == TEKKEN, "mistral-common's Tekken pattern changed"
    n_special = data["config"]["default_num_special_tokens"]
    ranked = [base64.b64decode(v["token_bytes"]) for v in data["vocab"][:TEKKEN_RANKS]]
    rank = {b: r for r, b in enumerate(ranked)}
    vocab = {}
    for i in range(n_special):
        vocab[specials[i] if i < len(specials) else f"<SPECIAL_{i}>"] = i
    for r, b in enumerate(ranked):
        vocab[byte_level_spelling(b)] = n_special + r
    merges = []
    for r, b in enumerate(ranked):
        if len(b) < 2:
            continue
        splits = [(rank[b[:k]], rank[b[k:]]) for k in range(1, len(b)) if b[:k] in rank and b[k:] in rank]
        for left, right in sorted(s for s in splits if s[0] < r and s[1] < r):
            merges.append((r, left, right))
    merges.sort()
    merges = [(byte_level_spelling(ranked[left]), byte_level_spelling(ranked[right])) for _, left, right in merges]
    return vocab, merges, n_special


def build(fam):
    name, pre_name, normalizer, pre, ignore_merges, specials, bos, has_json = fam
    if name == "tekken":
        return build_tekken(fam)
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, show_progress=False, special_tokens=specials,
                                  initial_alphabet=pt.ByteLevel.alphabet())
    tok.train_from_iterator(train_text(), trainer=trainer)
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=bos + " $A", pair=bos + " $A " + bos + " $B", special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    if ignore_merges:
        j = json.loads(tok.to_str())
        j["model"]["ignore_merges"] = True
        tok = Tokenizer.from_str(json.dumps(j))
    if name == "kimi_k2":
        tok = with_rank_merges(tok)
    return tok


def with_rank_merges(tok):
    """Kimi K2 is a tiktoken vocabulary: its GGUF has ranks (ids) and no merges.
    Replaces the trained merges by the ones derived from the ranks as transformers
    converts tiktoken files (every split into two lower-ranked tokens, ordered by
    the merged token's rank, then the parts' ranks)."""
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    specials = {a["content"] for a in j["added_tokens"]}
    vocab = {t: i for t, i in vocab.items() if t not in specials}  # special tokens take no part
    spelled = {i: t for t, i in vocab.items()}
    merges = []
    for t, i in vocab.items():
        for k in range(1, len(t)):
            left, right = vocab.get(t[:k]), vocab.get(t[k:])
            if left is not None and right is not None and left < i and right < i:
                merges.append((i, left, right))
    merges.sort()
    j["model"]["merges"] = [[spelled[left], spelled[right]] for _, left, right in merges]
    return Tokenizer.from_str(json.dumps(j))


def build_tekken(fam):
    name, pre_name, normalizer, pre, ignore_merges, specials, bos, has_json = fam
    vocab, merges, n_special = tekken_vocab(specials)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    special_names = [t for t, i in sorted(vocab.items(), key=lambda kv: kv[1])[:n_special]]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_names])
    tok.post_processor = processors.TemplateProcessing(
        single=bos + " $A", pair=bos + " $A " + bos + " $B", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def write_gguf(path, fam, tok):
    name, pre_name, _, _, _, specials, bos, _ = fam
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    for added in j["added_tokens"]:
        while len(tokens) <= added["id"]:
            tokens.append(None)
        tokens[added["id"]] = added["content"]
    assert all(t is not None for t in tokens)
    special_ids = {a["id"] for a in j["added_tokens"] if a["special"]}
    types = [3 if i in special_ids else 1 for i in range(len(tokens))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre_name)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if name != "kimi_k2":  # llama.cpp writes Kimi K2 without merges
        w.add_token_merges(merges)
    if bos is not None:
        w.add_bos_token_id(tokens.index(bos))
        w.add_add_bos_token(True)
    else:
        w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    golden = {"tokenizers_version": tokenizers.__version__, "families": []}
    total = 0
    for k, fam in enumerate(FAMILIES):
        name, pre_name, _, _, _, specials, bos, has_json = fam
        tok = build(fam)
        out_dir = os.path.join(HERE, name)
        os.makedirs(out_dir, exist_ok=True)
        tj = os.path.join(out_dir, "tokenizer.json")
        if has_json:
            tok.save(tj, pretty=False)
            total += os.path.getsize(tj)
        elif os.path.exists(tj):
            os.remove(tj)
        gg = os.path.join(out_dir, "tokenizer.gguf")
        write_gguf(gg, fam, tok)
        total += os.path.getsize(gg)
        strings = STRINGS + [PARAGRAPH] + special_strings(specials) + random_strings(specials, 40, seed=1000 + k)
        cases = []
        for s in strings:
            enc = tok.encode(s, add_special_tokens=True)
            cases.append({"text": s, "ids": enc.ids, "decoded": tok.decode(enc.ids, skip_special_tokens=False)})
        golden["families"].append({"name": name, "pre": pre_name, "tokenizer_json": has_json, "cases": cases})
        print(f"{name:16s} {pre_name:16s} vocab {tok.get_vocab_size():5d}  {len(cases)} strings")
    with open(os.path.join(HERE, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    total += os.path.getsize(os.path.join(HERE, "golden.json"))
    print(f"total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    sys.exit(main())
