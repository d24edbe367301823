// SamplingParams as JSON, the way clients write them (vLLM's field names):
// {"temperature": 0, "max_tokens": 8, "stop": ["."], ...}. Only the fields a
// user sets travel; the scheduling and tracing fields are the server's.
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <nnsight/sampling_params.hpp>

namespace nnsight::remote {

nlohmann::json sampling_params_to_json(const SamplingParams& params);
// Fields absent from `j` keep `base`'s values. Throws nnsight::ConfigError
// naming `where` and the field for an unknown field or a value of the wrong
// type; the result is validated (SamplingParams::validate).
SamplingParams sampling_params_from_json(const nlohmann::json& j, const std::string& where,
                                         SamplingParams base = SamplingParams());

}  // namespace nnsight::remote
