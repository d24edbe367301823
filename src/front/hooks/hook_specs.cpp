#include "front/hooks/hook_specs.h"

#include <fstream>
#include <sstream>

#include <nnsight/error.hpp>

namespace nnsight::hooks {

nlohmann::json load_hook_specs(const std::string& text_or_path) {
  const size_t first = text_or_path.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return nlohmann::json::array();
  std::string text = text_or_path;
  std::string where = "forward_hooks";
  if (text[first] != '[' && text[first] != '{') {
    std::ifstream in(text_or_path, std::ios::binary);
    if (!in) throw ConfigError("forward_hooks: cannot read the file '" + text_or_path + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    where = "forward_hooks file '" + text_or_path + "'";
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(where + " is not valid JSON: " + e.what());
  }
  if (doc.is_object() && doc.contains("forward_hooks")) doc = doc["forward_hooks"];
  if (doc.is_null()) return nlohmann::json::array();
  if (!doc.is_array())
    throw ConfigError(where + " must be a JSON list of hook specs, got a " + std::string(doc.type_name()));
  return doc;
}

}  // namespace nnsight::hooks
