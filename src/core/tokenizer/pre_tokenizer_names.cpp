// The pipelines behind llama.cpp's tokenizer.ggml.pre names (what
// convert_hf_to_gguf.py writes for byte-level BPE vocabularies, and what
// llama-vocab.cpp accepts). Each name maps to the pre-tokenizer of the Hugging
// Face tokenizer.json its family ships; where llama.cpp rewrote a pattern for
// its own regex engine (the "(?i:'s|...)" contractions spelled "'[sS]", the
// possessive quantifiers of Ling/Bailing made greedy, the Tekken and GPT-4o
// classes expanded into lookaheads) the original is used here, and where a
// family's tokenizer.json normalizes (NFC) so does the pipeline.
#include <nnsight/error.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer_pipeline.h"

namespace nnsight {
namespace {

// ---- the patterns, as the families' tokenizer.json files spell them ----

// OpenAI cl100k (Llama 3, DBRX, GLM-4, Smaug).
const char* const kCl100k = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
                            R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: cl100k with one digit per piece.
const char* const kQwen2 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
                           R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: Qwen2 with combining marks kept in words.
const char* const kQwen35 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|)"
                            R"( ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// OpenAI o200k (GPT-4o, Llama 4): case-aware words with their contraction.
const char* const kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Mistral Tekken (mistral-common's tekken.json "pattern").
const char* const kTekken = R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
                            R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
                            R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Tiny Aya / Cohere2 MoE: o200k behind a digit grouping from the right.
const char* const kTinyAyaDigits = R"(\d{1,3}(?=(?:\d{3})*\b))";
// Kimi K2 (tiktoken pattern of tokenization_kimi.py). Its classes
// "[...&&[^\p{Han}]]" (class intersection) are written as a negative
// lookahead before the class, which matches the same characters.
const char* const kKimiK2 =
    R"([\p{Han}]+|)"
    R"([^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Jais 2: cl100k with whitespace runs cut into power-of-two pieces.
const char* const kJais2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|)"
    R"(\s{1,2}(?!\S)|\s{1})";
// Ling / Bailing MoE (possessive quantifiers: PCRE2 has them too).
const char* const kBailing = R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}|)"
                             R"( ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
const char* const kSeedCoder = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}|)"
                               R"( ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kExaoneMoe =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)";
const char* const kMiniCpm5Words = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+|)"
                                   R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Youtu (llama.cpp's spelling; the family's file was not available to compare).
const char* const kYoutuWords =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kYoutuCjk =
    "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}\\x{2019}\\x{2014}"
    "\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+|[\\x{3105}-\\x{312F}]+|"
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+";
// DeepSeek LLM: cased letters (an explicit list), ASCII/fullwidth
// punctuation, trailing whitespace, CJK/Hangul runs.
const char* const kDeepSeekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{"
    "2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
    "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{"
    "13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{"
    "1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{"
    "1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{"
    "1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{"
    "210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{"
    "2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{"
    "2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{"
    "A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{"
    "10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-"
    "\\x{118DF}\\x{1E900}-\\x{1E943}]+";
const char* const kDeepSeekPunct =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";
const char* const kDeepSeekCjk = "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
// DeepSeek V3 (and Hunyuan dense, JoyAI, HY v4, Spark 2.5).
const char* const kHanKana = "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+";
const char* const kDeepSeekV3Words = R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|)"
                                     R"([^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|)"
                                     R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kSpark25Words = R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|)"
                                  R"([^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)";
// BLOOM and its kin: anything but whitespace and a few sentence marks, with
// an optional leading space (tokenizer.json nests "[.,!?...]" inside the
// class; Oniguruma reads that as a union, spelled out flat here).
const char* const kBloom = " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+";
// Qwen2 without the English contractions (Turkish suffixes stay attached).
const char* const kUfakzeka = R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Hugging Face's Punctuation pre-tokenizer: Unicode punctuation plus the
// ASCII symbols Rust counts as punctuation.
const char* const kPunctuationRun = R"([\p{P}\$\+<=>\^~\|`]+)";

struct Family {
  std::vector<const char*> names;
  std::vector<const char*> patterns;  // Isolated splits, in order
  bool ignore_merges = false;
  UnicodeNormalization normalization = UnicodeNormalization::kNone;
  // Patterns from this index on see the byte alphabet (they come after a
  // ByteLevel step in tokenizer.json); npos: none do.
  size_t byte_level_from = std::string::npos;
};

const std::vector<Family>& families() {
  static const std::vector<Family> table = [] {
    const UnicodeNormalization nfc = UnicodeNormalization::kNfc;
    std::vector<Family> t;
    // ByteLevel(use_regex) alone: GPT-2 and the GPT-NeoX tokenizers.
    t.push_back({{"gpt2", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                  "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "olmo", "jais",
                  "trillion", "granite-docling"},
                 {kGpt2SplitPattern}});
    // MPT ships GPT-NeoX-20B's tokenizer.json, whose normalizer is NFC.
    t.push_back({{"mpt"}, {kGpt2SplitPattern}, false, nfc});
    // Digits(individual_digits) then ByteLevel(use_regex).
    t.push_back({{"smollm", "starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
                 {R"(\p{N})", kGpt2SplitPattern}});
    // Command-R's tokenizer.json adds an NFC normalizer.
    t.push_back({{"command-r"}, {R"(\p{N})", kGpt2SplitPattern}, false, nfc});
    t.push_back(
        {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
         {kCl100k},
         true});
    t.push_back({{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kCl100k}});
    t.push_back({{"jais-2"}, {kJais2}});
    t.push_back({{"qwen2"}, {kQwen2}, false, nfc});
    t.push_back(
        {{"deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"}, {kQwen2}});
    t.push_back({{"qwen35"}, {kQwen35}, false, nfc});
    t.push_back({{"ufakzeka"}, {kUfakzeka}});
    t.push_back({{"minicpm5"}, {R"(\p{N}{1,3})", kMiniCpm5Words}, true});
    t.push_back({{"laguna"}, {R"([^\n]+|[\n]+)", kQwen2}});
    t.push_back(
        {{"deepseek-llm"}, {R"([\r\n])", kDeepSeekLetters, kDeepSeekPunct, R"(\s+$)", kDeepSeekCjk, R"(\p{N}+)"}});
    t.push_back({{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepSeekCjk, R"(\p{N})"}});
    t.push_back(
        {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, {R"(\p{N}{1,3})", kHanKana, kDeepSeekV3Words}});
    t.push_back({{"spark2_5"}, {R"(\p{N}{1,3})", kHanKana, kSpark25Words, R"(\p{N})"}});
    t.push_back({{"youtu"}, {kYoutuCjk, kYoutuWords}, true});
    // Falcon: Punctuation, ByteLevel(use_regex), then Digits and a split into
    // groups of three ASCII digits -- those two after ByteLevel, so on the
    // byte alphabet (where, e.g., the byte 0xB2 of "в" reads as the digit "²").
    t.push_back({{"falcon"},
                 {kPunctuationRun, kGpt2SplitPattern, R"(\p{N}+)", "[0-9][0-9][0-9]"},
                 false,
                 UnicodeNormalization::kNone,
                 2});
    t.push_back({{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}});
    t.push_back({{"viking"}, {kBloom, R"(\p{N})"}});
    t.push_back({{"tekken"}, {kTekken}, true});
    t.push_back({{"chameleon"},
                 {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", R"(\p{N})",
                  R"([\p{P}!-/:-@\[-`{-~])", kGpt2SplitPattern}});
    t.push_back({{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kO200k}});
    t.push_back({{"tiny_aya", "cohere2moe"}, {kTinyAyaDigits, kO200k}});
    t.push_back({{"kimi-k2"}, {kKimiK2}});
    t.push_back({{"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}});
    t.push_back({{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailing}});
    t.push_back({{"seed-coder"}, {kSeedCoder}});
    t.push_back({{"exaone-moe"}, {kExaoneMoe}});
    // llama.cpp's fallback for a BPE vocabulary it does not recognise.
    t.push_back({{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2SplitPattern, R"(\p{N}+)", "[0-9][0-9][0-9]"}});
    return t;
  }();
  return table;
}

// Names llama.cpp knows that this tokenizer does not run, and why.
struct Refused {
  const char* name;
  const char* why;
};
const Refused kRefused[] = {
    {"gemma4", "SentencePiece-style BPE on raw UTF-8 (no byte alphabet)"},
    {"granite-embed-multi-311m", "SentencePiece-style BPE on raw UTF-8 (no byte alphabet)"},
    {"sarvam-moe", "SentencePiece-style BPE on raw UTF-8 (no byte alphabet)"},
    {"whitespace", "a whitespace-split vocabulary without the byte alphabet"},
    {"granite-embed-multi-97m", "an embedding model's tokenizer"},
    {"afmoe", "a custom digit grouping llama.cpp implements in code, with no regex to run"},
};

}  // namespace

std::vector<std::string> TokenizerPipeline::known_pre_names() {
  std::vector<std::string> names;
  for (const Family& f : families()) names.insert(names.end(), f.names.begin(), f.names.end());
  return names;
}

TokenizerPipeline TokenizerPipeline::for_pre_name(const std::string& name) {
  for (const Family& f : families()) {
    for (const char* n : f.names) {
      if (name != n) continue;
      TokenizerPipeline p;
      for (size_t i = 0; i < f.patterns.size(); ++i) {
        PreTokenizeStep step = PreTokenizeStep::split(f.patterns[i]);
        step.byte_level_view = i >= f.byte_level_from;
        p.add_step(std::move(step));
      }
      p.ignore_merges = f.ignore_merges;
      p.normalization = f.normalization;
      return p;
    }
  }
  for (const Refused& r : kRefused) {
    if (name == r.name) {
      throw LoadError("tokenizer: pre-tokenizer '" + name + "' is not supported: " + r.why);
    }
  }
  std::string known;
  for (const std::string& n : known_pre_names()) known += (known.empty() ? "" : ", ") + n;
  throw LoadError("tokenizer: unknown pre-tokenizer '" + name + "' (tokenizer.ggml.pre); known: " + known);
}

}  // namespace nnsight
