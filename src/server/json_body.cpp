#include "server/json_body.h"

#include "server/http_error.h"

namespace nnsight::server {

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string text = e.what();
  if (text.rfind("[json.exception.", 0) == 0) {
    const size_t close = text.find("] ");
    if (close != std::string::npos) text.erase(0, close + 2);
  }
  return text;
}

nlohmann::json parse_json_body(const std::string& body) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    throw HttpError(400, "the body is not JSON: " + json_error_text(e));
  }
  if (!j.is_object()) throw HttpError(400, "the body must be a JSON object");
  return j;
}

bool bool_field(const nlohmann::json& body, const std::string& key, bool fallback) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw HttpError(400, "'" + key + "' must be true or false, got " +
                             it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return it->get<bool>();
}

std::string string_field(const nlohmann::json& body, const std::string& key, const std::string& fallback) {
  auto it = body.find(key);
  if (it == body.end()) return fallback;
  if (!it->is_string()) throw HttpError(400, "'" + key + "' must be a string, got " + std::string(it->type_name()));
  return it->get<std::string>();
}

}  // namespace nnsight::server
