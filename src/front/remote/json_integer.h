// Integers a client sends as JSON, range-checked before they are narrowed.
// A number that is not an integer (2.5), or one outside the target's range
// (4294967297 as an int32 token id, 2^63 as an int64), is a ConfigError
// naming the field -- never a silently different number.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

namespace nnsight::remote {

template <class T>
T json_integer(const nlohmann::json& v, const std::string& field, T lo = std::numeric_limits<T>::min(),
               T hi = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral<T>::value && sizeof(T) <= 8, "json_integer: an integer type");
  auto refuse = [&]() -> ConfigError {
    const bool full = lo == std::numeric_limits<T>::min() && hi == std::numeric_limits<T>::max();
    const std::string range = full ? std::string(std::is_signed<T>::value ? "a signed " : "an unsigned ") +
                                         std::to_string(8 * sizeof(T)) + "-bit integer"
                                   : "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (!v.is_number())
      return ConfigError(field + ": wrong type (" + std::string(v.type_name()) + "), expected " + range);
    return ConfigError(field + ": expected " + range + ", got " +
                       v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  };
  if (!v.is_number_integer()) throw refuse();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) throw refuse();
    return static_cast<T>(u);
  }
  const int64_t i = v.get<int64_t>();  // is_number_integer and not unsigned: it fits int64
  if (i < 0) {
    if (!std::is_signed<T>::value || i < static_cast<int64_t>(lo) || (hi < 0 && i > static_cast<int64_t>(hi)))
      throw refuse();
  } else if (hi < 0 || static_cast<uint64_t>(i) > static_cast<uint64_t>(hi) ||
             (lo > 0 && static_cast<uint64_t>(i) < static_cast<uint64_t>(lo))) {
    throw refuse();
  }
  return static_cast<T>(i);
}

// A JSON list of integers, each checked as json_integer ("field[3]" names the bad one).
template <class T>
std::vector<T> json_integers(const nlohmann::json& v, const std::string& field, T lo = std::numeric_limits<T>::min(),
                             T hi = std::numeric_limits<T>::max()) {
  if (!v.is_array()) throw ConfigError(field + ": expected a list of integers, got " + std::string(v.type_name()));
  std::vector<T> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out.push_back(json_integer<T>(v[i], field + "[" + std::to_string(i) + "]", lo, hi));
  return out;
}

}  // namespace nnsight::remote
