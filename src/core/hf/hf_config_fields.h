// Typed access to the fields of a Hugging Face config.json object (or of an
// object inside it, such as rope_parameters), with errors naming the file and
// the field's path, and the bookkeeping that turns a field nobody read into
// an error instead of silently ignoring it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nnsight/error.hpp>

namespace nnsight {

// A missing field and an explicit null both mean "use the default".
// `prefix` is the object's path inside the file, for messages
// ("rope_parameters." makes field 'factor' read 'rope_parameters.factor').
class HfConfigFields {
 public:
  HfConfigFields(const nlohmann::json& j, std::string what, std::string prefix = "");

  const nlohmann::json* get(const std::string& key) const;
  bool has(const std::string& key) const { return get(key) != nullptr; }

  int64_t integer(const std::string& key) const;  // required
  int64_t integer(const std::string& key, int64_t fallback) const;
  double number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  // std::nullopt when missing or null.
  std::optional<double> maybe_number(const std::string& key) const;
  std::optional<int64_t> maybe_integer(const std::string& key) const;
  std::optional<std::string> maybe_string(const std::string& key) const;
  // A token id given as an integer or a list of integers (the first is used).
  int64_t token_id(const std::string& key, int64_t fallback) const;

  // The field's path as messages name it: prefix + key.
  std::string path(const std::string& key) const { return prefix_ + key; }
  const std::string& what() const { return what_; }
  const nlohmann::json& object() const { return j_; }
  // "<what>: field '<path>' = <value>, expected <expected>".
  LoadError type_error(const std::string& key, const nlohmann::json& v, const char* expected) const;

 private:
  int64_t to_int(const nlohmann::json& v, const std::string& key) const;

  const nlohmann::json& j_;
  std::string what_;
  std::string prefix_;
};

// The value shown in messages: JSON, cut at 60 characters.
std::string shown_json(const nlohmann::json& v);

// HfConfigFields that remembers which keys were read (or marked), so that a
// key the engine does not implement is reported instead of ignored.
class TrackedHfConfigFields : public HfConfigFields {
 public:
  using HfConfigFields::HfConfigFields;

  int64_t integer(const std::string& key) {
    return use(key, [&] { return HfConfigFields::integer(key); });
  }
  int64_t integer(const std::string& key, int64_t fb) {
    return use(key, [&] { return HfConfigFields::integer(key, fb); });
  }
  double number(const std::string& key, double fb) {
    return use(key, [&] { return HfConfigFields::number(key, fb); });
  }
  bool boolean(const std::string& key, bool fb) {
    return use(key, [&] { return HfConfigFields::boolean(key, fb); });
  }
  std::string string(const std::string& key, const std::string& fb) {
    return use(key, [&] { return HfConfigFields::string(key, fb); });
  }
  std::optional<double> maybe_number(const std::string& key) {
    return use(key, [&] { return HfConfigFields::maybe_number(key); });
  }
  std::optional<int64_t> maybe_integer(const std::string& key) {
    return use(key, [&] { return HfConfigFields::maybe_integer(key); });
  }
  std::optional<std::string> maybe_string(const std::string& key) {
    return use(key, [&] { return HfConfigFields::maybe_string(key); });
  }
  int64_t token_id(const std::string& key, int64_t fb) {
    return use(key, [&] { return HfConfigFields::token_id(key, fb); });
  }
  template <class F>
  auto use(const std::string& key, F&& read) -> decltype(read()) {
    used_.insert(key);
    return read();
  }
  void mark(const std::string& key) { used_.insert(key); }

  // Throws LoadError naming the first key that is set (not null), was never
  // read, is not in `harmless` and does not start with '_' (bookkeeping such
  // as _name_or_path): "<what>: field '<path>' = <value> is not implemented
  // for <owner> (...)", owner e.g. "model_type 'llama'".
  void reject_unused(const std::string& owner, const std::set<std::string>& harmless = {}) const;

 private:
  std::set<std::string> used_;
};

// Two or more spellings of one setting: each entry is the field's path, for
// messages, and its value (std::nullopt when the field is absent or null).
template <class T>
using HfSpellings = std::vector<std::pair<std::string, std::optional<T>>>;

// The first spelling present (nullptr when none is); a LoadError naming both
// fields when two present ones differ.
template <class T>
const std::pair<std::string, std::optional<T>>* agreed_spelling(const std::string& what,
                                                                const HfSpellings<T>& spellings) {
  const std::pair<std::string, std::optional<T>>* first = nullptr;
  for (const auto& s : spellings) {
    if (!s.second) continue;
    if (first == nullptr) {
      first = &s;
    } else if (!(*s.second == *first->second)) {
      throw LoadError(what + ": fields '" + first->first + "' = " + nlohmann::json(*first->second).dump() + " and '" +
                      s.first + "' = " + nlohmann::json(*s.second).dump() +
                      " disagree (two spellings of one setting must say the same)");
    }
  }
  return first;
}

// The value every spelling present gives, std::nullopt when none is present.
template <class T>
std::optional<T> agreed_value(const std::string& what, const HfSpellings<T>& spellings) {
  const auto* s = agreed_spelling(what, spellings);
  return s == nullptr ? std::nullopt : s->second;
}

}  // namespace nnsight
