#include "dsl/json_position.h"

#include <cstdint>

namespace nnsight::dsl {
namespace {

// A forward scanner over JSON text that is assumed, not trusted, to be
// valid: every step checks bounds and reports failure instead of guessing.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : t_(text) {}

  size_t pos() const { return p_; }
  bool at_end() const { return p_ >= t_.size(); }
  char peek() const { return at_end() ? '\0' : t_[p_]; }

  void ws() {
    while (!at_end() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }
  bool consume(char c) {
    ws();
    if (peek() != c) return false;
    ++p_;
    return true;
  }

  // Reads a string token (at '"') and decodes the escapes a key may hold.
  std::optional<std::string> string() {
    ws();
    if (peek() != '"') return std::nullopt;
    ++p_;
    std::string out;
    while (!at_end()) {
      const char c = t_[p_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) return std::nullopt;
      const char e = t_[p_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (p_ + 4 > t_.size()) return std::nullopt;
          uint32_t cp = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = t_[p_++];
            cp <<= 4;
            if (h >= '0' && h <= '9')
              cp |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f')
              cp |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              cp |= static_cast<uint32_t>(h - 'A' + 10);
            else
              return std::nullopt;
          }
          // Keys are compared, not shown: surrogates are kept as their code units.
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default:
          out += e;  // \" \\ \/
      }
    }
    return std::nullopt;
  }

  // Skips one value of any kind; nesting is counted, not recursed into.
  bool skip_value() {
    ws();
    if (at_end()) return false;
    const char c = t_[p_];
    if (c == '"') return string().has_value();
    if (c != '{' && c != '[') {
      while (!at_end() && t_[p_] != ',' && t_[p_] != '}' && t_[p_] != ']' && t_[p_] != ' ' && t_[p_] != '\n' &&
             t_[p_] != '\t' && t_[p_] != '\r')
        ++p_;
      return true;
    }
    size_t depth = 0;
    while (!at_end()) {
      const char d = t_[p_];
      if (d == '"') {
        if (!string()) return false;
        continue;
      }
      ++p_;
      if (d == '{' || d == '[') ++depth;
      if (d == '}' || d == ']') {
        if (depth == 0) return false;
        if (--depth == 0) return true;
      }
    }
    return false;
  }

  // At an object or array: moves to the start of member `token`.
  bool enter(const std::string& token) {
    ws();
    if (consume('{')) {
      if (consume('}')) return false;
      for (;;) {
        auto key = string();
        if (!key || !consume(':')) return false;
        ws();
        if (*key == token) return true;
        if (!skip_value()) return false;
        if (!consume(',')) return false;
      }
    }
    if (consume('[')) {
      size_t index = 0;
      if (token.empty() || token.size() > 18) return false;
      for (char c : token) {
        if (c < '0' || c > '9') return false;
        index = index * 10 + static_cast<size_t>(c - '0');
      }
      if (token.size() > 1 && token[0] == '0') return false;
      if (consume(']')) return false;
      for (size_t i = 0;; ++i) {
        ws();
        if (i == index) return true;
        if (!skip_value()) return false;
        if (!consume(',')) return false;
      }
    }
    return false;
  }

 private:
  std::string_view t_;
  size_t p_ = 0;
};

// "/a/b~1c" -> {"a", "b/c"}; nullopt for a pointer that does not start with '/'.
std::optional<std::vector<std::string>> tokens_of(std::string_view pointer) {
  std::vector<std::string> out;
  if (pointer.empty()) return out;
  if (pointer[0] != '/') return std::nullopt;
  std::string cur;
  for (size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    if (pointer[i] == '~' && i + 1 < pointer.size() && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
      cur += pointer[i + 1] == '0' ? '~' : '/';
      ++i;
      continue;
    }
    cur += pointer[i];
  }
  return out;
}

std::optional<size_t> offset_of(std::string_view text, std::string_view pointer, Scanner& s) {
  auto tokens = tokens_of(pointer);
  if (!tokens) return std::nullopt;
  s.ws();
  for (const auto& tok : *tokens)
    if (!s.enter(tok)) return std::nullopt;
  s.ws();
  if (s.at_end()) return std::nullopt;
  (void)text;
  return s.pos();
}

}  // namespace

TextPosition position_of(std::string_view text, size_t offset) {
  TextPosition p;
  p.offset = offset;
  const size_t end = offset < text.size() ? offset : text.size();
  for (size_t i = 0; i < end; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++p.line;
      p.column = 1;
    } else if ((c & 0xC0) != 0x80) {  // count code points, not continuation bytes
      ++p.column;
    }
  }
  return p;
}

std::optional<TextPosition> locate(std::string_view text, std::string_view pointer) {
  Scanner s(text);
  auto off = offset_of(text, pointer, s);
  if (!off) return std::nullopt;
  return position_of(text, *off);
}

std::vector<TextPosition> locate_elements(std::string_view text, std::string_view pointer) {
  Scanner s(text);
  std::vector<TextPosition> out;
  if (!offset_of(text, pointer, s) || !s.consume('[')) return out;
  if (s.consume(']')) return out;
  std::vector<size_t> offsets;
  for (;;) {
    s.ws();
    offsets.push_back(s.pos());
    if (!s.skip_value()) return {};
    if (s.consume(']')) break;
    if (!s.consume(',')) return {};
  }
  // One pass for the line/column of every start.
  TextPosition p;
  size_t i = 0;
  for (size_t off : offsets) {
    for (; i < off && i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c == '\n') {
        ++p.line;
        p.column = 1;
      } else if ((c & 0xC0) != 0x80) {
        ++p.column;
      }
    }
    p.offset = off;
    out.push_back(p);
  }
  return out;
}

}  // namespace nnsight::dsl
