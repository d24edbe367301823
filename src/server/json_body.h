// JsonBody: a request's JSON body and its typed fields, read so that every
// mistake of the client is a 400 naming the field (HttpError), never the JSON
// library's own text or a 500.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace nnsight::server {

// The body as a JSON object; HttpError 400 when it is not JSON or not an object.
nlohmann::json parse_json_body(const std::string& body);
// body[key] as a bool, `fallback` when absent or null; HttpError 400 otherwise.
bool bool_field(const nlohmann::json& body, const std::string& key, bool fallback);
// body[key] as a string, `fallback` when absent; HttpError 400 otherwise.
std::string string_field(const nlohmann::json& body, const std::string& key, const std::string& fallback);
// A JSON library exception's message without its "[json.exception.x.n] " tag.
std::string json_error_text(const nlohmann::json::exception& e);

}  // namespace nnsight::server
