#include "core/tokenizer/sentencepiece_model.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>
#include <utility>

namespace nnsight {
namespace {

constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeByte = 6;
constexpr uint64_t kModelTypeBpe = 2;
constexpr const char* kSpaceMark = "\xE2\x96\x81";  // "▁"

// Protobuf wire format: a bounded reader over one message's bytes.
class Wire {
 public:
  Wire(std::string_view bytes, const std::string& path, std::string where)
      : p_(bytes), path_(path), where_(std::move(where)) {}

  bool done() const { return pos_ >= p_.size(); }

  [[noreturn]] void fail(const std::string& what) const {
    throw LoadError(path_ + ": " + what + " (in " + where_ + " at byte " + std::to_string(pos_) +
                    "; not a SentencePiece model?)");
  }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= p_.size()) fail("truncated varint");
      const uint8_t b = static_cast<uint8_t>(p_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    fail("varint longer than 10 bytes");
  }
  // A field key: number and wire type.
  void key(uint32_t& field, uint32_t& wire) {
    const uint64_t k = varint();
    field = uint32_t(k >> 3);
    wire = uint32_t(k & 7);
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > p_.size() - pos_) fail("length " + std::to_string(n) + " runs past the end");
    std::string_view out = p_.substr(pos_, size_t(n));
    pos_ += size_t(n);
    return out;
  }
  float fixed32_float() {
    if (p_.size() - pos_ < 4) fail("truncated fixed32");
    uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits |= uint32_t(static_cast<uint8_t>(p_[pos_ + size_t(i)])) << (8 * i);
    pos_ += 4;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case 0:
        varint();
        break;
      case 1:
        if (p_.size() - pos_ < 8) fail("truncated fixed64");
        pos_ += 8;
        break;
      case 2:
        bytes();
        break;
      case 5:
        if (p_.size() - pos_ < 4) fail("truncated fixed32");
        pos_ += 4;
        break;
      default:
        fail("unsupported wire type " + std::to_string(wire));
    }
  }
  void expect(uint32_t wire, uint32_t want, const char* field) {
    if (wire != want) fail(std::string("field ") + field + " has wire type " + std::to_string(wire));
  }

 private:
  std::string_view p_;
  size_t pos_ = 0;
  const std::string& path_;
  std::string where_;
};

struct Trainer {
  uint64_t model_type = 1;  // UNIGRAM, protobuf default
  bool byte_fallback = false;
  bool whitespace_suffix = false;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
};

struct NormalizerSpec {
  std::string name;
  bool charsmap = false;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

Trainer read_trainer(std::string_view bytes, const std::string& path) {
  Wire w(bytes, path, "trainer_spec");
  Trainer t;
  while (!w.done()) {
    uint32_t field, wire;
    w.key(field, wire);
    auto int32 = [&](const char* name) {
      w.expect(wire, 0, name);
      return static_cast<int32_t>(static_cast<uint32_t>(w.varint()));  // two's complement, as protobuf stores int32
    };
    switch (field) {
      case 3:
        w.expect(wire, 0, "model_type");
        t.model_type = w.varint();
        break;
      case 24:
        w.expect(wire, 0, "treat_whitespace_as_suffix");
        t.whitespace_suffix = w.varint() != 0;
        break;
      case 35:
        w.expect(wire, 0, "byte_fallback");
        t.byte_fallback = w.varint() != 0;
        break;
      case 40:
        t.unk_id = int32("unk_id");
        break;
      case 41:
        t.bos_id = int32("bos_id");
        break;
      case 42:
        t.eos_id = int32("eos_id");
        break;
      case 43:
        t.pad_id = int32("pad_id");
        break;
      default:
        w.skip(wire);
    }
  }
  return t;
}

NormalizerSpec read_normalizer(std::string_view bytes, const std::string& path) {
  Wire w(bytes, path, "normalizer_spec");
  NormalizerSpec n;
  while (!w.done()) {
    uint32_t field, wire;
    w.key(field, wire);
    switch (field) {
      case 1:
        w.expect(wire, 2, "name");
        n.name = std::string(w.bytes());
        break;
      case 2:
        w.expect(wire, 2, "precompiled_charsmap");
        n.charsmap = !w.bytes().empty();
        break;
      case 3:
        w.expect(wire, 0, "add_dummy_prefix");
        n.add_dummy_prefix = w.varint() != 0;
        break;
      case 4:
        w.expect(wire, 0, "remove_extra_whitespaces");
        n.remove_extra_whitespaces = w.varint() != 0;
        break;
      case 5:
        w.expect(wire, 0, "escape_whitespaces");
        n.escape_whitespaces = w.varint() != 0;
        break;
      default:
        w.skip(wire);
    }
  }
  return n;
}

}  // namespace

SentencePieceModelFile parse_sentencepiece_model(const std::string& bytes, const std::string& path) {
  SentencePieceModelFile out;
  TokenizerSpec& spec = out.spec;
  spec.model = "llama";
  Trainer trainer;
  NormalizerSpec norm;
  Wire w(bytes, path, "ModelProto");
  while (!w.done()) {
    uint32_t field, wire;
    w.key(field, wire);
    if (field == 1) {
      w.expect(wire, 2, "pieces");
      Wire p(w.bytes(), path, "pieces[" + std::to_string(spec.tokens.size()) + "]");
      std::string piece;
      float score = 0;
      uint64_t type = kTypeNormal;
      while (!p.done()) {
        uint32_t f2, w2;
        p.key(f2, w2);
        if (f2 == 1) {
          p.expect(w2, 2, "piece");
          piece = std::string(p.bytes());
        } else if (f2 == 2) {
          p.expect(w2, 5, "score");
          score = p.fixed32_float();
        } else if (f2 == 3) {
          p.expect(w2, 0, "type");
          type = p.varint();
        } else {
          p.skip(w2);
        }
      }
      if (type < 1 || type > kTypeByte) {
        throw LoadError(path + ": pieces[" + std::to_string(spec.tokens.size()) + "] ('" + piece +
                        "') has unknown type " + std::to_string(type));
      }
      spec.tokens.push_back(std::move(piece));
      spec.scores.push_back(score);
      spec.token_types.push_back(static_cast<int32_t>(type));
    } else if (field == 2) {
      w.expect(wire, 2, "trainer_spec");
      trainer = read_trainer(w.bytes(), path);
    } else if (field == 3) {
      w.expect(wire, 2, "normalizer_spec");
      norm = read_normalizer(w.bytes(), path);
    } else {
      w.skip(wire);
    }
  }
  if (spec.tokens.empty()) throw LoadError(path + ": the model has no pieces");
  if (trainer.model_type != kModelTypeBpe) {
    throw LoadError(path + ": trainer_spec.model_type = " + std::to_string(trainer.model_type) +
                    (trainer.model_type == 1 ? " (UNIGRAM)" : "") + " is not supported (only BPE)");
  }
  if (trainer.whitespace_suffix) throw LoadError(path + ": trainer_spec.treat_whitespace_as_suffix is not supported");
  if (norm.charsmap) {
    throw LoadError(path + ": normalizer_spec '" + norm.name +
                    "' has normalization rules (precompiled_charsmap), which are not supported (only 'identity')");
  }
  const int64_t n = static_cast<int64_t>(spec.tokens.size());
  auto id_or_none = [&](int32_t id, const char* what) {
    if (id < 0) return -1;
    if (id >= n) {
      throw LoadError(path + ": trainer_spec." + what + " = " + std::to_string(id) + " is outside the " +
                      std::to_string(n) + " pieces");
    }
    return id;
  };
  spec.unk_id = id_or_none(trainer.unk_id, "unk_id");
  spec.bos_id = id_or_none(trainer.bos_id, "bos_id");
  spec.eos_id = id_or_none(trainer.eos_id, "eos_id");
  spec.pad_id = id_or_none(trainer.pad_id, "pad_id");
  // Like llama.cpp and transformers' Llama tokenizers, a model with BOS gets it.
  spec.add_bos = spec.bos_id >= 0;
  spec.add_space_prefix = norm.add_dummy_prefix;

  SpmPipeline p = SpmPipeline::sentencepiece(norm.add_dummy_prefix);
  p.byte_fallback = trainer.byte_fallback;
  p.normalizer.clear();
  if (norm.remove_extra_whitespaces) {
    // Only spaces: SentencePiece leaves other whitespace alone.
    p.normalizer.push_back(NormalizeRule::replace_regex(R"(\A +| +\z)", ""));
    p.normalizer.push_back(NormalizeRule::replace_regex(" {2,}", " "));
  }
  if (norm.escape_whitespaces) p.normalizer.push_back(NormalizeRule::replace(" ", kSpaceMark));
  if (norm.add_dummy_prefix) p.normalizer.push_back(NormalizeRule::prepend(kSpaceMark));
  for (size_t i = 0; i < spec.token_types.size(); ++i) {
    if (spec.token_types[i] == 4) p.normalized_tokens.push_back(int32_t(i));  // user-defined
  }
  out.pipeline.spm = std::move(p);
  return out;
}

Tokenizer load_sentencepiece_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LoadError(path + ": cannot open the file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw LoadError(path + ": read error");
  SentencePieceModelFile file = parse_sentencepiece_model(bytes, path);
  const size_t slash = path.find_last_of('/');
  const std::string config_path =
      (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "tokenizer_config.json";
  std::ifstream cfg_in(config_path);
  if (cfg_in) {
    nlohmann::json cfg;
    try {
      cfg = nlohmann::json::parse(
          std::string((std::istreambuf_iterator<char>(cfg_in)), std::istreambuf_iterator<char>()));
    } catch (const nlohmann::json::parse_error& e) {
      throw LoadError(config_path + ": invalid JSON: " + e.what());
    }
    auto flag = [&](const char* key, bool& value) {
      auto it = cfg.find(key);
      if (it == cfg.end() || it->is_null()) return;
      if (!it->is_boolean()) throw LoadError(config_path + ": " + key + " must be a boolean");
      value = it->get<bool>();
    };
    flag("add_bos_token", file.spec.add_bos);
    flag("add_eos_token", file.spec.add_eos);
    if (auto it = cfg.find("chat_template"); it != cfg.end() && it->is_string()) {
      file.spec.chat_template = it->get<std::string>();
    }
  }
  return Tokenizer(std::move(file.spec), std::move(file.pipeline), path);
}

}  // namespace nnsight
