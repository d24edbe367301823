// The served model's hyper-parameters (ModelConfigInfo) as JSON, for the
// server's structure endpoint and the remote LanguageModel's config().
#pragma once

#include <nlohmann/json.hpp>
#include <nnsight/language_model.hpp>

#include "core/model_config.h"

namespace nnsight::remote {

ModelConfigInfo config_info(const ModelConfig& c);
nlohmann::json config_info_to_json(const ModelConfigInfo& i);
// Missing fields keep their defaults.
ModelConfigInfo config_info_from_json(const nlohmann::json& j);

}  // namespace nnsight::remote
