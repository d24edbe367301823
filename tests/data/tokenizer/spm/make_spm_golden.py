#!/usr/bin/env python3
"""Golden data for the SentencePiece-style tokenizer tests (tests/core/tokenizer/spm_*_test.cpp).

Vocabularies:
  mistral/   the real Mistral 7B v0.1 SentencePiece model (tokenizer.model.v1, shipped by the
             PyPI package mistral-common, Apache-2.0) and its tokenizer.json as transformers'
             LlamaConverter writes it (legacy=True: Prepend + Replace normalizer).
  llama2/    a small BPE model trained here with Llama 2's SentencePiece settings (byte_fallback,
             split_digits, add_dummy_prefix, identity normalization, no whitespace removal):
             tokenizer.model, tokenizer.json (LlamaConverter legacy=False: Metaspace "first"),
             llama2.gguf (vocabulary only, as llama.cpp's converter writes a "llama" vocabulary).
  gemma/     trained with Gemma's settings (no dummy prefix, byte_fallback, user-defined pieces for
             whitespace runs and turn markers, pad/eos/bos/unk = 0/1/2/3): tokenizer.model,
             tokenizer.json (GemmaConverter), gemma.gguf (add_space_prefix = false).
  phi3/      Llama 2 settings plus Phi-3's chat tokens as control tokens after the vocabulary:
             tokenizer.model-free; tokenizer.json + tokenizer_config.json (tokenizer_class
             LlamaTokenizer, legacy false: transformers 5 rebuilds the pipeline as Metaspace "first").
  ../../models/mistral_spm/  tokenizer.json + tokenizer.model (320 pieces) for the tiny Mistral fixture.

golden.json lists, per case (a file to load and how), the ids and decoded texts of the reference
implementation for every test string:
  - .model and .gguf cases: the `sentencepiece` package, with control tokens in the text cut out
    first and every stretch between them encoded on its own (as llama.cpp does), BOS first;
    decode is sentencepiece's (control tokens dropped).
  - tokenizer.json cases: Hugging Face `tokenizers` (Tokenizer.from_file), or transformers'
    AutoTokenizer for directories with a tokenizer_config.json.

Usage: python3 make_spm_golden.py   (needs sentencepiece, tokenizers, transformers, gguf,
mistral-common, protobuf; tested with sentencepiece 0.2.3, tokenizers 0.23.3,
transformers 5.24.0, gguf 0.19.0, mistral-common 1.13.1). CI reads the committed files only.
"""
import io
import json
import os
import random
import shutil

import mistral_common
import numpy as np
import sentencepiece as spm
import tokenizers
import transformers
from gguf import GGUFWriter, TokenType
from sentencepiece import sentencepiece_model_pb2 as pb
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import AutoTokenizer
from transformers.tokenization_utils_base import generate_merges

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
FIXTURE = os.path.join(ROOT, "tests", "data", "models", "mistral_spm")
SPACE = "\u2581"

# Hard strings: whitespace runs, leading spaces, tabs and newlines, emoji with ZWJ, CJK, Cyrillic,
# Khmer, digit runs, special tokens inside text, text that needs byte fallback.
STRINGS = [
    "",
    "Hello",
    " Hello",
    "  Hello",
    "Hello world",
    "Hello  world",
    "Hello   world   ",
    "The capital of France is Paris.",
    "\tTabbed\tline\n",
    "line one\nline two\n\nline four",
    "\n\n\nnewlines first",
    " \n \t mixed whitespace \t\n",
    "    four leading spaces",
    "trailing spaces    ",
    "Digits: 1234567890 and 3.14159, 2024-11-27",
    "0000 1111 99999999999",
    "Привет, мир! Как дела?",
    "日本語のテキストと中文文本",
    "한국어 텍스트",
    "ភាសាខ្មែរ",
    "مرحبا بالعالم",
    "emoji 😀 family 👨‍👩‍👧‍👦 flag 🏳️‍🌈 skin 👍🏽",
    "rare chars: ☃ ∮ ⅋ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "café naïve résumé Ångström",
    "snake_case_name = camelCaseName(42)",
    "<s>starts with BOS",
    "text</s>then EOS",
    "a <s> b </s> c",
    "<unk> unknown marker",
    "▁already▁escaped ▁",
    "tab\there",
    "x",
    " ",
    "  ",
    "\n",
    "https://example.com/path?q=1&r=2#frag",
    "def f(x):\n    return x * 2\n",
    "Mixed 日本 English Русский 123",
]
GEMMA_EXTRA = ["<start_of_turn>user\nHi<end_of_turn>\n", "a    b", "x\n\ny"]
PHI3_EXTRA = ["<|user|>\nHello<|end|>\n<|assistant|>", "word<|end|>word", "<|user|> \n Hi <|end|>  \n<|assistant|>  x",
              "a \t<|system|>  b", "<|system|>\u3000wide space"]


def corpus(english_only=False):
    """A deterministic training corpus: licence texts, plus other scripts unless english_only."""
    rnd = random.Random(1234)
    lines = []
    for name in ("GPL-3", "Apache-2.0"):
        with open(os.path.join("/usr/share/common-licenses", name), encoding="utf-8") as f:
            lines += [l.rstrip("\n") for l in f if l.strip()]
    if english_only:
        return lines
    extra = [
        "Привет, как дела? Сегодня хорошая погода, и мы идём гулять в парк.",
        "Москва является столицей России. Мир, труд, май.",
        "日本語のテキストです。東京は日本の首都です。今日はいい天気ですね。",
        "中文文本示例。北京是中国的首都。我们今天去公园散步。",
        "한국어 텍스트입니다. 서울은 한국의 수도입니다.",
        "ភាសាខ្មែរ គឺជាភាសាផ្លូវការនៃប្រទេសកម្ពុជា។",
        "مرحبا بالعالم. القاهرة عاصمة مصر.",
        "Numbers 1234567890, 3.14159, 2024-11-27, 1000000.",
        "def main():\n    return 0",
        "emoji 😀 😃 😄 🎉 👍",
        "\tindented with a tab",
        "    indented with four spaces",
        "The capital of France is Paris. The capital of Italy is Rome.",
    ]
    for _ in range(30):
        lines += extra
    rnd.shuffle(lines)
    return lines


def train(prefix, vocab_size, english_only=False, **kw):
    model = io.BytesIO()
    settings = dict(
        model_type="bpe", vocab_size=vocab_size, character_coverage=0.9995, byte_fallback=True,
        split_digits=True, allow_whitespace_only_pieces=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, num_threads=1, max_sentence_length=100000,
        minloglevel=2)
    settings.update(kw)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus(english_only)), model_writer=model, **settings)
    return model.getvalue()


def proto_of(data):
    m = pb.ModelProto()
    m.ParseFromString(data)
    return m


def hf_bpe(m, legacy, gemma=False, extra_special=()):
    """tokenizer.json for SentencePiece model proto `m`, as transformers' converters write it."""
    vocab = {p.piece: i for i, p in enumerate(m.pieces)}
    scores = {p.piece: p.score for p in m.pieces}
    merges = generate_merges(vocab, scores)
    unk = m.pieces[m.trainer_spec.unk_id].piece
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True, byte_fallback=True))
    t.add_tokens([AddedToken(p.piece, normalized=False, special=p.type in (2, 3) or p.piece in extra_special)
                  for p in m.pieces if p.type in (2, 3, 4)])
    dec = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if gemma:
        t.normalizer = normalizers.Replace(" ", SPACE)
    elif legacy:
        t.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
        dec.append(decoders.Strip(" ", 1, 0))
    else:
        t.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
        dec.append(decoders.Strip(" ", 1, 0))
    t.decoder = decoders.Sequence(dec)
    bos = m.pieces[m.trainer_spec.bos_id].piece
    t.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, m.trainer_spec.bos_id)])
    return t


def write_gguf(path, m, add_space_prefix):
    w = GGUFWriter(path, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([p.piece.encode("utf-8") for p in m.pieces])
    w.add_token_scores([p.score for p in m.pieces])
    w.add_token_types([int(p.type) for p in m.pieces])  # SentencePiece types are llama.cpp's
    ts = m.trainer_spec
    w.add_bos_token_id(ts.bos_id)
    w.add_eos_token_id(ts.eos_id)
    w.add_unk_token_id(ts.unk_id)
    if ts.pad_id >= 0:
        w.add_pad_token_id(ts.pad_id)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def spm_reference(sp, m, text):
    """sentencepiece ids with control tokens cut out of the text first (llama.cpp's way), BOS first."""
    controls = sorted({p.piece for p in m.pieces if p.type in (2, 3)}, key=len, reverse=True)
    ids = [m.trainer_spec.bos_id]
    pos = 0
    seg_start = 0
    while pos < len(text):
        hit = next((c for c in controls if text.startswith(c, pos)), None)
        if hit is None:
            pos += 1
            continue
        if pos > seg_start:
            ids += sp.encode(text[seg_start:pos])
        ids.append(sp.piece_to_id(hit))
        pos += len(hit)
        seg_start = pos
    if seg_start < len(text):
        ids += sp.encode(text[seg_start:])
    return ids


def spm_case(name, path, kind, sp, m, strings):
    entries = []
    for s in strings:
        ids = spm_reference(sp, m, s)
        # sentencepiece decodes the unknown token as " \u2047 ", where llama.cpp, Hugging Face and we
        # give its text: no reference to compare with.
        decoded = None if m.trainer_spec.unk_id in ids else sp.decode(ids)
        entries.append({"text": s, "ids": ids, "decoded": decoded})
    return {"name": name, "path": path, "kind": kind, "skip_special_decode": True, "entries": entries}


def hf_case(name, path, kind, tok, strings):
    entries = []
    for s in strings:
        if isinstance(tok, Tokenizer):
            ids = tok.encode(s).ids
            decoded = tok.decode(ids, skip_special_tokens=False)
        else:
            ids = tok.encode(s)
            decoded = tok.decode(ids, skip_special_tokens=False)
        entries.append({"text": s, "ids": ids, "decoded": decoded})
    return {"name": name, "path": path, "kind": kind, "skip_special_decode": False, "entries": entries}


def rel(p):
    return os.path.relpath(p, os.path.join(ROOT, "tests", "data"))


def main():
    cases = []

    # ---- Mistral 7B v0.1: the real vocabulary ----
    d = os.path.join(HERE, "mistral")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(os.path.dirname(mistral_common.__file__), "data", "tokenizer.model.v1")
    shutil.copy(src, os.path.join(d, "tokenizer.model"))
    data = open(src, "rb").read()
    m = proto_of(data)
    sp = spm.SentencePieceProcessor(model_proto=data)
    hf_bpe(m, legacy=True).save(os.path.join(d, "tokenizer.json"), pretty=False)
    cases.append(spm_case("mistral.model", rel(os.path.join(d, "tokenizer.model")), "sentencepiece", sp, m, STRINGS))
    cases.append(hf_case("mistral.json", rel(os.path.join(d, "tokenizer.json")), "tokenizer.json",
                         Tokenizer.from_file(os.path.join(d, "tokenizer.json")), STRINGS))

    # ---- Llama 2 settings, trained ----
    d = os.path.join(HERE, "llama2")
    os.makedirs(d, exist_ok=True)
    data = train("llama2", 1200)
    open(os.path.join(d, "tokenizer.model"), "wb").write(data)
    m = proto_of(data)
    sp = spm.SentencePieceProcessor(model_proto=data)
    hf_bpe(m, legacy=False).save(os.path.join(d, "tokenizer.json"), pretty=False)
    write_gguf(os.path.join(d, "llama2.gguf"), m, True)
    cases.append(spm_case("llama2.model", rel(os.path.join(d, "tokenizer.model")), "sentencepiece", sp, m, STRINGS))
    cases.append(spm_case("llama2.gguf", rel(os.path.join(d, "llama2.gguf")), "gguf", sp, m, STRINGS))
    cases.append(hf_case("llama2.json", rel(os.path.join(d, "tokenizer.json")), "tokenizer.json",
                         Tokenizer.from_file(os.path.join(d, "tokenizer.json")), STRINGS))

    # ---- Gemma settings, trained ----
    d = os.path.join(HERE, "gemma")
    os.makedirs(d, exist_ok=True)
    user = ["<start_of_turn>", "<end_of_turn>", "\n\n", "  ", "    ", "\t\t"]
    data = train("gemma", 1200, add_dummy_prefix=False, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
                 user_defined_symbols=user)
    open(os.path.join(d, "tokenizer.model"), "wb").write(data)
    m = proto_of(data)
    sp = spm.SentencePieceProcessor(model_proto=data)
    hf_bpe(m, legacy=False, gemma=True).save(os.path.join(d, "tokenizer.json"), pretty=False)
    write_gguf(os.path.join(d, "gemma.gguf"), m, False)
    gemma_strings = STRINGS + GEMMA_EXTRA
    cases.append(spm_case("gemma.model", rel(os.path.join(d, "tokenizer.model")), "sentencepiece", sp, m,
                          gemma_strings))
    cases.append(spm_case("gemma.gguf", rel(os.path.join(d, "gemma.gguf")), "gguf", sp, m, gemma_strings))
    cases.append(hf_case("gemma.json", rel(os.path.join(d, "tokenizer.json")), "tokenizer.json",
                         Tokenizer.from_file(os.path.join(d, "tokenizer.json")), gemma_strings))

    # ---- Phi-3: Llama 2 settings, chat tokens, tokenizer_config.json as Phi-3 ships it ----
    d = os.path.join(HERE, "phi3")
    os.makedirs(d, exist_ok=True)
    chat = ["<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>", "<|system|>"]
    data = train("phi3", 1200, control_symbols=chat)
    m = proto_of(data)
    # As in Phi-3's own file, the chat tokens swallow the whitespace after them (rstrip); one also
    # swallows the whitespace before it (lstrip).
    j = json.loads(hf_bpe(m, legacy=True).to_str())
    for a in j["added_tokens"]:
        if a["content"] in chat[1:]:
            a["rstrip"] = True
        if a["content"] == "<|system|>":
            a["lstrip"] = True
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    t = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    json.dump({"tokenizer_class": "LlamaTokenizer", "legacy": False, "add_bos_token": True, "add_eos_token": False,
               "bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"},
              open(os.path.join(d, "tokenizer_config.json"), "w"), indent=2)
    auto = AutoTokenizer.from_pretrained(d)
    cases.append(hf_case("phi3.auto", rel(d), "auto", auto, STRINGS + PHI3_EXTRA))
    cases.append(hf_case("phi3.json", rel(os.path.join(d, "tokenizer.json")), "tokenizer.json-only", t,
                         STRINGS + PHI3_EXTRA))

    # ---- the tiny Mistral fixture: exactly 320 pieces ----
    data = train("fixture", 320, english_only=True, character_coverage=0.98)
    m = proto_of(data)
    assert len(m.pieces) == 320, len(m.pieces)
    open(os.path.join(FIXTURE, "tokenizer.model"), "wb").write(data)
    hf_bpe(m, legacy=True).save(os.path.join(FIXTURE, "tokenizer.json"), pretty=False)
    sp = spm.SentencePieceProcessor(model_proto=data)
    cases.append(spm_case("fixture.model", rel(os.path.join(FIXTURE, "tokenizer.model")), "sentencepiece", sp, m,
                          STRINGS))

    with open(os.path.join(HERE, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "make_spm_golden.py",
                   "versions": {"sentencepiece": spm.__version__, "tokenizers": tokenizers.__version__,
                                "transformers": transformers.__version__},
                   "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
