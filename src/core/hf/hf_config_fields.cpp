#include "core/hf/hf_config_fields.h"

namespace nnsight {

using nlohmann::json;

std::string shown_json(const json& v) {
  std::string shown = v.dump();
  if (shown.size() > 60) shown = shown.substr(0, 60) + "...";
  return shown;
}

HfConfigFields::HfConfigFields(const json& j, std::string what, std::string prefix)
    : j_(j), what_(std::move(what)), prefix_(std::move(prefix)) {}

const json* HfConfigFields::get(const std::string& key) const {
  auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

int64_t HfConfigFields::integer(const std::string& key) const {
  const json* v = get(key);
  if (v == nullptr) throw LoadError(what_ + ": missing field '" + path(key) + "'");
  return to_int(*v, key);
}

int64_t HfConfigFields::integer(const std::string& key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

double HfConfigFields::number(const std::string& key, double fallback) const {
  return maybe_number(key).value_or(fallback);
}

std::optional<double> HfConfigFields::maybe_number(const std::string& key) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) throw type_error(key, *v, "a number");
  return v->get<double>();
}

std::optional<int64_t> HfConfigFields::maybe_integer(const std::string& key) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  return to_int(*v, key);
}

bool HfConfigFields::boolean(const std::string& key, bool fallback) const {
  const json* v = get(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw type_error(key, *v, "true or false");
  return v->get<bool>();
}

std::string HfConfigFields::string(const std::string& key, const std::string& fallback) const {
  return maybe_string(key).value_or(fallback);
}

std::optional<std::string> HfConfigFields::maybe_string(const std::string& key) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) throw type_error(key, *v, "a string");
  return v->get<std::string>();
}

int64_t HfConfigFields::token_id(const std::string& key, int64_t fallback) const {
  const json* v = get(key);
  if (v == nullptr) return fallback;
  if (v->is_array()) {
    if (v->empty()) return fallback;
    return to_int((*v)[0], key);
  }
  return to_int(*v, key);
}

int64_t HfConfigFields::to_int(const json& v, const std::string& key) const {
  if (!v.is_number_integer()) throw type_error(key, v, "an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    throw type_error(key, v, "an integer that fits in 64 bits");
  }
  return v.get<int64_t>();
}

LoadError HfConfigFields::type_error(const std::string& key, const json& v, const char* expected) const {
  return LoadError(what_ + ": field '" + path(key) + "' = " + shown_json(v) + ", expected " + expected);
}

void TrackedHfConfigFields::reject_unused(const std::string& owner, const std::set<std::string>& harmless) const {
  for (auto it = object().begin(); it != object().end(); ++it) {
    const std::string& key = it.key();
    if (it->is_null() || used_.count(key) || harmless.count(key) || key.empty() || key[0] == '_') continue;
    throw LoadError(what() + ": field '" + path(key) + "' = " + shown_json(*it) + " is not implemented for " + owner +
                    " (the engine would compute something else than the checkpoint expects)");
  }
}

}  // namespace nnsight
