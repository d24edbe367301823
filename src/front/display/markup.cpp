#include "front/display/markup.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace nnsight::display {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0 && b >= 0xC2)
    n = 2;
  else if ((b & 0xF0) == 0xE0)
    n = 3;
  else if ((b & 0xF8) == 0xF0 && b <= 0xF4)
    n = 4;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

}  // namespace

std::string escape_xml(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string visible(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b == '\n') {
      out += "\\n";
      ++i;
      continue;
    }
    if (b == '\t') {
      out += "\\t";
      ++i;
      continue;
    }
    if (b == '\r') {
      out += "\\r";
      ++i;
      continue;
    }
    if (b < 0x20 || b == 0x7F) {
      out += hex_byte(b);
      ++i;
      continue;
    }
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += hex_byte(b);
      ++i;
      continue;
    }
    out.append(s, i, n);
    i += n;
  }
  return out;
}

size_t utf8_length(const std::string& s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++count) {
    const size_t n = utf8_sequence(s, i);
    i += n == 0 ? 1 : n;
  }
  return count;
}

std::string truncate_utf8(const std::string& s, size_t max_chars) {
  if (utf8_length(s) <= max_chars) return s;
  std::string out;
  size_t count = 0;
  for (size_t i = 0; i < s.size() && count + 1 < max_chars; ++count) {
    const size_t n = utf8_sequence(s, i);
    const size_t len = n == 0 ? 1 : n;
    out.append(s, i, len);
    i += len;
  }
  return out + "\u2026";
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string format_shape(const std::vector<int64_t>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

std::string pad(const std::string& s, size_t width) {
  const size_t n = utf8_length(s);
  return n >= width ? s : s + std::string(width - n, ' ');
}

std::string probability_fill(double p) {
  p = std::clamp(p, 0.0, 1.0);
  const int lo[3] = {247, 251, 255}, hi[3] = {8, 48, 107};
  int c[3];
  for (int k = 0; k < 3; ++k) c[k] = static_cast<int>(lo[k] + (hi[k] - lo[k]) * p + 0.5);
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buf;
}

std::string probability_legend(int64_t x, int64_t top, int64_t height) {
  std::string s;
  const int steps = 10;
  for (int k = 0; k < steps; ++k) {
    const double v = 1.0 - (k + 0.5) / steps;
    s += "<rect class=\"legend\" x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(top + height * k / steps) +
         "\" width=\"14\" height=\"" + std::to_string(height / steps + 1) + "\" fill=\"" + probability_fill(v) +
         "\"/>\n";
  }
  s += "<text x=\"" + std::to_string(x + 18) + "\" y=\"" + std::to_string(top + 8) + "\">1</text>\n";
  s += "<text x=\"" + std::to_string(x + 18) + "\" y=\"" + std::to_string(top + height) + "\">0</text>\n";
  return s;
}

}  // namespace nnsight::display
