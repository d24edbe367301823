#include "core/tokenizer/tokenizer_pipeline.h"

#include <nnsight/error.hpp>

namespace nnsight {

const char* const kGpt2SplitPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// The Llama 3 and Qwen2 regexes as their tokenizer.json files spell them. The
// case-insensitive contractions go to PCRE2 as written: like Oniguruma (which
// Hugging Face runs), PCRE2 folds case by Unicode, so "'ſ" and "'K" (Kelvin
// sign) match as "'s" and "'k" do; llama.cpp's hand-expanded "'[sS]" differs
// there, and we follow the reference implementation of these models.
const char* const kLlama3SplitPattern = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
                                        R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2SplitPattern = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
                                       R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TokenizerPipeline of_patterns(std::initializer_list<const char*> patterns) {
  TokenizerPipeline p;
  for (const char* pattern : patterns) p.add_step(PreTokenizeStep::split(pattern));
  return p;
}

}  // namespace

TokenizerPipeline TokenizerPipeline::for_pre_name(const std::string& name) {
  if (name == "gpt2") return of_patterns({kGpt2SplitPattern});
  // Each digit on its own, then GPT-2 (Hugging Face: Sequence[Digits(individual_digits),
  // ByteLevel]).
  if (name == "smollm" || name == "starcoder" || name == "refact") {
    return of_patterns({R"(\p{N})", kGpt2SplitPattern});
  }
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") {
    return of_patterns({kLlama3SplitPattern}).set_ignore_merges(true);
  }
  if (name == "qwen2") return of_patterns({kQwen2SplitPattern});
  // llama.cpp's fallback for unrecognised BPE vocabularies: punctuation runs,
  // then GPT-2, then digit runs, then groups of three ASCII digits.
  if (name == "default") {
    return of_patterns({R"([\p{P}\$\+<=>\^~\|]+)", kGpt2SplitPattern, R"(\p{N}+)", "[0-9][0-9][0-9]"});
  }
  throw LoadError("tokenizer: unsupported pre-tokenizer '" + name +
                  "' (supported: gpt2, smollm, starcoder, refact, llama-bpe, llama3, llama-v3, qwen2, "
                  "default)");
}

}  // namespace nnsight
