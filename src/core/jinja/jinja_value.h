// Values of the Jinja subset (core/jinja): what a chat template computes with.
// They follow Python's semantics where a template can see them (truthiness,
// equality, str(), json.dumps), since transformers renders with jinja2.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace nnsight::jinja {

struct Value;
using ValueList = std::vector<Value>;
// Insertion-ordered, string keys (what chat messages and dict literals hold).
using ValueDict = std::vector<std::pair<std::string, Value>>;

enum class ValueType { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace };

struct Value {
  ValueType type = ValueType::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // the string; for an undefined value, what was looked up (for messages)
  // Lists and dicts are immutable once built (as in transformers' immutable
  // sandbox); a namespace's dict is shared and mutable ({% set ns.x = ... %}).
  std::shared_ptr<const ValueList> list;
  std::shared_ptr<ValueDict> dict;

  static Value undefined(std::string what = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(ValueList v);
  static Value make_dict(ValueDict v);
  static Value make_namespace(ValueDict v);

  bool is_undefined() const { return type == ValueType::kUndefined; }
  bool is_none() const { return type == ValueType::kNone; }
  bool is_string() const { return type == ValueType::kString; }
  bool is_list() const { return type == ValueType::kList; }
  bool is_dict() const { return type == ValueType::kDict || type == ValueType::kNamespace; }
  bool is_number() const { return type == ValueType::kInt || type == ValueType::kFloat || type == ValueType::kBool; }

  // The entry for `key` of a dict or namespace, or nullptr.
  const Value* find(const std::string& key) const;
};

// Python's bool(v); undefined is false.
bool truthy(const Value& v);
// Python's str(v) as jinja2 prints it: undefined prints as nothing, None as
// "None", lists and dicts as their repr.
std::string to_output(const Value& v);
// Python's repr(v) ("'a'", "[1, 'b']", "{'k': None}").
std::string repr(const Value& v);
// Python's ==, numbers across int/float/bool; undefined equals only undefined.
bool equals(const Value& a, const Value& b);
// The Python type name a message uses ("str", "int", "list", "dict", ...).
const char* type_name(const Value& v);
// json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none).
// Returns false (out untouched) when v holds something JSON cannot (undefined, a namespace).
bool to_json(const Value& v, int indent, std::string& out);
// repr() of a float as Python writes it ("1.0", "0.1", "1e+20").
std::string float_repr(double v);

// Python's str.isspace() for one code point.
bool is_py_space(uint32_t cp);
// str.strip()/lstrip()/rstrip() with Python's whitespace (chars empty) or the given characters.
std::string py_strip(const std::string& s, bool left, bool right, const std::string* chars);

}  // namespace nnsight::jinja
