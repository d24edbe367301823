#include "core/gguf/gguf_eog_tokens.h"

#include <algorithm>
#include <set>

namespace nnsight {
namespace {

// llama.cpp's lists (llama-vocab.cpp, llama_vocab::impl::load): the texts
// that end generation, and the texts that stand for the fill-in-the-middle
// ids a file does not give.
const std::set<std::string>& eog_texts() {
  static const std::set<std::string> k = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>"};
  return k;
}
const std::set<std::string>& fim_pad_texts() {
  static const std::set<std::string> k = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
  return k;
}
const std::set<std::string>& fim_rep_texts() {
  static const std::set<std::string> k = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
  return k;
}
const std::set<std::string>& fim_sep_texts() {
  static const std::set<std::string> k = {"<|file_sep|>"};
  return k;
}

}  // namespace

std::vector<int64_t> llama_cpp_eog_ids(const std::vector<std::string>& tokens, const GgufSpecialIds& ids) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  auto valid = [n](int64_t id) { return id >= 0 && id < n; };
  // One pass over the vocabulary: the end-of-turn texts, and for each
  // fill-in-the-middle id the file does not give, the first token with one of
  // its texts (llama.cpp takes the first its hash map yields; a vocabulary
  // holds at most one of them in practice).
  int64_t fim[3] = {valid(ids.fim_pad) ? ids.fim_pad : -1, valid(ids.fim_rep) ? ids.fim_rep : -1,
                    valid(ids.fim_sep) ? ids.fim_sep : -1};
  const std::set<std::string>* fim_texts[3] = {&fim_pad_texts(), &fim_rep_texts(), &fim_sep_texts()};
  std::set<int64_t> eog;
  for (int64_t id = 0; id < n; ++id) {
    const std::string& text = tokens[static_cast<size_t>(id)];
    if (eog_texts().count(text)) eog.insert(id);
    for (int k = 0; k < 3; ++k)
      if (fim[k] < 0 && fim_texts[k]->count(text)) fim[k] = id;
  }
  for (int64_t id : {fim[0], fim[1], fim[2], ids.eos, ids.eot, ids.eom})
    if (valid(id)) eog.insert(id);

  auto present = [&](const char* text) -> int64_t {
    for (int64_t id : eog)
      if (tokens[static_cast<size_t>(id)] == text) return id;
    return -1;
  };
  // gpt-oss (and solar-open): <|end|> ends a message, not the generation.
  const int64_t end = present("<|end|>");
  const bool call = present("<|call|>") >= 0 || present("<|calls|>") >= 0;
  if (end >= 0 && call && (present("<|return|>") >= 0 || present("<|flush|>") >= 0)) eog.erase(end);
  // Gemma 4 and PaddleOCR: </s> is not an end there.
  const int64_t s = present("</s>");
  if (s >= 0 && present("<|tool_response>") >= 0) eog.erase(s);
  return {eog.begin(), eog.end()};
}

}  // namespace nnsight
