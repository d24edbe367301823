#include "front/remote/sampling_params_json.h"

#include <nnsight/error.hpp>

#include "front/remote/json_integer.h"

namespace nnsight::remote {

nlohmann::json sampling_params_to_json(const SamplingParams& p) {
  nlohmann::json j = {{"temperature", p.temperature()},
                      {"top_p", p.top_p()},
                      {"top_k", p.top_k()},
                      {"min_p", p.min_p()},
                      {"max_tokens", p.max_tokens()},
                      {"stop_token_ids", p.stop_token_ids()},
                      {"stop", p.stop()},
                      {"ignore_eos", p.ignore_eos()},
                      {"skip_special_tokens", p.skip_special_tokens()}};
  if (p.seed()) j["seed"] = *p.seed();
  if (p.logprobs()) j["logprobs"] = *p.logprobs();
  if (p.max_saved_bytes() > 0) j["max_saved_bytes"] = p.max_saved_bytes();
  return j;
}

SamplingParams sampling_params_from_json(const nlohmann::json& j, const std::string& where, SamplingParams p) {
  if (j.is_null()) return p;
  if (!j.is_object()) throw ConfigError(where + ": sampling params must be a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = it.value();
    const std::string field = where + "." + k;
    try {
      if (k == "temperature") {
        p.temperature(v.get<double>());
      } else if (k == "top_p") {
        p.top_p(v.get<double>());
      } else if (k == "top_k") {
        p.top_k(v.is_null() ? 0 : json_integer<int64_t>(v, field));
      } else if (k == "min_p") {
        p.min_p(v.get<double>());
      } else if (k == "seed") {
        if (!v.is_null()) p.seed(json_integer<uint64_t>(v, field));
      } else if (k == "logprobs") {
        if (!v.is_null()) p.logprobs(json_integer<int64_t>(v, field));
      } else if (k == "max_tokens") {
        p.max_tokens(json_integer<int64_t>(v, field));
      } else if (k == "stop_token_ids") {
        p.stop_token_ids(json_integers<int32_t>(v, field, 0));
      } else if (k == "stop") {
        if (v.is_string())
          p.stop({v.get<std::string>()});
        else if (!v.is_null())
          p.stop(v.get<std::vector<std::string>>());
      } else if (k == "ignore_eos") {
        p.ignore_eos(v.get<bool>());
      } else if (k == "skip_special_tokens") {
        p.skip_special_tokens(v.get<bool>());
      } else if (k == "max_saved_bytes") {
        p.max_saved_bytes(json_integer<int64_t>(v, field, 0));
      } else {
        throw ConfigError(field +
                          ": unknown sampling parameter (known: temperature, top_p, top_k, min_p, seed, logprobs, "
                          "max_tokens, stop_token_ids, stop, ignore_eos, skip_special_tokens, max_saved_bytes)");
      }
    } catch (const nlohmann::json::exception&) {
      throw ConfigError(field + ": wrong type (" + std::string(v.type_name()) + ")");
    }
  }
  try {
    p.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(where + ": " + e.what());
  }
  return p;
}

}  // namespace nnsight::remote
