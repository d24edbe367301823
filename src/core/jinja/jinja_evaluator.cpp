#include "core/jinja/jinja_evaluator.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <optional>
#include <cmath>
#include <ctime>

#include <nnsight/error.hpp>

#include "core/tokenizer/utf8.h"

namespace nnsight::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

// Code point boundaries of a UTF-8 string (Python indexes strings by code point).
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t p = 0; p < s.size();) {
    // An ill-formed sequence counts as one code point per maximal subpart (as U+FFFD would).
    const size_t n = utf8_step(std::string_view(s).substr(p)).length;
    out.push_back(s.substr(p, n));
    p += n;
  }
  return out;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_capitalize(std::string s) {
  s = ascii_lower(std::move(s));
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}
std::string ascii_title(std::string s) {
  bool start = true;
  for (char& c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start = false;
    } else {
      start = true;
    }
  }
  return s;
}

class Evaluator {
 public:
  explicit Evaluator(const Globals& globals) {
    scopes_.emplace_back(globals.begin(), globals.end());
    scopes_.emplace_back();  // the template's own variables
  }

  std::string run(const Body& body) {
    exec(body);
    return std::move(out_);
  }

 private:
  // ---- limits and errors ----
  void step(Location where) {
    if (++steps_ > kMaxSteps) {
      fail_at(where, "evaluation stopped after " + std::to_string(kMaxSteps) + " steps (a runaway template?)");
    }
  }
  void check_size(size_t bytes, Location where) const {
    if (bytes > kMaxOutputBytes) {
      fail_at(where, "text of " + std::to_string(bytes) + " bytes is more than the " + std::to_string(kMaxOutputBytes) +
                         " supported");
    }
  }
  Value make_string(std::string s, Location where) const {
    check_size(s.size(), where);
    return Value::string(std::move(s));
  }
  Value make_list(ValueList l, Location where) const {
    if (l.size() > kMaxListSize) {
      fail_at(where, "a list of " + std::to_string(l.size()) + " items is more than the " +
                         std::to_string(kMaxListSize) + " supported");
    }
    return Value::make_list(std::move(l));
  }

  static std::string describe(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kName:
        return e.name;
      case ExprKind::kGetAttr:
        return describe(*e.args[0]) + "." + e.name;
      case ExprKind::kGetItem:
        if (e.args[1]->kind == ExprKind::kLiteral) return describe(*e.args[0]) + "[" + repr(e.args[1]->value) + "]";
        return describe(*e.args[0]) + "[...]";
      default:
        return "the value";
    }
  }
  [[noreturn]] void undefined_error(const Expr& e, const Value& v) const {
    fail_at(e.where, "'" + (v.s.empty() ? describe(e) : v.s) + "' is undefined");
  }

  // ---- variables ----
  const Value* lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }

  // ---- statements ----
  Flow exec(const Body& body) {
    for (const auto& s : body) {
      Flow f = exec(*s);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  void emit(const std::string& text, Location where) {
    check_size(out_.size() + text.size(), where);
    out_ += text;
  }

  Flow exec(const Stmt& s) {
    step(s.where);
    switch (s.kind) {
      case StmtKind::kText:
        emit(s.text, s.where);
        return Flow::kNormal;
      case StmtKind::kOutput: {
        const Value v = eval(*s.expr);
        emit(to_output(v), s.where);
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        for (size_t k = 0; k < s.conditions.size(); ++k) {
          if (truthy(eval(*s.conditions[k]))) return exec(s.bodies[k]);
        }
        if (s.bodies.size() > s.conditions.size()) return exec(s.bodies.back());
        return Flow::kNormal;
      case StmtKind::kFor:
        return exec_for(s);
      case StmtKind::kSet: {
        Value v = eval(*s.expr);
        if (s.targets.size() == 1) {
          scopes_.back()[s.targets[0]] = std::move(v);
          return Flow::kNormal;
        }
        const Value* ns = lookup(s.targets[0]);
        if (ns == nullptr || ns->type != ValueType::kNamespace) {
          fail_at(s.where,
                  "cannot set attribute '" + s.targets[1] + "' of '" + s.targets[0] + "': it is not a namespace()");
        }
        for (auto& [key, item] : *ns->dict) {
          if (key == s.targets[1]) {
            item = std::move(v);
            return Flow::kNormal;
          }
        }
        ns->dict->emplace_back(s.targets[1], std::move(v));
        return Flow::kNormal;
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kBlock:
        return exec(s.bodies[0]);
    }
    return Flow::kNormal;
  }

  ValueList iterate(const Value& v, const Expr& e) const {
    switch (v.type) {
      case ValueType::kUndefined:
        return {};
      case ValueType::kList:
        return *v.list;
      case ValueType::kDict: {
        ValueList keys;
        for (const auto& kv : *v.dict) keys.push_back(Value::string(kv.first));
        return keys;
      }
      case ValueType::kString: {
        ValueList chars;
        for (auto& c : code_points(v.s)) chars.push_back(Value::string(std::move(c)));
        return chars;
      }
      default:
        fail_at(e.where, std::string("'") + type_name(v) + "' object is not iterable");
    }
  }

  Flow exec_for(const Stmt& s) {
    const ValueList items = iterate(eval(*s.expr), *s.expr);
    if (items.empty()) {
      if (s.bodies.size() > 1) return exec(s.bodies[1]);
      return Flow::kNormal;
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      if (++iterations_ > kMaxLoopIterations) {
        fail_at(s.where, "loops stopped after " + std::to_string(kMaxLoopIterations) + " iterations");
      }
      // Each iteration has its own scope: a {% set %} inside does not outlive it.
      std::unordered_map<std::string, Value> frame;
      const Value& item = items[size_t(k)];
      if (s.targets.size() == 1) {
        frame[s.targets[0]] = item;
      } else {
        if (!item.is_list() || item.list->size() != s.targets.size()) {
          fail_at(s.where, "cannot unpack " + repr(item) + " into " + std::to_string(s.targets.size()) + " variables");
        }
        for (size_t t = 0; t < s.targets.size(); ++t) frame[s.targets[t]] = (*item.list)[t];
      }
      frame["loop"] = Value::make_dict({
          {"index0", Value::integer(k)},
          {"index", Value::integer(k + 1)},
          {"revindex0", Value::integer(n - k - 1)},
          {"revindex", Value::integer(n - k)},
          {"first", Value::boolean(k == 0)},
          {"last", Value::boolean(k == n - 1)},
          {"length", Value::integer(n)},
          {"previtem", k > 0 ? items[size_t(k - 1)] : Value::undefined("loop.previtem")},
          {"nextitem", k + 1 < n ? items[size_t(k + 1)] : Value::undefined("loop.nextitem")},
      });
      scopes_.push_back(std::move(frame));
      Flow f = exec(s.bodies[0]);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  // ---- expressions ----
  Value eval(const Expr& e) {
    step(e.where);
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.value;
      case ExprKind::kName: {
        const Value* v = lookup(e.name);
        return v != nullptr ? *v : Value::undefined(e.name);
      }
      case ExprKind::kList: {
        ValueList items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return Value::make_list(std::move(items));
      }
      case ExprKind::kDict: {
        ValueDict d;
        for (size_t k = 0; k < e.keys.size(); ++k) {
          Value v = eval(*e.args[k]);
          auto it = std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first == e.keys[k]; });
          if (it != d.end()) {
            it->second = std::move(v);
          } else {
            d.emplace_back(e.keys[k], std::move(v));
          }
        }
        return Value::make_dict(std::move(d));
      }
      case ExprKind::kGetAttr: {
        const Value obj = eval(*e.args[0]);
        if (obj.is_undefined()) undefined_error(*e.args[0], obj);
        if (const Value* v = obj.find(e.name)) return *v;
        return Value::undefined(describe(e));
      }
      case ExprKind::kGetItem:
        return get_item(e, eval(*e.args[0]), eval(*e.args[1]));
      case ExprKind::kSlice:
        return slice(e);
      case ExprKind::kCall:
        return call(e);
      case ExprKind::kMethod:
        return method(e);
      case ExprKind::kFilter:
        return filter(e);
      case ExprKind::kTest:
        return Value::boolean(test(e) != e.negated);
      case ExprKind::kUnary: {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return Value::boolean(!truthy(v));
        if (v.type == ValueType::kInt || v.type == ValueType::kBool) {
          const int64_t i = v.type == ValueType::kInt ? v.i : int64_t(v.b);
          if (e.name == "+") return Value::integer(i);
          if (i == INT64_MIN) fail_at(e.where, "integer overflow");
          return Value::integer(-i);
        }
        if (v.type == ValueType::kFloat) return Value::number(e.name == "-" ? -v.f : v.f);
        fail_at(e.where, "bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
      }
      case ExprKind::kAnd: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case ExprKind::kOr: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case ExprKind::kCondition:
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined("the missing else branch");
      case ExprKind::kBinary:
        return binary(e);
    }
    return Value::undefined();
  }

  // Python's index normalisation; false when out of range.
  static bool normalize_index(int64_t& i, size_t size) {
    if (i < 0) i += int64_t(size);
    return i >= 0 && i < int64_t(size);
  }

  Value get_item(const Expr& e, const Value& obj, const Value& key) {
    if (obj.is_undefined()) undefined_error(*e.args[0], obj);
    if (obj.is_dict()) {
      if (key.is_string()) {
        if (const Value* v = obj.find(key.s)) return *v;
      }
      return Value::undefined(describe(e));
    }
    if (key.type == ValueType::kInt || key.type == ValueType::kBool) {
      int64_t i = key.type == ValueType::kInt ? key.i : int64_t(key.b);
      if (obj.is_list()) {
        if (normalize_index(i, obj.list->size())) return (*obj.list)[size_t(i)];
        return Value::undefined(describe(e));
      }
      if (obj.is_string()) {
        auto cps = code_points(obj.s);
        if (normalize_index(i, cps.size())) return Value::string(cps[size_t(i)]);
        return Value::undefined(describe(e));
      }
    }
    // jinja2 answers undefined where Python raises a lookup or type error.
    return Value::undefined(describe(e));
  }

  std::optional<int64_t> slice_part(const ExprPtr& p) {
    if (!p) return std::nullopt;
    const Value v = eval(*p);
    if (v.is_none()) return std::nullopt;
    if (v.type == ValueType::kInt) return v.i;
    if (v.type == ValueType::kBool) return int64_t(v.b);
    fail_at(p->where, std::string("slice indices must be integers or none, not '") + type_name(v) + "'");
  }

  // Python's slice.indices() then the selected positions.
  static std::vector<size_t> slice_positions(size_t size, std::optional<int64_t> start, std::optional<int64_t> stop,
                                             int64_t stride) {
    const auto n = int64_t(size);
    auto clamp = [&](std::optional<int64_t> v, int64_t if_none) {
      if (!v) return if_none;
      int64_t x = *v;
      if (x < 0) x += n;
      if (stride > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t lo = clamp(start, stride > 0 ? 0 : n - 1);
    const int64_t hi = clamp(stop, stride > 0 ? n : -1);
    std::vector<size_t> out;
    if (stride > 0) {
      for (int64_t k = lo; k < hi; k += stride) out.push_back(size_t(k));
    } else {
      for (int64_t k = lo; k > hi; k += stride) out.push_back(size_t(k));
    }
    return out;
  }

  Value slice(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    if (obj.is_undefined()) undefined_error(*e.args[0], obj);
    const auto start = slice_part(e.args[1]);
    const auto stop = slice_part(e.args[2]);
    const int64_t stride = slice_part(e.args[3]).value_or(1);
    if (stride == 0) fail_at(e.where, "slice step cannot be zero");
    if (obj.is_list()) {
      ValueList out;
      for (size_t k : slice_positions(obj.list->size(), start, stop, stride)) out.push_back((*obj.list)[k]);
      return Value::make_list(std::move(out));
    }
    if (obj.is_string()) {
      const auto cps = code_points(obj.s);
      std::string out;
      for (size_t k : slice_positions(cps.size(), start, stop, stride)) out += cps[k];
      return Value::string(std::move(out));
    }
    fail_at(e.where, std::string("cannot slice a '") + type_name(obj) + "'");
  }

  // ---- operators ----
  static bool numeric(const Value& v) { return v.is_number(); }
  static double as_double(const Value& v) {
    return v.type == ValueType::kFloat ? v.f : v.type == ValueType::kInt ? double(v.i) : double(v.b);
  }
  static int64_t as_int(const Value& v) { return v.type == ValueType::kInt ? v.i : int64_t(v.b); }

  [[noreturn]] static void operand_error(const Expr& e, const Value& a, const Value& b) {
    fail_at(e.where,
            "unsupported operand type(s) for " + e.name + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
  }

  int compare(const Expr& e, const Value& a, const Value& b) const {
    if (numeric(a) && numeric(b)) {
      const double x = as_double(a), y = as_double(b);
      if (a.type != ValueType::kFloat && b.type != ValueType::kFloat) {
        return as_int(a) < as_int(b) ? -1 : as_int(a) > as_int(b) ? 1 : 0;
      }
      return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
    if (a.is_list() && b.is_list()) {
      for (size_t k = 0; k < std::min(a.list->size(), b.list->size()); ++k) {
        if (!equals((*a.list)[k], (*b.list)[k])) return compare(e, (*a.list)[k], (*b.list)[k]);
      }
      return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
    }
    fail_at(e.where,
            "'" + e.name + "' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
  }

  bool contains(const Expr& e, const Value& container, const Value& item) const {
    switch (container.type) {
      case ValueType::kUndefined:
        return false;
      case ValueType::kString:
        if (!item.is_string()) {
          fail_at(e.where, std::string("'in <string>' requires string as left operand, not ") + type_name(item));
        }
        return container.s.find(item.s) != std::string::npos;
      case ValueType::kList:
        return std::any_of(container.list->begin(), container.list->end(),
                           [&](const Value& v) { return equals(v, item); });
      case ValueType::kDict:
        return item.is_string() && container.find(item.s) != nullptr;
      default:
        fail_at(e.where, std::string("argument of type '") + type_name(container) + "' is not iterable");
    }
  }

  Value repeat(const Expr& e, const Value& seq, int64_t times) const {
    if (times <= 0) return seq.is_string() ? Value::string("") : Value::make_list({});
    if (seq.is_string()) {
      const double total = double(seq.s.size()) * double(times);
      check_size(total > double(kMaxOutputBytes) ? kMaxOutputBytes + 1 : size_t(total), e.where);
      std::string out;
      for (int64_t k = 0; k < times; ++k) out += seq.s;
      return Value::string(std::move(out));
    }
    const double total = double(seq.list->size()) * double(times);
    if (total > double(kMaxListSize))
      fail_at(e.where, "a list of more than " + std::to_string(kMaxListSize) + " items");
    ValueList out;
    for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
    return Value::make_list(std::move(out));
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0]);
    const Value b = eval(*e.args[1]);
    if (op == "==") return Value::boolean(equals(a, b));
    if (op == "!=") return Value::boolean(!equals(a, b));
    if (op == "<") return Value::boolean(compare(e, a, b) < 0);
    if (op == ">") return Value::boolean(compare(e, a, b) > 0);
    if (op == "<=") return Value::boolean(compare(e, a, b) <= 0);
    if (op == ">=") return Value::boolean(compare(e, a, b) >= 0);
    if (op == "in") return Value::boolean(contains(e, b, a));
    if (op == "not in") return Value::boolean(!contains(e, b, a));
    if (op == "~") return make_string(to_output(a) + to_output(b), e.where);
    if (a.is_undefined()) undefined_error(*e.args[0], a);
    if (b.is_undefined()) undefined_error(*e.args[1], b);
    if (op == "+") {
      if (a.is_string() && b.is_string()) return make_string(a.s + b.s, e.where);
      if (a.is_list() && b.is_list()) {
        ValueList out = *a.list;
        out.insert(out.end(), b.list->begin(), b.list->end());
        return make_list(std::move(out), e.where);
      }
    }
    if (op == "*") {
      if ((a.is_string() || a.is_list()) && (b.type == ValueType::kInt || b.type == ValueType::kBool)) {
        return repeat(e, a, as_int(b));
      }
      if ((b.is_string() || b.is_list()) && (a.type == ValueType::kInt || a.type == ValueType::kBool)) {
        return repeat(e, b, as_int(a));
      }
    }
    if (!numeric(a) || !numeric(b)) operand_error(e, a, b);
    const bool integral = a.type != ValueType::kFloat && b.type != ValueType::kFloat;
    if (op == "/") {
      if (as_double(b) == 0) fail_at(e.where, "division by zero");
      return Value::number(as_double(a) / as_double(b));
    }
    if (integral) {
      const int64_t x = as_int(a), y = as_int(b);
      int64_t r = 0;
      if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value::integer(r);
      if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value::integer(r);
      if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value::integer(r);
      if (op == "//" || op == "%") {
        if (y == 0) fail_at(e.where, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) fail_at(e.where, "integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors
          q -= 1;
          m += y;
        }
        return Value::integer(op == "//" ? q : m);
      }
      if (op == "**" && y >= 0) {
        int64_t result = 1;
        if (x == 0 || x == 1) return Value::integer(y == 0 ? 1 : x);
        if (x == -1) return Value::integer(y % 2 == 0 ? 1 : -1);
        for (int64_t k = 0; k < y; ++k) {
          if (__builtin_mul_overflow(result, x, &result)) fail_at(e.where, "integer overflow");
        }
        return Value::integer(result);
      }
      if (op != "**") fail_at(e.where, "integer overflow");
    }
    const double x = as_double(a), y = as_double(b);
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "**") return Value::number(std::pow(x, y));
    if (y == 0) fail_at(e.where, "float division or modulo by zero");
    if (op == "//") return Value::number(std::floor(x / y));
    if (op == "%") {
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::number(m);
    }
    operand_error(e, a, b);
  }

  // ---- calls ----
  struct Args {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> named;
  };
  Args eval_args(const Expr& e, size_t first_positional) {
    Args a;
    for (size_t k = first_positional; k < e.args.size(); ++k) a.positional.push_back(eval(*e.args[k]));
    for (size_t k = 0; k < e.kwargs.size(); ++k) a.named.emplace_back(e.kwarg_names[k], eval(*e.kwargs[k]));
    return a;
  }
  // Argument `index` (positional) or `name` (keyword); nullptr when absent.
  // Fails on a positional argument beyond `max_positional` or an unknown keyword.
  static const Value* arg(const Args& a, size_t index, const char* name) {
    for (const auto& [n, v] : a.named) {
      if (n == name) return &v;
    }
    return index < a.positional.size() ? &a.positional[index] : nullptr;
  }
  static void check_args(const Expr& e, const Args& a, size_t max_positional,
                         std::initializer_list<const char*> names) {
    if (a.positional.size() > max_positional) {
      fail_at(e.where, "'" + e.name + "' takes at most " + std::to_string(max_positional) + " argument(s)");
    }
    for (const auto& kv : a.named) {
      if (std::none_of(names.begin(), names.end(), [&](const char* n) { return kv.first == n; })) {
        fail_at(e.where, "'" + e.name + "' has no argument '" + kv.first + "' (not supported)");
      }
    }
  }
  const std::string& need_string(const Expr& e, const Value* v, const char* what) const {
    if (v == nullptr || !v->is_string()) {
      fail_at(e.where, "'" + e.name + "' needs a string " + what + ", not '" + (v ? type_name(*v) : "nothing") + "'");
    }
    return v->s;
  }
  int64_t need_int(const Expr& e, const Value* v, const char* what) const {
    if (v == nullptr || (v->type != ValueType::kInt && v->type != ValueType::kBool)) {
      fail_at(e.where, "'" + e.name + "' needs an integer " + what + ", not '" + (v ? type_name(*v) : "nothing") + "'");
    }
    return as_int(*v);
  }

  Value call(const Expr& e) {
    Args a = eval_args(e, 0);
    if (e.name == "raise_exception") {
      check_args(e, a, 1, {"message"});
      const Value* msg = arg(a, 0, "message");
      throw ConfigError("chat template: " + (msg ? to_output(*msg) : std::string("raise_exception() called")));
    }
    if (e.name == "namespace") {
      if (a.positional.size() > 1) fail_at(e.where, "namespace() takes one dict and keyword arguments");
      ValueDict d;
      if (!a.positional.empty()) {
        if (a.positional[0].type != ValueType::kDict) fail_at(e.where, "namespace() takes a dict or keywords");
        d = *a.positional[0].dict;
      }
      for (auto& [k, v] : a.named) d.emplace_back(k, std::move(v));
      return Value::make_namespace(std::move(d));
    }
    if (e.name == "range") {
      check_args(e, a, 3, {});
      if (a.positional.empty()) fail_at(e.where, "range() needs an argument");
      int64_t start = 0, stop = 0, stride = 1;
      if (a.positional.size() == 1) {
        stop = need_int(e, &a.positional[0], "stop");
      } else {
        start = need_int(e, &a.positional[0], "start");
        stop = need_int(e, &a.positional[1], "stop");
        if (a.positional.size() == 3) stride = need_int(e, &a.positional[2], "step");
      }
      if (stride == 0) fail_at(e.where, "range() step must not be zero");
      const double count = std::max(0.0, std::ceil((double(stop) - double(start)) / double(stride)));
      if (count > double(kMaxListSize)) {
        fail_at(e.where, "range() of more than " + std::to_string(kMaxListSize) + " items");
      }
      ValueList out;
      for (int64_t k = start; stride > 0 ? k < stop : k > stop; k += stride) out.push_back(Value::integer(k));
      return Value::make_list(std::move(out));
    }
    if (e.name == "strftime_now") {
      check_args(e, a, 1, {"format"});
      const std::string& format = need_string(e, arg(a, 0, "format"), "format");
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buf[512];
      const size_t n = format.size() < 200 ? std::strftime(buf, sizeof buf, format.c_str(), &local) : 0;
      return Value::string(std::string(buf, n));
    }
    fail_at(e.where, "unsupported function '" + e.name + "()'");
  }

  Value split(const Expr& e, const std::string& s, const Value* sep, int64_t maxsplit) const {
    ValueList parts;
    if (sep == nullptr || sep->is_none()) {
      // Runs of whitespace separate; leading and trailing whitespace are dropped.
      size_t p = 0;
      auto space = [&](size_t at) { return is_py_space(static_cast<unsigned char>(s[at])) && s[at] >= 0; };
      while (p < s.size()) {
        while (p < s.size() && space(p)) ++p;
        if (p >= s.size()) break;
        if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
          std::string rest = s.substr(p);
          size_t end = rest.size();
          while (end > 0 && is_py_space(static_cast<unsigned char>(rest[end - 1])) && rest[end - 1] >= 0) --end;
          parts.push_back(Value::string(rest.substr(0, end)));
          break;
        }
        size_t q = p;
        while (q < s.size() && !space(q)) ++q;
        parts.push_back(Value::string(s.substr(p, q - p)));
        p = q;
      }
      return make_list(std::move(parts), e.where);
    }
    const std::string& d = need_string(e, sep, "separator");
    if (d.empty()) fail_at(e.where, "empty separator");
    size_t p = 0;
    for (;;) {
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) break;
      const size_t q = s.find(d, p);
      if (q == std::string::npos) break;
      parts.push_back(Value::string(s.substr(p, q - p)));
      p = q + d.size();
    }
    parts.push_back(Value::string(s.substr(p)));
    return make_list(std::move(parts), e.where);
  }

  Value replace(const Expr& e, const std::string& s, const std::string& from, const std::string& to,
                int64_t count) const {
    std::string out;
    if (from.empty()) {
      // Python inserts `to` around every code point.
      int64_t done = 0;
      for (const auto& cp : code_points(s)) {
        if (count < 0 || done < count) {
          out += to;
          ++done;
        }
        out += cp;
        check_size(out.size(), e.where);
      }
      if (count < 0 || done < count) out += to;
      return make_string(std::move(out), e.where);
    }
    size_t p = 0;
    int64_t done = 0;
    for (;;) {
      const size_t q = (count < 0 || done < count) ? s.find(from, p) : std::string::npos;
      if (q == std::string::npos) break;
      out.append(s, p, q - p);
      out += to;
      check_size(out.size(), e.where);
      p = q + from.size();
      ++done;
    }
    out.append(s, p, std::string::npos);
    return make_string(std::move(out), e.where);
  }

  Value items_of(const Value& d) const {
    ValueList out;
    for (const auto& [k, v] : *d.dict) out.push_back(Value::make_list({Value::string(k), v}));
    return Value::make_list(std::move(out));
  }

  Value method(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    if (obj.is_undefined()) undefined_error(*e.args[0], obj);
    Args a = eval_args(e, 1);
    const std::string& m = e.name;
    if (obj.is_string()) {
      const std::string& s = obj.s;
      if (m == "startswith" || m == "endswith") {
        check_args(e, a, 1, {});
        const Value* p = arg(a, 0, "prefix");
        std::vector<std::string> options;
        if (p != nullptr && p->is_list()) {
          for (const Value& v : *p->list) options.push_back(need_string(e, &v, "prefix"));
        } else {
          options.push_back(need_string(e, p, "prefix"));
        }
        for (const auto& o : options) {
          if (o.size() <= s.size() &&
              (m == "startswith" ? s.compare(0, o.size(), o) == 0 : s.compare(s.size() - o.size(), o.size(), o) == 0)) {
            return Value::boolean(true);
          }
        }
        return Value::boolean(false);
      }
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        check_args(e, a, 1, {});
        const Value* chars = arg(a, 0, "chars");
        const std::string* set = nullptr;
        if (chars != nullptr && !chars->is_none()) set = &need_string(e, chars, "set of characters");
        return Value::string(py_strip(s, m != "rstrip", m != "lstrip", set));
      }
      if (m == "split") {
        check_args(e, a, 2, {"sep", "maxsplit"});
        const Value* maxsplit = arg(a, 1, "maxsplit");
        return split(e, s, arg(a, 0, "sep"), maxsplit ? need_int(e, maxsplit, "maxsplit") : -1);
      }
      if (m == "upper") return Value::string(ascii_upper(s));
      if (m == "lower") return Value::string(ascii_lower(s));
      if (m == "title") return Value::string(ascii_title(s));
      if (m == "capitalize") return Value::string(ascii_capitalize(s));
      if (m == "replace") {
        check_args(e, a, 3, {});
        const Value* count = arg(a, 2, "count");
        return replace(e, s, need_string(e, arg(a, 0, "old"), "old text"), need_string(e, arg(a, 1, "new"), "new text"),
                       count ? need_int(e, count, "count") : -1);
      }
    }
    if (obj.type == ValueType::kDict) {
      if (m == "items") return items_of(obj);
      if (m == "keys") return Value::make_list(iterate(obj, e));
      if (m == "values") {
        ValueList out;
        for (const auto& kv : *obj.dict) out.push_back(kv.second);
        return Value::make_list(std::move(out));
      }
      if (m == "get") {
        check_args(e, a, 2, {});
        const Value* key = arg(a, 0, "key");
        const Value* fallback = arg(a, 1, "default");
        if (key != nullptr && key->is_string()) {
          if (const Value* v = obj.find(key->s)) return *v;
        }
        return fallback ? *fallback : Value::none();
      }
    }
    fail_at(e.where, std::string("'") + type_name(obj) + "' object has no method '" + m + "()' (not supported)");
  }

  Value filter(const Expr& e) {
    const Value v = eval(*e.args[0]);
    Args a = eval_args(e, 1);
    const std::string& f = e.name;
    if (f == "default" || f == "d") {
      check_args(e, a, 2, {"default_value", "boolean"});
      const Value* fallback = arg(a, 0, "default_value");
      const Value* boolean = arg(a, 1, "boolean");
      const bool use = v.is_undefined() || (boolean != nullptr && truthy(*boolean) && !truthy(v));
      if (!use) return v;
      return fallback ? *fallback : Value::string("");
    }
    if (f == "length" || f == "count") {
      check_args(e, a, 0, {});
      switch (v.type) {
        case ValueType::kUndefined:
          return Value::integer(0);
        case ValueType::kString:
          return Value::integer(int64_t(code_points(v.s).size()));
        case ValueType::kList:
          return Value::integer(int64_t(v.list->size()));
        case ValueType::kDict:
          return Value::integer(int64_t(v.dict->size()));
        default:
          fail_at(e.where, std::string("object of type '") + type_name(v) + "' has no len()");
      }
    }
    if (f == "safe") return v;
    if (f == "tojson") {
      check_args(e, a, 0, {"indent", "ensure_ascii", "sort_keys", "separators"});
      for (const auto& kv : a.named) {
        if (kv.first != "indent" && truthy(kv.second)) {
          fail_at(e.where, "tojson(" + kv.first + "=...) is not supported (only indent)");
        }
      }
      const Value* indent = arg(a, 99, "indent");
      std::string out;
      if (!to_json(v,
                   indent && !indent->is_none() ? int(std::clamp<int64_t>(need_int(e, indent, "indent"), 0, 64)) : -1,
                   out)) {
        if (v.is_undefined()) undefined_error(*e.args[0], v);
        fail_at(e.where, std::string("object of type '") + type_name(v) + "' is not JSON serializable");
      }
      return make_string(std::move(out), e.where);
    }
    if (f == "items") {
      check_args(e, a, 0, {});
      if (v.is_undefined()) return Value::make_list({});
      if (v.type != ValueType::kDict) fail_at(e.where, std::string("'items' needs a dict, not '") + type_name(v) + "'");
      return items_of(v);
    }
    if (f == "list") {
      check_args(e, a, 0, {});
      return Value::make_list(iterate(v, e));
    }
    if (f == "first" || f == "last") {
      check_args(e, a, 0, {});
      const ValueList items = iterate(v, e);
      if (items.empty()) return Value::undefined(describe(e));
      return f == "first" ? items.front() : items.back();
    }
    if (f == "join") {
      check_args(e, a, 1, {"d"});
      const Value* sep = arg(a, 0, "d");
      const std::string separator = sep ? to_output(*sep) : "";
      std::string out;
      bool first = true;
      for (const Value& item : iterate(v, e)) {
        if (!first) out += separator;
        first = false;
        out += to_output(item);
        check_size(out.size(), e.where);
      }
      return Value::string(std::move(out));
    }
    if (f == "int") {
      check_args(e, a, 1, {"default"});
      const Value* fallback = arg(a, 0, "default");
      if (v.type == ValueType::kInt || v.type == ValueType::kBool) return Value::integer(as_int(v));
      if (v.type == ValueType::kFloat && std::isfinite(v.f) && std::fabs(v.f) < 9e18) {
        return Value::integer(int64_t(v.f));
      }
      if (v.is_string()) {
        const std::string t = py_strip(v.s, true, true, nullptr);
        char* end = nullptr;
        errno = 0;
        const long long i = std::strtoll(t.c_str(), &end, 10);
        if (!t.empty() && end == t.c_str() + t.size() && errno == 0) return Value::integer(i);
      }
      return fallback ? *fallback : Value::integer(0);
    }
    if (f == "float") {
      check_args(e, a, 1, {"default"});
      if (numeric(v)) return Value::number(as_double(v));
      if (v.is_string()) {
        const std::string t = py_strip(v.s, true, true, nullptr);
        char* end = nullptr;
        const double d = std::strtod(t.c_str(), &end);
        if (!t.empty() && end == t.c_str() + t.size()) return Value::number(d);
      }
      const Value* fallback = arg(a, 0, "default");
      return fallback ? *fallback : Value::number(0);
    }
    if (f == "abs") {
      check_args(e, a, 0, {});
      if (v.type == ValueType::kFloat) return Value::number(std::fabs(v.f));
      if (v.type == ValueType::kInt || v.type == ValueType::kBool) {
        if (as_int(v) == INT64_MIN) fail_at(e.where, "integer overflow");
        return Value::integer(std::llabs(as_int(v)));
      }
      fail_at(e.where, std::string("bad operand type for abs(): '") + type_name(v) + "'");
    }
    // The string filters: jinja2 converts their input with str() (undefined is "").
    const std::string s = to_output(v);
    if (f == "trim") {
      check_args(e, a, 1, {"chars"});
      const Value* chars = arg(a, 0, "chars");
      const std::string* set = nullptr;
      if (chars != nullptr && !chars->is_none()) set = &need_string(e, chars, "set of characters");
      return Value::string(py_strip(s, true, true, set));
    }
    if (f == "string") return Value::string(s);
    if (f == "upper") return Value::string(ascii_upper(s));
    if (f == "lower") return Value::string(ascii_lower(s));
    if (f == "capitalize") return Value::string(ascii_capitalize(s));
    if (f == "title") return Value::string(ascii_title(s));
    if (f == "replace") {
      check_args(e, a, 3, {"old", "new", "count"});
      const Value* count = arg(a, 2, "count");
      return replace(e, s, need_string(e, arg(a, 0, "old"), "old text"), need_string(e, arg(a, 1, "new"), "new text"),
                     count && !count->is_none() ? need_int(e, count, "count") : -1);
    }
    fail_at(e.where, "unsupported filter '" + f + "'");
  }

  bool test(const Expr& e) {
    const Value v = eval(*e.args[0]);
    Args a = eval_args(e, 1);
    const std::string& t = e.name;
    auto other = [&]() -> const Value& {
      if (a.positional.empty()) fail_at(e.where, "test '" + t + "' needs an argument");
      return a.positional[0];
    };
    if (t == "defined") return !v.is_undefined();
    if (t == "undefined") return v.is_undefined();
    if (t == "none") return v.is_none();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.type == ValueType::kInt;
    if (t == "float") return v.type == ValueType::kFloat;
    if (t == "boolean") return v.type == ValueType::kBool;
    if (t == "true") return v.type == ValueType::kBool && v.b;
    if (t == "false") return v.type == ValueType::kBool && !v.b;
    if (t == "mapping") return v.type == ValueType::kDict;
    if (t == "iterable") return v.is_string() || v.is_list() || v.type == ValueType::kDict || v.is_undefined();
    if (t == "sequence") return v.is_string() || v.is_list() || v.type == ValueType::kDict || v.is_undefined();
    if (t == "lower") return v.is_string() && ascii_lower(v.s) == v.s && ascii_upper(v.s) != v.s;
    if (t == "upper") return v.is_string() && ascii_upper(v.s) == v.s && ascii_lower(v.s) != v.s;
    if (t == "even" || t == "odd") {
      if (v.type != ValueType::kInt && v.type != ValueType::kBool) {
        fail_at(e.where, std::string("test '") + t + "' needs an integer, not '" + type_name(v) + "'");
      }
      const bool even = as_int(v) % 2 == 0;
      return t == "even" ? even : !even;
    }
    if (t == "divisibleby") {
      const int64_t d = need_int(e, &other(), "divisor");
      if (d == 0) fail_at(e.where, "division by zero");
      return need_int(e, &v, "value") % d == 0;
    }
    if (t == "equalto" || t == "eq") return equals(v, other());
    if (t == "ne") return !equals(v, other());
    if (t == "sameas") {
      const Value& o = other();
      if (v.type != o.type) return false;
      if (v.type == ValueType::kList) return v.list == o.list;
      if (v.is_dict()) return v.dict == o.dict;
      return equals(v, o);
    }
    if (t == "lt" || t == "gt" || t == "le" || t == "ge") {
      const int c = compare(e, v, other());
      return t == "lt" ? c < 0 : t == "gt" ? c > 0 : t == "le" ? c <= 0 : c >= 0;
    }
    if (t == "in") return contains(e, other(), v);
    fail_at(e.where, "unsupported test '" + t + "'");
  }

  std::vector<std::unordered_map<std::string, Value>> scopes_;
  std::string out_;
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace

std::string render(const Body& body, const Globals& globals) { return Evaluator(globals).run(body); }

}  // namespace nnsight::jinja
