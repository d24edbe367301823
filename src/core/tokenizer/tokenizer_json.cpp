#include "core/tokenizer/tokenizer_json.h"

#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "core/tokenizer/metaspace.h"
#include "core/tokenizer/normalizer.h"
#include "core/tokenizer/spm_pipeline.h"
#include "core/tokenizer/tokenizer.h"

namespace nnsight {
namespace {

using json = nlohmann::json;

// "where.key", or "key" at the top level.
std::string join(const std::string& where, const char* key) {
  return where.empty() ? std::string(key) : where + "." + key;
}

constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeUserDefined = 4;
constexpr int32_t kTypeUnused = 5;
// Sequences nested deeper than this are rejected rather than recursed into.
constexpr int kMaxNesting = 32;

// Reads and parses one JSON file; every error names `path`.
class JsonFile {
 public:
  explicit JsonFile(std::string path) : path_(std::move(path)) {
    std::ifstream in(path_, std::ios::binary);
    if (!in) fail("cannot open the file");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) fail("read error");
    try {
      root_ = json::parse(text);
    } catch (const json::parse_error& e) {
      fail("invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
    }
    if (!root_.is_object()) fail("the top level is not a JSON object");
  }

  const json& root() const { return root_; }
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const std::string& what) const { throw LoadError(path_ + ": " + what); }

  // The member `key` of object `obj` (named `where`), or null when absent.
  const json* member(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& require(const json& obj, const char* key, const std::string& where) const {
    const json* v = member(obj, key);
    if (v == nullptr) fail(join(where, key) + " is missing");
    return *v;
  }
  const json& require_object(const json& obj, const char* key, const std::string& where) const {
    const json& v = require(obj, key, where);
    if (!v.is_object()) fail(join(where, key) + " must be an object, not " + v.type_name());
    return v;
  }
  std::string string_of(const json& v, const std::string& where) const {
    if (!v.is_string()) fail(where + " must be a string, not " + std::string(v.type_name()));
    return v.get<std::string>();
  }
  bool bool_or(const json& obj, const char* key, bool fallback, const std::string& where) const {
    const json* v = member(obj, key);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_boolean()) fail(join(where, key) + " must be a boolean, not " + v->type_name());
    return v->get<bool>();
  }
  // A token id: a non-negative integer below 2^31.
  int32_t id_of(const json& v, const std::string& where) const {
    if (!v.is_number_integer()) fail(where + " must be an integer token id, not " + v.type_name());
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      fail(where + " = " + std::to_string(id) + " is not a valid token id");
    }
    return static_cast<int32_t>(id);
  }

 private:
  std::string path_;
  json root_;
};

std::string type_of(const JsonFile& f, const json& obj, const std::string& where) {
  if (!obj.is_object()) f.fail(where + " must be an object, not " + obj.type_name());
  return f.string_of(f.require(obj, "type", where), where + ".type");
}

SplitBehavior parse_behavior(const JsonFile& f, const std::string& name, const std::string& where) {
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  f.fail(where + " '" + name + "' is not a known split behavior");
}

// Appends the steps of one pre_tokenizer JSON node. `byte_level` is set once
// a ByteLevel step is seen: Hugging Face switches the text to the byte
// alphabet there, so the steps after it see that spelling (byte_level_view).
void parse_pre_tokenizer(const JsonFile& f, const json& node, const std::string& where, PreTokenizerConfig& out,
                         bool& byte_level, int depth = 0) {
  if (depth > kMaxNesting) f.fail(where + ": Sequences nested too deeply");
  const std::string type = type_of(f, node, where);
  if (type == "ByteLevel" && byte_level) f.fail(where + ": a second ByteLevel pre-tokenizer is not supported");
  const size_t first_step = out.steps.size();
  if (type == "Sequence") {
    const json& list = f.require(node, "pretokenizers", where);
    if (!list.is_array()) f.fail(where + ".pretokenizers must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_pre_tokenizer(f, list[i], where + ".pretokenizers[" + std::to_string(i) + "]", out, byte_level, depth + 1);
    }
  } else if (type == "ByteLevel") {
    // Hugging Face's defaults when the keys are absent: both true.
    if (f.bool_or(node, "add_prefix_space", true, where)) {
      out.steps.push_back(PreTokenizeStep::prefix_space());
    }
    if (f.bool_or(node, "use_regex", true, where)) {
      out.steps.push_back(PreTokenizeStep::split(kGpt2SplitPattern));
    }
    byte_level = true;
  } else if (type == "Split") {
    const json& pattern = f.require(node, "pattern", where);
    if (!pattern.is_object() || pattern.size() != 1) {
      f.fail(where + ".pattern must be {\"Regex\": ...} or {\"String\": ...}");
    }
    const SplitBehavior behavior =
        parse_behavior(f, f.string_of(f.require(node, "behavior", where), where + ".behavior"), where + ".behavior");
    const bool invert = f.bool_or(node, "invert", false, where);
    if (const json* re = f.member(pattern, "Regex")) {
      out.steps.push_back(PreTokenizeStep::split(f.string_of(*re, where + ".pattern.Regex"), behavior, invert));
    } else if (const json* s = f.member(pattern, "String")) {
      out.steps.push_back(PreTokenizeStep::split_literal(f.string_of(*s, where + ".pattern.String"), behavior, invert));
    } else {
      f.fail(where + ".pattern must be {\"Regex\": ...} or {\"String\": ...}");
    }
  } else if (type == "Digits") {
    // Rust's char::is_numeric is the Unicode N categories, i.e. \p{N}.
    const bool individual = f.bool_or(node, "individual_digits", false, where);
    out.steps.push_back(PreTokenizeStep::split(individual ? R"(\p{N})" : R"(\p{N}+)"));
  } else if (type == "Punctuation") {
    // Unicode punctuation or Rust's ASCII punctuation, one character a match.
    const json* b = f.member(node, "behavior");
    const SplitBehavior behavior = b == nullptr || b->is_null()
                                       ? SplitBehavior::kIsolated
                                       : parse_behavior(f, f.string_of(*b, where + ".behavior"), where + ".behavior");
    out.steps.push_back(PreTokenizeStep::split(R"([\p{P}\$\+<=>\^~\|`])", behavior));
  } else {
    f.fail(where + " type '" + type +
           "' is not supported (supported: ByteLevel, Split, Digits, Punctuation, Sequence)");
  }
  if (type != "Sequence" && type != "ByteLevel" && byte_level) {
    for (size_t i = first_step; i < out.steps.size(); ++i) out.steps[i].byte_level_view = true;
  }
}

// A token named in tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> config_token(const JsonFile& f, const json& cfg, const char* key) {
  const json* v = f.member(cfg, key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) return f.string_of(f.require(*v, "content", key), std::string(key) + ".content");
  f.fail(std::string(key) + " must be a string or an object with \"content\"");
}

// tokenizer_config.json "chat_template": a string, or a list of {"name", "template"}
// of which transformers' apply_chat_template uses "default". "" when there is none.
std::string config_chat_template(const JsonFile& f) {
  const json* v = f.member(f.root(), "chat_template");
  if (v == nullptr || v->is_null()) return "";
  if (v->is_string()) return v->get<std::string>();
  if (!v->is_array()) f.fail("chat_template must be a string or a list of {\"name\", \"template\"}");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    const std::string where = "chat_template[" + std::to_string(i) + "]";
    if (!item.is_object()) f.fail(where + " must be an object with \"name\" and \"template\"");
    if (f.string_of(f.require(item, "name", where), where + ".name") == "default") {
      return f.string_of(f.require(item, "template", where), where + ".template");
    }
  }
  return "";
}

struct TemplateSpecials {
  std::optional<std::string> before, after;  // special tokens around the text
};

// What a TemplateProcessing (possibly inside a Sequence) adds around a single text.
void parse_post_processor(const JsonFile& f, const json& node, const std::string& where, TemplateSpecials& out,
                          int depth = 0) {
  if (node.is_null()) return;
  if (depth > kMaxNesting) f.fail(where + ": Sequences nested too deeply");
  const std::string type = type_of(f, node, where);
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "Sequence") {
    const json& list = f.require(node, "processors", where);
    if (!list.is_array()) f.fail(where + ".processors must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_post_processor(f, list[i], where + ".processors[" + std::to_string(i) + "]", out, depth + 1);
    }
    return;
  }
  if (type != "TemplateProcessing") {
    f.fail(where + " type '" + type + "' is not supported (supported: ByteLevel, TemplateProcessing, Sequence)");
  }
  const json& single = f.require(node, "single", where);
  if (!single.is_array()) f.fail(where + ".single must be an array");
  bool seen_text = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string item_where = where + ".single[" + std::to_string(i) + "]";
    const json& item = single[i];
    if (!item.is_object()) f.fail(item_where + " must be an object");
    if (f.member(item, "Sequence") != nullptr) {
      if (seen_text) f.fail(item_where + ": the text appears twice in the template");
      seen_text = true;
    } else if (const json* sp = f.member(item, "SpecialToken")) {
      if (!sp->is_object()) f.fail(item_where + ".SpecialToken must be an object");
      std::string tok =
          f.string_of(f.require(*sp, "id", item_where + ".SpecialToken"), item_where + ".SpecialToken.id");
      // special_tokens maps the template name to the token(s) it stands for.
      if (const json* table = f.member(node, "special_tokens")) {
        if (const json* entry = table->is_object() ? f.member(*table, tok.c_str()) : nullptr) {
          if (const json* toks = entry->is_object() ? f.member(*entry, "tokens") : nullptr) {
            if (!toks->is_array() || toks->size() != 1) {
              f.fail(item_where + ": special token '" + tok + "' must stand for exactly one token");
            }
            tok = f.string_of((*toks)[0], where + ".special_tokens." + tok + ".tokens[0]");
          }
        }
      }
      std::optional<std::string>& slot = seen_text ? out.after : out.before;
      if (slot.has_value()) {
        f.fail(item_where + ": more than one special token " + (seen_text ? "after" : "before") +
               " the text is not supported");
      }
      slot = tok;
    } else {
      f.fail(item_where + " must be a SpecialToken or a Sequence");
    }
  }
}

// ---- SentencePiece-style files (a BPE model over "▁"-spelled pieces) ----

constexpr const char* kSpaceMark = "\xE2\x96\x81";  // "▁"

// True when the pre_tokenizer node (or a Sequence inside it) has a ByteLevel step.
bool has_byte_level(const json& node, int depth = 0) {
  if (!node.is_object() || depth > kMaxNesting) return false;
  auto t = node.find("type");
  if (t == node.end() || !t->is_string()) return false;
  if (*t == "ByteLevel") return true;
  if (*t != "Sequence") return false;
  auto list = node.find("pretokenizers");
  if (list == node.end() || !list->is_array()) return false;
  for (const json& item : *list) {
    if (has_byte_level(item, depth + 1)) return true;
  }
  return false;
}

std::string pattern_of(const JsonFile& f, const json& node, const std::string& where, bool& regex) {
  const json& pattern = f.require(node, "pattern", where);
  if (pattern.is_object() && pattern.size() == 1) {
    if (const json* s = f.member(pattern, "String")) {
      regex = false;
      return f.string_of(*s, where + ".pattern.String");
    }
    if (const json* re = f.member(pattern, "Regex")) {
      regex = true;
      return f.string_of(*re, where + ".pattern.Regex");
    }
  }
  f.fail(where + ".pattern must be {\"Regex\": ...} or {\"String\": ...}");
}

void parse_spm_normalizer(const JsonFile& f, const json& node, const std::string& where,
                          std::vector<NormalizeRule>& out, int depth = 0) {
  if (node.is_null()) return;
  if (depth > kMaxNesting) f.fail(where + ": Sequences nested too deeply");
  const std::string type = type_of(f, node, where);
  if (type == "Sequence") {
    const json& list = f.require(node, "normalizers", where);
    if (!list.is_array()) f.fail(where + ".normalizers must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_spm_normalizer(f, list[i], where + ".normalizers[" + std::to_string(i) + "]", out, depth + 1);
    }
  } else if (type == "Prepend") {
    out.push_back(NormalizeRule::prepend(f.string_of(f.require(node, "prepend", where), where + ".prepend")));
  } else if (type == "Replace") {
    bool regex = false;
    std::string pattern = pattern_of(f, node, where, regex);
    if (pattern.empty()) f.fail(where + ".pattern is empty");
    std::string content = f.string_of(f.require(node, "content", where), where + ".content");
    out.push_back(regex ? NormalizeRule::replace_regex(std::move(pattern), std::move(content))
                        : NormalizeRule::replace(std::move(pattern), std::move(content)));
  } else {
    f.fail(where + " type '" + type +
           "' is not supported for a SentencePiece-style tokenizer (supported: Prepend, Replace, Sequence)");
  }
}

// Metaspace's prepend scheme: "prepend_scheme", or the older "add_prefix_space" flag.
PrependScheme prepend_scheme_of(const JsonFile& f, const json& node, const std::string& where) {
  if (const json* p = f.member(node, "prepend_scheme"); p != nullptr && !p->is_null()) {
    PrependScheme scheme;
    const std::string name = f.string_of(*p, where + ".prepend_scheme");
    if (!parse_prepend_scheme(name, scheme)) {
      f.fail(where + ".prepend_scheme '" + name + "' is not one of always, first, never");
    }
    return scheme;
  }
  return f.bool_or(node, "add_prefix_space", true, where) ? PrependScheme::kAlways : PrependScheme::kNever;
}

void parse_spm_pre_tokenizer(const JsonFile& f, const json& node, const std::string& where, SpmPipeline& out,
                             int depth = 0) {
  if (node.is_null()) return;
  if (depth > kMaxNesting) f.fail(where + ": Sequences nested too deeply");
  const std::string type = type_of(f, node, where);
  if (type == "Sequence") {
    const json& list = f.require(node, "pretokenizers", where);
    if (!list.is_array()) f.fail(where + ".pretokenizers must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_spm_pre_tokenizer(f, list[i], where + ".pretokenizers[" + std::to_string(i) + "]", out, depth + 1);
    }
  } else if (type == "Metaspace") {
    if (out.metaspace) f.fail(where + ": a second Metaspace is not supported");
    if (!out.splits.steps.empty()) {
      f.fail(where + ": a split before Metaspace is not supported (Metaspace must come first)");
    }
    Metaspace m;
    if (const json* r = f.member(node, "replacement"); r != nullptr && !r->is_null()) {
      m.replacement = f.string_of(*r, where + ".replacement");
    }
    if (m.replacement != kSpaceMark) f.fail(where + ".replacement '" + m.replacement + "' is not supported (only ▁)");
    m.prepend_scheme = prepend_scheme_of(f, node, where);
    m.split = f.bool_or(node, "split", true, where);
    out.metaspace = m;
  } else if (type == "Split" || type == "Digits") {
    bool byte_level = false;
    parse_pre_tokenizer(f, node, where, out.splits, byte_level, depth);
  } else {
    f.fail(where + " type '" + type +
           "' is not supported for a SentencePiece-style tokenizer (supported: Metaspace, Split, Digits, Sequence)");
  }
}

struct SpmDecoderParts {
  bool replace = false, byte_fallback = false, fuse = false;
  std::optional<LeadingSpace> leading;
};

void parse_spm_decoder(const JsonFile& f, const json& node, const std::string& where, SpmDecoderParts& out,
                       int depth = 0) {
  if (depth > kMaxNesting) f.fail(where + ": Sequences nested too deeply");
  const std::string type = type_of(f, node, where);
  if (type == "Sequence") {
    const json& list = f.require(node, "decoders", where);
    if (!list.is_array()) f.fail(where + ".decoders must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      parse_spm_decoder(f, list[i], where + ".decoders[" + std::to_string(i) + "]", out, depth + 1);
    }
  } else if (type == "Replace") {
    bool regex = false;
    const std::string pattern = pattern_of(f, node, where, regex);
    const std::string content = f.string_of(f.require(node, "content", where), where + ".content");
    if (regex || pattern != kSpaceMark || content != " ") {
      f.fail(where + ": only Replace of \"▁\" with \" \" is supported");
    }
    out.replace = true;
  } else if (type == "ByteFallback") {
    out.byte_fallback = true;
  } else if (type == "Fuse") {
    out.fuse = true;
  } else if (type == "Strip") {
    const std::string content = f.string_of(f.require(node, "content", where), where + ".content");
    const json& start = f.require(node, "start", where);
    const json& stop = f.require(node, "stop", where);
    if (content != " " || !start.is_number_integer() || !stop.is_number_integer() || start.get<int64_t>() > 1 ||
        start.get<int64_t>() < 0 || stop.get<int64_t>() != 0) {
      f.fail(where + ": only Strip(\" \", start 0 or 1, stop 0) is supported");
    }
    if (start.get<int64_t>() == 1) {
      // Before Fuse it would strip every token; after it, the text's start.
      if (!out.fuse) f.fail(where + ": Strip before Fuse is not supported");
      out.leading = LeadingSpace::kStripOne;
    }
  } else if (type == "Metaspace") {
    if (const json* r = f.member(node, "replacement"); r != nullptr && !r->is_null()) {
      if (f.string_of(*r, where + ".replacement") != kSpaceMark) {
        f.fail(where + ".replacement is not supported (only ▁)");
      }
    }
    out.replace = true;
    out.leading = prepend_scheme_of(f, node, where) == PrependScheme::kNever ? LeadingSpace::kKeep
                                                                             : LeadingSpace::kMetaspaceFirstToken;
  } else {
    f.fail(where + " type '" + type +
           "' is not supported for a SentencePiece-style tokenizer (supported: Replace, ByteFallback, Fuse, Strip, "
           "Metaspace, Sequence)");
  }
}

// The SentencePiece-style pipeline a tokenizer.json spells out.
SpmPipeline parse_spm_pipeline(const JsonFile& f, const json& root, const json& model) {
  SpmPipeline p;
  p.merge_by_score = false;
  p.byte_fallback = f.bool_or(model, "byte_fallback", false, "model");
  p.fuse_unk = f.bool_or(model, "fuse_unk", false, "model");
  if (const json* norm = f.member(root, "normalizer")) parse_spm_normalizer(f, *norm, "normalizer", p.normalizer);
  if (const json* pre = f.member(root, "pre_tokenizer")) parse_spm_pre_tokenizer(f, *pre, "pre_tokenizer", p);
  const json* dec = f.member(root, "decoder");
  if (dec == nullptr || dec->is_null()) {
    f.fail("decoder is missing: a SentencePiece-style tokenizer needs one that turns \"▁\" into spaces");
  }
  SpmDecoderParts parts;
  parse_spm_decoder(f, *dec, "decoder", parts);
  if (!parts.replace) f.fail("decoder does not turn \"▁\" into spaces (Replace or Metaspace)");
  if (p.byte_fallback && !parts.byte_fallback) {
    f.fail("model.byte_fallback is set but the decoder has no ByteFallback step");
  }
  p.leading_space = parts.leading.value_or(LeadingSpace::kKeep);
  return p;
}

// transformers 5 rebuilds the pipeline of some tokenizer classes whatever
// tokenizer.json says (LlamaTokenizer: Metaspace with prepend_scheme "first",
// or "always" when tokenizer_config.json sets legacy: true; GemmaTokenizer:
// spaces replaced, nothing prepended). This applies the same, so ids match
// what AutoTokenizer returns.
void apply_tokenizer_class(const JsonFile& cfg, SpmPipeline& p, bool& ignore_merges) {
  const json* cls = cfg.member(cfg.root(), "tokenizer_class");
  if (cls == nullptr || !cls->is_string()) return;
  const std::string name = cls->get<std::string>();
  if (name == "LlamaTokenizer" || name == "LlamaTokenizerFast") {
    const bool add_prefix_space = cfg.bool_or(cfg.root(), "add_prefix_space", true, "");
    const bool legacy = cfg.bool_or(cfg.root(), "legacy", false, "");
    p.normalizer.clear();
    p.splits.steps.clear();
    Metaspace m;
    m.prepend_scheme =
        !add_prefix_space ? PrependScheme::kNever : (legacy ? PrependScheme::kAlways : PrependScheme::kFirst);
    m.split = false;
    p.metaspace = m;
    p.byte_fallback = true;
    p.fuse_unk = true;
    p.leading_space = add_prefix_space ? LeadingSpace::kStripOne : LeadingSpace::kKeep;
    ignore_merges = false;
  } else if (name == "GemmaTokenizer" || name == "GemmaTokenizerFast") {
    p.normalizer = {NormalizeRule::replace(" ", kSpaceMark)};
    p.splits.steps.clear();
    p.metaspace.reset();
    p.byte_fallback = true;
    p.leading_space = LeadingSpace::kKeep;
    ignore_merges = false;
  }
}

}  // namespace

HfTokenizerFiles read_hf_tokenizer_json(const std::string& path) {
  const JsonFile f(path);
  const json& root = f.root();
  HfTokenizerFiles result;
  TokenizerSpec& spec = result.spec;
  spec.pre = "";

  // ---- model ----
  const json& model = f.require_object(root, "model", "");
  if (const json* t = f.member(model, "type"); t != nullptr && !t->is_null()) {
    const std::string type = f.string_of(*t, "model.type");
    if (type != "BPE") f.fail("model.type '" + type + "' is not supported (only BPE)");
  }
  if (const json* d = f.member(model, "dropout");
      d != nullptr && !d->is_null() && !(d->is_number() && d->get<double>() == 0.0)) {
    f.fail("model.dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = f.member(model, key);
    if (v != nullptr && !v->is_null() && !(v->is_string() && v->get<std::string>().empty())) {
      f.fail(std::string("model.") + key + " is not supported by byte-level BPE");
    }
  }
  // Neither a ByteLevel pre-tokenizer nor a ByteLevel decoder: pieces are
  // spelled with "▁" (SentencePiece style).
  const json* pre_node = f.member(root, "pre_tokenizer");
  const json* dec_node = f.member(root, "decoder");
  const bool byte_level_decoder =
      dec_node != nullptr && dec_node->is_object() && dec_node->contains("type") && (*dec_node)["type"] == "ByteLevel";
  const bool spm = !(pre_node != nullptr && has_byte_level(*pre_node)) && !byte_level_decoder;
  if (spm) result.pipeline.spm = parse_spm_pipeline(f, root, model);
  result.pipeline.ignore_merges = f.bool_or(model, "ignore_merges", false, "model");

  const json& vocab = f.require_object(model, "vocab", "model");
  const json* added = f.member(root, "added_tokens");
  if (added != nullptr && !added->is_null() && !added->is_array()) {
    f.fail("added_tokens must be an array");
  }
  const size_t n_added = (added != nullptr && added->is_array()) ? added->size() : 0;

  // Ids may leave holes only where something else could fill them; anything
  // larger than the number of entries would be an absurd allocation.
  const size_t max_entries = vocab.size() + n_added;
  std::vector<std::optional<std::string>> by_id;
  auto place = [&](int32_t id, std::string tok, const std::string& where, bool allow_same) {
    if (size_t(id) >= max_entries) {
      f.fail(where + ": id " + std::to_string(id) + " leaves holes in the vocabulary (only " +
             std::to_string(max_entries) + " entries)");
    }
    if (by_id.size() <= size_t(id)) by_id.resize(size_t(id) + 1);
    if (by_id[size_t(id)].has_value() && !allow_same) {
      f.fail(where + ": id " + std::to_string(id) + " is given to both '" + *by_id[size_t(id)] + "' and '" + tok + "'");
    }
    by_id[size_t(id)] = std::move(tok);
  };
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    place(f.id_of(it.value(), "model.vocab[\"" + it.key() + "\"]"), it.key(), "model.vocab[\"" + it.key() + "\"]",
          false);
  }
  std::vector<std::pair<int32_t, bool>> added_ids;  // (id, special)
  for (size_t i = 0; i < n_added; ++i) {
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    const json& t = (*added)[i];
    if (!t.is_object()) f.fail(where + " must be an object");
    const int32_t id = f.id_of(f.require(t, "id", where), where + ".id");
    std::string content = f.string_of(f.require(t, "content", where), where + ".content");
    if (content.empty()) f.fail(where + ".content is empty");
    if (f.bool_or(t, "single_word", false, where)) {
      f.fail(where + " ('" + content + "') sets single_word, which is not supported");
    }
    if (f.bool_or(t, "lstrip", false, where)) spec.lstrip_ids.push_back(id);
    if (f.bool_or(t, "rstrip", false, where)) spec.rstrip_ids.push_back(id);
    // An added token usually repeats a vocabulary entry; its text wins.
    place(id, std::move(content), where, true);
    added_ids.emplace_back(id, f.bool_or(t, "special", false, where));
    // Hugging Face matches "normalized" added tokens in the normalized text.
    if (spm && f.bool_or(t, "normalized", false, where)) result.pipeline.spm->normalized_tokens.push_back(id);
  }
  spec.tokens.resize(by_id.size());
  spec.token_types.assign(by_id.size(), kTypeNormal);
  for (size_t i = 0; i < by_id.size(); ++i) {
    if (by_id[i].has_value()) {
      spec.tokens[i] = std::move(*by_id[i]);
    } else {
      spec.token_types[i] = kTypeUnused;  // a hole: decodes to nothing, never produced
    }
  }
  for (const auto& [id, special] : added_ids) {
    spec.token_types[size_t(id)] = special ? kTypeControl : kTypeUserDefined;
  }
  std::unordered_map<std::string, int32_t> id_by_token;
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    if (spec.token_types[i] != kTypeUnused) id_by_token.emplace(spec.tokens[i], int32_t(i));
  }
  auto resolve = [&](const std::string& tok, const std::string& where) {
    auto it = id_by_token.find(tok);
    if (it == id_by_token.end()) f.fail(where + " '" + tok + "' is not in the vocabulary");
    return it->second;
  };

  const json& merges = f.require(model, "merges", "model");
  if (!merges.is_array()) f.fail("model.merges must be an array");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string where = "model.merges[" + std::to_string(i) + "]";
    if (m.is_string()) {
      spec.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2) {
      const std::string a = f.string_of(m[0], where + "[0]");
      const std::string b = f.string_of(m[1], where + "[1]");
      if (a.empty() || b.empty()) f.fail(where + ": a merge of an empty token");
      spec.merges.push_back(a + " " + b);
    } else {
      f.fail(where + " must be a \"left right\" string or a [left, right] pair");
    }
  }
  if (const json* unk = f.member(model, "unk_token"); unk != nullptr && !unk->is_null()) {
    spec.unk_id = resolve(f.string_of(*unk, "model.unk_token"), "model.unk_token");
  }

  // ---- normalizer, pre-tokenizer, decoder (SentencePiece style: parsed above) ----
  if (const json* norm = f.member(root, "normalizer"); !spm && norm != nullptr && !norm->is_null()) {
    const std::string type = type_of(f, *norm, "normalizer");
    const json* list = type == "Sequence" ? f.member(*norm, "normalizers") : nullptr;
    if (type == "NFC") {
      result.pipeline.normalization = UnicodeNormalization::kNfc;
    } else if (type == "NFD") {
      result.pipeline.normalization = UnicodeNormalization::kNfd;
    } else if (type == "NFKC") {
      result.pipeline.normalization = UnicodeNormalization::kNfkc;
    } else if (type == "NFKD") {
      result.pipeline.normalization = UnicodeNormalization::kNfkd;
    } else if (!(list != nullptr && list->is_array() && list->empty())) {
      f.fail("normalizer type '" + type + "' is not supported (supported: NFC, NFD, NFKC, NFKD, none)");
    }
  }
  const json* pre = f.member(root, "pre_tokenizer");
  bool byte_level = false;
  if (!spm && pre != nullptr && !pre->is_null()) {
    parse_pre_tokenizer(f, *pre, "pre_tokenizer", result.pipeline.pre_tokenizer, byte_level);
  }
  if (!spm && !byte_level) {
    f.fail("pre_tokenizer has no ByteLevel step: not a byte-level BPE tokenizer");
  }
  if (const json* dec = f.member(root, "decoder"); !spm && dec != nullptr && !dec->is_null()) {
    const std::string type = type_of(f, *dec, "decoder");
    if (type != "ByteLevel") {
      f.fail("decoder type '" + type + "' is not supported (only ByteLevel)");
    }
  }

  // ---- BOS / EOS: the post-processor template, then tokenizer_config.json ----
  TemplateSpecials tmpl;
  if (const json* post = f.member(root, "post_processor")) {
    parse_post_processor(f, *post, "post_processor", tmpl);
  }
  if (tmpl.before) {
    spec.bos_id = resolve(*tmpl.before, "post_processor special token");
    spec.add_bos = true;
  }
  if (tmpl.after) {
    spec.eos_id = resolve(*tmpl.after, "post_processor special token");
    spec.add_eos = true;
  }

  const size_t slash = path.find_last_of('/');
  const std::string config_path =
      (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "tokenizer_config.json";
  if (std::ifstream(config_path).good()) {
    const JsonFile cfg(config_path);
    auto config_id = [&](const char* key, int32_t& id) {
      if (auto tok = config_token(cfg, cfg.root(), key)) {
        auto it = id_by_token.find(*tok);
        if (it == id_by_token.end()) cfg.fail(std::string(key) + " '" + *tok + "' is not in the vocabulary of " + path);
        id = it->second;
      }
    };
    config_id("bos_token", spec.bos_id);
    config_id("eos_token", spec.eos_id);
    config_id("unk_token", spec.unk_id);
    config_id("pad_token", spec.pad_id);
    spec.add_bos = cfg.bool_or(cfg.root(), "add_bos_token", spec.add_bos, "");
    spec.add_eos = cfg.bool_or(cfg.root(), "add_eos_token", spec.add_eos, "");
    if (spec.add_bos && spec.bos_id < 0) cfg.fail("add_bos_token is true but there is no bos_token");
    if (spec.add_eos && spec.eos_id < 0) cfg.fail("add_eos_token is true but there is no eos_token");
    spec.chat_template = config_chat_template(cfg);
    if (spm) apply_tokenizer_class(cfg, *result.pipeline.spm, result.pipeline.ignore_merges);
  }
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  // Newer transformers save the template beside the config instead; when
  // both are there, the file wins, as in transformers' from_pretrained.
  if (std::ifstream jinja(dir + "chat_template.jinja"); jinja)
    spec.chat_template.assign(std::istreambuf_iterator<char>(jinja), std::istreambuf_iterator<char>());
  // Multimodal repositories (Gemma 3 4B and larger, LLaVA) keep it in their
  // processor's chat_template.json: {"chat_template": "..."}.
  if (spec.chat_template.empty() && std::ifstream(dir + "chat_template.json").good())
    spec.chat_template = config_chat_template(JsonFile(dir + "chat_template.json"));
  return result;
}

Tokenizer Tokenizer::from_hf_json(const std::string& path) {
  HfTokenizerFiles files = read_hf_tokenizer_json(path);
  return Tokenizer(std::move(files.spec), std::move(files.pipeline), path);
}

}  // namespace nnsight
