#include "core/tokenizer/tokenizer_loader.h"

#include <sys/stat.h>

#include <absl/strings/match.h>

#include <nnsight/error.hpp>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_tokenizer_spec.h"
#include "core/tokenizer/sentencepiece_model.h"

namespace nnsight {

namespace {
bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
}  // namespace

namespace {
std::string tokenizer_json_for(const std::string& model_path) {
  std::string dir = model_path;
  if (!is_dir(dir)) {
    auto slash = dir.rfind('/');
    dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  }
  return dir + "/tokenizer.json";
}
// tokenizer.model beside tokenizer.json: a SentencePiece model.
std::string sentencepiece_model_for(const std::string& json_path) {
  return json_path.substr(0, json_path.size() - std::string("tokenizer.json").size()) + "tokenizer.model";
}
bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}
}  // namespace

bool model_has_tokenizer(const std::string& model_path) {
  if (absl::EndsWith(model_path, ".gguf")) return true;
  const std::string json = tokenizer_json_for(model_path);
  return exists(json) || exists(sentencepiece_model_for(json));
}

Tokenizer load_tokenizer_for_model(const std::string& model_path) {
  if (absl::EndsWith(model_path, ".gguf")) {
    GgufFile file(model_path);
    return Tokenizer(tokenizer_spec_from_gguf(file));
  }
  const std::string json = tokenizer_json_for(model_path);
  if (exists(json)) return Tokenizer::from_hf_json(json);
  // Older checkpoints ship only the SentencePiece model.
  const std::string spm = sentencepiece_model_for(json);
  if (exists(spm)) return load_sentencepiece_model(spm);
  throw LoadError(model_path + ": no tokenizer found (expected " + json + " or " + spm + ")");
}

}  // namespace nnsight
