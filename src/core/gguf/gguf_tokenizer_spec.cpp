#include "core/gguf/gguf_tokenizer_spec.h"

#include <limits>

#include <nnsight/error.hpp>

#include "core/tokenizer/rank_merges.h"

namespace nnsight {
namespace {

// A special token id, -1 when absent.
int32_t special_id(const GgufFile& f, const std::string& key, size_t vocab) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) return -1;
  int64_t id = v->as_int(f.describe_key(key));
  if (id < 0 || static_cast<uint64_t>(id) >= vocab) {
    throw LoadError(f.describe_key(key) + " = " + std::to_string(id) + " is outside the vocabulary of " +
                    std::to_string(vocab) + " tokens");
  }
  return static_cast<int32_t>(id);
}

}  // namespace

TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama") {
    throw LoadError(f.describe_key("tokenizer.ggml.model") + " = '" + model +
                    "': only byte-level BPE ('gpt2') and SentencePiece BPE ('llama') vocabularies are supported");
  }
  TokenizerSpec spec;
  spec.model = model;
  spec.tokens = f.at("tokenizer.ggml.tokens").as_string_array(f.describe_key("tokenizer.ggml.tokens"));
  if (spec.tokens.empty()) {
    throw LoadError(f.describe_key("tokenizer.ggml.tokens") + " is empty");
  }
  if (spec.tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw LoadError(f.describe_key("tokenizer.ggml.tokens") + " has too many tokens");
  }
  if (const GgufValue* m = f.find("tokenizer.ggml.merges")) {
    spec.merges = m->as_string_array(f.describe_key("tokenizer.ggml.merges"));
  }
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    std::string what = f.describe_key("tokenizer.ggml.token_type");
    std::vector<int64_t> types = t->as_int_array(what);
    if (types.size() != spec.tokens.size()) {
      throw LoadError(what + " has " + std::to_string(types.size()) + " entries but there are " +
                      std::to_string(spec.tokens.size()) + " tokens");
    }
    spec.token_types.reserve(types.size());
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] < 0 || types[i] > 6) {
        throw LoadError(what + "[" + std::to_string(i) + "] = " + std::to_string(types[i]) +
                        " is not a token type (0 to 6)");
      }
      spec.token_types.push_back(static_cast<int32_t>(types[i]));
    }
  }
  const bool spm = model == "llama";
  if (spm) {
    // SentencePiece merges by piece score: without scores there is no order.
    const std::string what = f.describe_key("tokenizer.ggml.scores");
    const GgufValue* s = f.find("tokenizer.ggml.scores");
    if (s == nullptr) throw LoadError(what + " is missing (a 'llama' vocabulary merges by score)");
    const std::vector<double> scores = s->as_float_array(what);
    if (scores.size() != spec.tokens.size()) {
      throw LoadError(what + " has " + std::to_string(scores.size()) + " entries but there are " +
                      std::to_string(spec.tokens.size()) + " tokens");
    }
    spec.scores.assign(scores.begin(), scores.end());
    spec.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  }
  // llama.cpp treats a missing pre-tokenizer name as "default" (SentencePiece
  // vocabularies have none).
  spec.pre = f.get_string_or("tokenizer.ggml.pre", "default");
  // Kimi K2's converter stores a tiktoken vocabulary: ranks, no merges.
  if (spec.merges.empty() && spec.pre == "kimi-k2") spec.merges = merges_from_ranks(spec.tokens, spec.token_types);
  const size_t vocab = spec.tokens.size();
  spec.bos_id = special_id(f, "tokenizer.ggml.bos_token_id", vocab);
  spec.eos_id = special_id(f, "tokenizer.ggml.eos_token_id", vocab);
  spec.unk_id = special_id(f, "tokenizer.ggml.unknown_token_id", vocab);
  spec.pad_id = special_id(f, "tokenizer.ggml.padding_token_id", vocab);
  const bool llama3_pre = spec.pre == "llama3" || spec.pre == "llama-v3" || spec.pre == "llama-bpe";
  // llama.cpp: SentencePiece vocabularies add BOS unless told otherwise.
  spec.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", llama3_pre || spm);
  spec.add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", false);
  spec.chat_template = f.get_string_or("tokenizer.chat_template", "");
  return spec;
}

}  // namespace nnsight
