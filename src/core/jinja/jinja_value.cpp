#include "core/jinja/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace nnsight::jinja {

Value Value::undefined(std::string what) {
  Value v;
  v.s = std::move(what);
  return v;
}
Value Value::none() {
  Value v;
  v.type = ValueType::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.type = ValueType::kBool;
  v.b = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.type = ValueType::kInt;
  v.i = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.type = ValueType::kFloat;
  v.f = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.type = ValueType::kString;
  v.s = std::move(s);
  return v;
}
Value Value::make_list(ValueList l) {
  Value v;
  v.type = ValueType::kList;
  v.list = std::make_shared<const ValueList>(std::move(l));
  return v;
}
Value Value::make_dict(ValueDict d) {
  Value v;
  v.type = ValueType::kDict;
  v.dict = std::make_shared<ValueDict>(std::move(d));
  return v;
}
Value Value::make_namespace(ValueDict d) {
  Value v = make_dict(std::move(d));
  v.type = ValueType::kNamespace;
  return v;
}

const Value* Value::find(const std::string& key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, val] : *dict) {
    if (k == key) return &val;
  }
  return nullptr;
}

bool truthy(const Value& v) {
  switch (v.type) {
    case ValueType::kUndefined:
    case ValueType::kNone:
      return false;
    case ValueType::kBool:
      return v.b;
    case ValueType::kInt:
      return v.i != 0;
    case ValueType::kFloat:
      return v.f != 0;
    case ValueType::kString:
      return !v.s.empty();
    case ValueType::kList:
      return !v.list->empty();
    case ValueType::kDict:
      return !v.dict->empty();
    case ValueType::kNamespace:
      return true;
  }
  return false;
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // The shortest digits that read back as v (Python's repr).
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // buf is d.ddde[+-]XX; Python uses positional notation for 1e-4 <= |v| < 1e16.
  std::string sci(buf);
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exponent >= -5 && exponent < 16) {
    if (exponent >= 0) {
      if (digits.size() <= size_t(exponent) + 1) {
        out = digits + std::string(size_t(exponent) + 1 - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, size_t(exponent) + 1) + "." + digits.substr(size_t(exponent) + 1);
      }
    } else {
      out = "0." + std::string(size_t(-exponent - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return negative ? "-" + out : out;
}

namespace {

std::string repr_string(const std::string& s) {
  // Python prefers single quotes, switching to double quotes when the text has
  // a single quote and no double quote.
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c == static_cast<unsigned char>(q)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += q;
  return out;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

bool json_value(const Value& v, int indent, int level, std::string& out) {
  auto newline = [&](int lvl) {
    if (indent >= 0) {
      out += '\n';
      out.append(size_t(indent) * size_t(lvl), ' ');
    }
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.type) {
    case ValueType::kUndefined:
    case ValueType::kNamespace:
      return false;
    case ValueType::kNone:
      out += "null";
      return true;
    case ValueType::kBool:
      out += v.b ? "true" : "false";
      return true;
    case ValueType::kInt:
      out += std::to_string(v.i);
      return true;
    case ValueType::kFloat:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : float_repr(v.f);
      return true;
    case ValueType::kString:
      json_string(v.s, out);
      return true;
    case ValueType::kList: {
      if (v.list->empty()) {
        out += "[]";
        return true;
      }
      out += '[';
      bool first = true;
      for (const Value& item : *v.list) {
        if (!first) out += item_sep;
        first = false;
        newline(level + 1);
        if (!json_value(item, indent, level + 1, out)) return false;
      }
      newline(level);
      out += ']';
      return true;
    }
    case ValueType::kDict: {
      if (v.dict->empty()) {
        out += "{}";
        return true;
      }
      out += '{';
      bool first = true;
      for (const auto& [k, item] : *v.dict) {
        if (!first) out += item_sep;
        first = false;
        newline(level + 1);
        json_string(k, out);
        out += ": ";
        if (!json_value(item, indent, level + 1, out)) return false;
      }
      newline(level);
      out += '}';
      return true;
    }
  }
  return false;
}

// Decodes one code point at s[pos] (a lone invalid byte counts as itself).
uint32_t decode_at(const std::string& s, size_t pos, size_t& length) {
  const auto c = static_cast<unsigned char>(s[pos]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || pos + size_t(n) > s.size()) {
    length = 1;
    return c;
  }
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1fu) : n == 3 ? (c & 0x0fu) : (c & 0x07u);
  for (int k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[pos + size_t(k)]);
    if ((cc >> 6) != 2) {
      length = 1;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3fu);
  }
  length = size_t(n);
  return cp;
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.type) {
    case ValueType::kString:
      return repr_string(v.s);
    case ValueType::kList: {
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += repr((*v.list)[k]);
      }
      return out + "]";
    }
    case ValueType::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : *v.dict) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(key) + ": " + repr(item);
      }
      return out + "}";
    }
    case ValueType::kNamespace:
      return "<Namespace>";
    default:
      return to_output(v);
  }
}

std::string to_output(const Value& v) {
  switch (v.type) {
    case ValueType::kUndefined:
      return "";
    case ValueType::kNone:
      return "None";
    case ValueType::kBool:
      return v.b ? "True" : "False";
    case ValueType::kInt:
      return std::to_string(v.i);
    case ValueType::kFloat:
      return float_repr(v.f);
    case ValueType::kString:
      return v.s;
    default:
      return repr(v);
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    auto as_double = [](const Value& v) {
      return v.type == ValueType::kFloat ? v.f : v.type == ValueType::kInt ? double(v.i) : double(v.b);
    };
    if (a.type != ValueType::kFloat && b.type != ValueType::kFloat) {
      auto as_int = [](const Value& v) { return v.type == ValueType::kInt ? v.i : int64_t(v.b); };
      return as_int(a) == as_int(b);
    }
    return as_double(a) == as_double(b);
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case ValueType::kUndefined:
    case ValueType::kNone:
      return true;
    case ValueType::kString:
      return a.s == b.s;
    case ValueType::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case ValueType::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [key, item] : *a.dict) {
        const Value* other = b.find(key);
        if (other == nullptr || !equals(item, *other)) return false;
      }
      return true;
    case ValueType::kNamespace:
      return a.dict == b.dict;
    default:
      return false;
  }
}

const char* type_name(const Value& v) {
  switch (v.type) {
    case ValueType::kUndefined:
      return "undefined";
    case ValueType::kNone:
      return "NoneType";
    case ValueType::kBool:
      return "bool";
    case ValueType::kInt:
      return "int";
    case ValueType::kFloat:
      return "float";
    case ValueType::kString:
      return "str";
    case ValueType::kList:
      return "list";
    case ValueType::kDict:
      return "dict";
    case ValueType::kNamespace:
      return "Namespace";
  }
  return "?";
}

bool to_json(const Value& v, int indent, std::string& out) {
  std::string text;
  if (!json_value(v, indent, 0, text)) return false;
  out += text;
  return true;
}

bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

std::string py_strip(const std::string& s, bool left, bool right, const std::string* chars) {
  std::vector<uint32_t> strip_set;
  if (chars != nullptr) {
    for (size_t p = 0, len = 0; p < chars->size(); p += len) strip_set.push_back(decode_at(*chars, p, len));
  }
  auto strips = [&](uint32_t cp) {
    return chars == nullptr ? is_py_space(cp) : std::find(strip_set.begin(), strip_set.end(), cp) != strip_set.end();
  };
  // Code point boundaries, so that stripping never cuts a character.
  std::vector<size_t> starts;
  std::vector<uint32_t> cps;
  for (size_t p = 0, len = 0; p < s.size(); p += len) {
    starts.push_back(p);
    cps.push_back(decode_at(s, p, len));
  }
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strips(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strips(cps[end - 1])) --end;
  }
  const size_t byte_begin = begin < starts.size() ? starts[begin] : s.size();
  const size_t byte_end = end < starts.size() ? starts[end] : s.size();
  return s.substr(byte_begin, byte_end - byte_begin);
}

}  // namespace nnsight::jinja
