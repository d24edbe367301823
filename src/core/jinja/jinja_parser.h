// Parser of the Jinja subset (core/jinja). The subset is what the chat
// templates of the supported model families use (docs/cli.md, "Chat"):
// {{ }}, if/elif/else, for (with loop.*, else, break, continue), set (also a
// namespace attribute), generation blocks, and expressions with the filters,
// tests, methods and global functions listed in jinja_parser.cpp. Anything
// else is refused here, before anything renders, naming the construct and
// its line:column.
#pragma once

#include <string_view>

#include "core/jinja/jinja_ast.h"

namespace nnsight::jinja {

// Throws ConfigError "chat template <line>:<column>: ..." for a syntax error
// or a construct outside the subset.
Body parse_template(std::string_view source);

}  // namespace nnsight::jinja
