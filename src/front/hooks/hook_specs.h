// The forward_hooks setting: a JSON list of hook specs, given inline or as
// the path of a JSON file.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace nnsight::hooks {

// `text_or_path` is JSON when its first non-blank character is '[' or '{',
// otherwise the path of a file holding it. The result is a JSON array; a
// document {"forward_hooks": [...]} (a server-args file) is accepted too.
// Throws ConfigError for an unreadable file, malformed JSON (with the
// parser's position) or a document that is not a list.
nlohmann::json load_hook_specs(const std::string& text_or_path);

}  // namespace nnsight::hooks
