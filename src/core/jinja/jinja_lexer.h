// Lexer of the Jinja subset (core/jinja): cuts a template into text and the
// tokens inside {{ }} and {% %} tags, applying jinja2's whitespace rules as
// transformers configures them (trim_blocks, lstrip_blocks, "-" and "+"
// modifiers, the last newline of the template dropped). Comments vanish.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nnsight/error.hpp>

namespace nnsight::jinja {

// A place in the template, 1-based; columns count bytes.
struct Location {
  int line = 1;
  int column = 1;
};

// Throws ConfigError "chat template <line>:<column>: <what>".
[[noreturn]] void fail_at(Location where, const std::string& what);

enum class TokenKind {
  kText,        // template text outside tags (text holds it, already whitespace-controlled)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the unescaped value
  kInt,
  kFloat,
  kOp,  // text holds the operator ("==", "(", "|", ...)
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  Location where;
};

// Largest template accepted, in bytes.
inline constexpr size_t kMaxTemplateBytes = size_t{1} << 20;

// Throws ConfigError (with the location) on an unterminated tag, string or
// comment, a character that starts no token, or a {% raw %} block.
std::vector<Token> lex(std::string_view source);

}  // namespace nnsight::jinja
