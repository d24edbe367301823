#include "core/jinja/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "core/tokenizer/utf8.h"

namespace nnsight::jinja {

void fail_at(Location where, const std::string& what) {
  throw ConfigError("chat template " + std::to_string(where.line) + ":" + std::to_string(where.column) + ": " + what);
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  explicit Lexer(std::string text) : src_(std::move(text)) {
    line_starts_.push_back(0);
    for (size_t k = 0; k < src_.size(); ++k) {
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;  // the text about to be read starts a line
    while (pos < src_.size()) {
      size_t tag = src_.find('{', pos);
      while (tag != std::string::npos && tag + 1 < src_.size() && src_[tag + 1] != '{' && src_[tag + 1] != '%' &&
             src_[tag + 1] != '#') {
        tag = src_.find('{', tag + 1);
      }
      if (tag == std::string::npos || tag + 1 >= src_.size()) tag = src_.size();
      std::string text = src_.substr(pos, tag - pos);
      if (tag < src_.size()) {
        const char kind = src_[tag + 1];
        const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
        if (sign == '-') {
          size_t keep = text.size();
          while (keep > 0 && is_space(text[keep - 1])) --keep;
          text.resize(keep);
        } else if (sign != '+' && (kind == '%' || kind == '#')) {
          // lstrip_blocks: only spaces between the line's start and the tag.
          const size_t nl = text.rfind('\n');
          const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
          if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
              std::all_of(text.begin() + std::ptrdiff_t(l_pos), text.end(), is_space)) {
            text.resize(l_pos);
          }
        }
      }
      if (!text.empty()) push(TokenKind::kText, std::move(text), pos);
      if (tag >= src_.size()) break;
      pos = tag_(tag);
      line_starting = src_[pos - 1] == '\n';
    }
    Token end;
    end.where = location(src_.size());
    tokens_.push_back(end);
    return std::move(tokens_);
  }

 private:
  Location location(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = size_t(it - line_starts_.begin());
    return Location{int(line), int(offset - line_starts_[line - 1]) + 1};
  }

  void push(TokenKind kind, std::string text, size_t offset) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.where = location(offset);
    tokens_.push_back(std::move(t));
  }

  // After a tag ends at `pos` (just past its closing braces): "-" strips all
  // following whitespace; a block or comment (trim_blocks) drops one newline.
  size_t after_tag(size_t pos, char sign, bool block_like) const {
    if (sign == '-') {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
    } else if (block_like && sign != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  // Lexes the tag starting at `start` ("{{", "{%" or "{#"); returns the offset after it.
  size_t tag_(size_t start) {
    const char kind = src_[start + 1];
    size_t pos = start + 2;
    if (pos < src_.size() && (src_[pos] == '-' || src_[pos] == '+')) ++pos;
    if (kind == '#') {
      const size_t close = src_.find("#}", pos);
      if (close == std::string::npos) fail_at(location(start), "unclosed comment ({# without #})");
      const char sign = close > pos && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : '\0';
      return after_tag(close + 2, sign, true);
    }
    const bool block = kind == '%';
    push(block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, block ? "{%" : "{{", start);
    const char close_char = block ? '%' : '}';
    int depth = 0;  // open brackets: a "}}" inside {{ {'a': {'b': 1}} }} closes a dict first
    bool first = true;
    for (;;) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size())
        fail_at(location(start),
                std::string("unclosed tag (") + src_.substr(start, 2) + " without " + (block ? "%}" : "}}") + ")");
      const char c = src_[pos];
      if (depth == 0) {
        char sign = '\0';
        size_t at = pos;
        if ((c == '-' || c == '+') && src_[pos + 1] == close_char && pos + 2 < src_.size() && src_[pos + 2] == '}') {
          sign = c;
          at = pos + 1;
        }
        if (src_[at] == close_char && at + 1 < src_.size() && src_[at + 1] == '}') {
          push(block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, block ? "%}" : "}}", pos);
          return after_tag(at + 2, sign, block);
        }
      }
      const size_t token_start = pos;
      if (is_name_start(c)) {
        while (pos < src_.size() && is_name_char(src_[pos])) ++pos;
        std::string name = src_.substr(token_start, pos - token_start);
        if (block && first && name == "raw") fail_at(location(token_start), "unsupported statement 'raw'");
        push(TokenKind::kName, std::move(name), token_start);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        pos = number(pos);
      } else if (c == '\'' || c == '"') {
        pos = string_literal(pos);
      } else {
        static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                           ">",  "(",  ")",  "[",  "]",  "{",  "}", ".", ",", ":", "|", "="};
        const char* op = nullptr;
        for (const char* candidate : kOps) {
          if (src_.compare(pos, std::char_traits<char>::length(candidate), candidate) == 0) {
            op = candidate;
            break;
          }
        }
        if (op == nullptr) {
          fail_at(location(pos), std::string("unexpected character '") + c + "' in a tag");
        }
        if (*op == '(' || *op == '[' || *op == '{') ++depth;
        if ((*op == ')' || *op == ']' || *op == '}') && depth > 0) --depth;
        pos += std::char_traits<char>::length(op);
        push(TokenKind::kOp, op, token_start);
      }
      first = false;
    }
  }

  size_t number(size_t pos) {
    const size_t start = pos;
    while (pos < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos]))) ++pos;
    bool is_float = false;
    if (pos + 1 < src_.size() && src_[pos] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos + 1]))) {
      is_float = true;
      ++pos;
      while (pos < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos]))) ++pos;
    }
    if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
      size_t e = pos + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        pos = e;
        while (pos < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos]))) ++pos;
      }
    }
    const std::string text = src_.substr(start, pos - start);
    Token t;
    t.where = location(start);
    t.text = text;
    if (is_float) {
      t.kind = TokenKind::kFloat;
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      t.kind = TokenKind::kInt;
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail_at(t.where, "integer literal " + text + " is too large");
    }
    tokens_.push_back(std::move(t));
    return pos;
  }

  // Python's unicode-escape decoding, as jinja2 reads string literals.
  size_t string_literal(size_t pos) {
    const size_t start = pos;
    const char quote = src_[pos++];
    std::string out;
    auto hex = [&](size_t at, int n, uint32_t& cp) {
      if (at + size_t(n) > src_.size()) return false;
      cp = 0;
      for (int k = 0; k < n; ++k) {
        const char h = src_[at + size_t(k)];
        if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
        cp = cp * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      return true;
    };
    for (;;) {
      if (pos >= src_.size()) fail_at(location(start), "unterminated string literal");
      const char c = src_[pos];
      if (c == quote) {
        ++pos;
        break;
      }
      if (c != '\\') {
        out += c;
        ++pos;
        continue;
      }
      if (pos + 1 >= src_.size()) fail_at(location(start), "unterminated string literal");
      const char e = src_[pos + 1];
      pos += 2;
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
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case 'a':
          out += '\a';
          break;
        case '\n':
          break;  // a backslash-newline joins lines
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          if (!hex(pos, n, cp) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            fail_at(location(pos - 2), std::string("bad \\") + e + " escape in a string literal");
          }
          out += utf8_encode(cp);
          pos += size_t(n);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = uint32_t(e - '0');
            for (int k = 0; k < 2 && pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '7'; ++k) {
              cp = cp * 8 + uint32_t(src_[pos++] - '0');
            }
            out += utf8_encode(cp);
          } else {
            out += '\\';  // Python keeps unknown escapes as written
            out += e;
          }
      }
    }
    push(TokenKind::kString, std::move(out), start);
    return pos;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
  if (source.size() > kMaxTemplateBytes) {
    throw ConfigError("chat template: " + std::to_string(source.size()) + " bytes is more than the " +
                      std::to_string(kMaxTemplateBytes) + " supported");
  }
  // jinja2 reads "\r\n" and "\r" as "\n" and drops one final newline.
  std::string text;
  text.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      text += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      text += source[k];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return Lexer(std::move(text)).run();
}

}  // namespace nnsight::jinja
