#include "core/jinja/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

namespace nnsight::jinja {
namespace {

// What the evaluator implements (core/jinja/jinja_evaluator.cpp); the rest is refused at parse time.
constexpr const char* kFilters[] = {"abs",     "capitalize", "count",  "d",     "default", "first", "float",
                                    "int",     "items",      "join",   "last",  "length",  "list",  "lower",
                                    "replace", "safe",       "string", "title", "tojson",  "trim",  "upper"};
constexpr const char* kTests[] = {"boolean", "defined",  "divisibleby", "eq",   "equalto",   "even",     "false",
                                  "float",   "ge",       "gt",          "in",   "integer",   "iterable", "le",
                                  "lower",   "lt",       "mapping",     "ne",   "none",      "number",   "odd",
                                  "sameas",  "sequence", "string",      "true", "undefined", "upper"};
constexpr const char* kMethods[] = {"capitalize", "endswith", "get",     "items",  "keys",
                                    "lower",      "lstrip",   "replace", "rstrip", "split",
                                    "startswith", "strip",    "title",   "upper",  "values"};
constexpr const char* kFunctions[] = {"namespace", "raise_exception", "range", "strftime_now"};

template <size_t N>
bool listed(const char* const (&names)[N], const std::string& name) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

template <size_t N>
std::string joined(const char* const (&names)[N]) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

constexpr int kMaxDepth = 200;  // nested expressions or blocks

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse() {
    std::string ended;
    Body body = parse_until({}, ended, Location{});
    return body;
  }

 private:
  // ---- tokens ----
  const Token& peek(size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[p_];
    if (p_ + 1 < t_.size()) ++p_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOp && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEnd:
        return "the end of the template";
      case TokenKind::kText:
        return "text";
      case TokenKind::kString:
        return "a string";
      case TokenKind::kBlockEnd:
        return "'%}'";
      case TokenKind::kVarEnd:
        return "'}}'";
      default:
        return "'" + t.text + "'";
    }
  }
  [[noreturn]] void unexpected(const std::string& wanted) const {
    fail_at(peek().where, "expected " + wanted + ", found " + describe(peek()));
  }
  void expect_op(const char* op) {
    if (!is_op(op)) unexpected(std::string("'") + op + "'");
    next();
  }
  void expect_block_end(const char* statement) {
    if (peek().kind != TokenKind::kBlockEnd) {
      fail_at(peek().where, std::string("expected '%}' to end the '") + statement + "' statement, found " +
                                describe(peek()) + " (not supported there)");
    }
    next();
  }
  std::string expect_name(const char* what) {
    if (peek().kind != TokenKind::kName) unexpected(what);
    return next().text;
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxDepth) fail_at(p.peek().where, "nested too deeply (more than 200 levels)");
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  // ---- statements ----
  // Parses until a {% name %} with name in `stops`; returns with the position
  // on that name and its text in `ended`. `opened` is where the enclosing
  // statement began (for "missing end" messages).
  Body parse_until(std::initializer_list<const char*> stops, std::string& ended, Location opened) {
    DepthGuard guard(*this);
    Body body;
    for (;;) {
      const Token& t = peek();
      if (t.kind == TokenKind::kEnd) {
        if (stops.size() == 0) return body;
        fail_at(opened, std::string("this statement is never closed (no {% ") + *(stops.end() - 1) + " %})");
      }
      if (t.kind == TokenKind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->where = t.where;
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->where = next().where;
        s->expr = parse_expression();
        if (peek().kind != TokenKind::kVarEnd) unexpected("'}}'");
        next();
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kBlockBegin) {
        next();
        if (peek().kind != TokenKind::kName) unexpected("a statement name");
        const std::string& name = peek().text;
        for (const char* stop : stops) {
          if (name == stop) {
            ended = name;
            return body;
          }
        }
        body.push_back(statement());
      } else {
        unexpected("text or a tag");
      }
    }
  }

  std::unique_ptr<Stmt> statement() {
    const Token& head = next();
    const std::string name = head.text;
    auto s = std::make_unique<Stmt>();
    s->where = head.where;
    std::string ended;
    if (name == "if") {
      s->kind = StmtKind::kIf;
      s->conditions.push_back(parse_expression());
      expect_block_end("if");
      for (;;) {
        s->bodies.push_back(parse_until({"elif", "else", "endif"}, ended, head.where));
        next();
        if (ended == "elif") {
          s->conditions.push_back(parse_expression());
          expect_block_end("elif");
        } else if (ended == "else") {
          expect_block_end("else");
          s->bodies.push_back(parse_until({"endif"}, ended, head.where));
          next();
          expect_block_end("endif");
          break;
        } else {
          expect_block_end("endif");
          break;
        }
      }
    } else if (name == "for") {
      s->kind = StmtKind::kFor;
      s->targets.push_back(expect_name("a loop variable"));
      while (is_op(",")) {
        next();
        s->targets.push_back(expect_name("a loop variable"));
      }
      if (!is_name("in")) unexpected("'in'");
      next();
      s->expr = parse_or();
      if (is_name("if")) fail_at(peek().where, "unsupported construct: a loop filter ('for ... in ... if ...')");
      if (is_name("recursive")) fail_at(peek().where, "unsupported construct: recursive loops");
      expect_block_end("for");
      ++loop_depth_;
      s->bodies.push_back(parse_until({"else", "endfor"}, ended, head.where));
      --loop_depth_;
      next();
      if (ended == "else") {
        expect_block_end("else");
        s->bodies.push_back(parse_until({"endfor"}, ended, head.where));
        next();
      }
      expect_block_end("endfor");
    } else if (name == "set") {
      s->kind = StmtKind::kSet;
      s->targets.push_back(expect_name("a variable name"));
      if (is_op(".")) {
        next();
        s->targets.push_back(expect_name("an attribute name"));
      }
      if (peek().kind == TokenKind::kBlockEnd) {
        fail_at(head.where, "unsupported construct: block assignment ({% set x %}...{% endset %})");
      }
      if (is_op(",")) fail_at(peek().where, "unsupported construct: assigning several variables in one set");
      expect_op("=");
      s->expr = parse_expression();
      expect_block_end("set");
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail_at(head.where, "'" + name + "' outside a for loop");
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect_block_end(name == "break" ? "break" : "continue");
    } else if (name == "generation") {
      // transformers' AssistantTracker: marks the assistant's text; renders its body.
      s->kind = StmtKind::kBlock;
      expect_block_end("generation");
      s->bodies.push_back(parse_until({"endgeneration"}, ended, head.where));
      next();
      expect_block_end("endgeneration");
    } else if (name == "elif" || name == "else" || name == "endif" || name == "endfor" || name == "endgeneration") {
      fail_at(head.where, "'" + name + "' without a matching opening statement");
    } else {
      fail_at(head.where, "unsupported statement '" + name +
                              "' (supported: if/elif/else, for/else, set, break, continue, generation)");
    }
    return s;
  }

  // ---- expressions ----
  ExprPtr make(ExprKind kind, Location where, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->where = where;
    e->name = std::move(name);
    return e;
  }
  ExprPtr binary(ExprKind kind, std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(kind, a->where, std::move(op));
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    ExprPtr value = parse_or();
    if (!is_name("if")) return value;
    next();
    auto e = make(ExprKind::kCondition, value->where);
    ExprPtr condition = parse_or();
    ExprPtr otherwise;
    if (is_name("else")) {
      next();
      otherwise = parse_expression();
    }
    e->args.push_back(std::move(value));
    e->args.push_back(std::move(condition));
    e->args.push_back(std::move(otherwise));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      next();
      left = binary(ExprKind::kOr, "or", std::move(left), parse_and());
    }
    return left;
  }
  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      next();
      left = binary(ExprKind::kAnd, "and", std::move(left), parse_not());
    }
    return left;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(ExprKind::kUnary, next().where, "not");
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    bool compared = false;
    for (;;) {
      std::string op;
      if (peek().kind == TokenKind::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                            peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = peek().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        next();
        next();
      } else {
        return left;
      }
      if (compared) fail_at(left->where, "unsupported construct: chained comparison (a < b < c)");
      compared = true;
      left = binary(ExprKind::kBinary, op, std::move(left), parse_math1());
    }
  }
  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binary(ExprKind::kBinary, op, std::move(left), parse_concat());
    }
    return left;
  }
  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      next();
      left = binary(ExprKind::kBinary, "~", std::move(left), parse_math2());
    }
    return left;
  }
  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binary(ExprKind::kBinary, op, std::move(left), parse_pow());
    }
    return left;
  }
  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      next();
      left = binary(ExprKind::kBinary, "**", std::move(left), parse_unary(true));
    }
    return left;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      node = make(ExprKind::kUnary, op.where, op.text);
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filters(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kName: {
        next();
        auto e = make(ExprKind::kLiteral, t.where);
        if (t.text == "true" || t.text == "True") {
          e->value = Value::boolean(true);
        } else if (t.text == "false" || t.text == "False") {
          e->value = Value::boolean(false);
        } else if (t.text == "none" || t.text == "None") {
          e->value = Value::none();
        } else {
          e->kind = ExprKind::kName;
          e->name = t.text;
        }
        return e;
      }
      case TokenKind::kString: {
        auto e = make(ExprKind::kLiteral, t.where);
        std::string s = next().text;
        while (peek().kind == TokenKind::kString) s += next().text;  // 'a' 'b' is 'ab'
        e->value = Value::string(std::move(s));
        return e;
      }
      case TokenKind::kInt: {
        auto e = make(ExprKind::kLiteral, t.where);
        e->value = Value::integer(next().int_value);
        return e;
      }
      case TokenKind::kFloat: {
        auto e = make(ExprKind::kLiteral, t.where);
        e->value = Value::number(next().float_value);
        return e;
      }
      case TokenKind::kOp:
        if (t.text == "(") {
          next();
          if (is_op(")")) {
            next();
            return make(ExprKind::kList, t.where);  // () is an empty tuple
          }
          ExprPtr first = parse_expression();
          if (is_op(")")) {
            next();
            return first;
          }
          auto tuple = make(ExprKind::kList, t.where);
          tuple->args.push_back(std::move(first));
          while (is_op(",")) {
            next();
            if (is_op(")")) break;
            tuple->args.push_back(parse_expression());
          }
          expect_op(")");
          return tuple;
        }
        if (t.text == "[") {
          next();
          auto list = make(ExprKind::kList, t.where);
          while (!is_op("]")) {
            list->args.push_back(parse_expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("]");
          return list;
        }
        if (t.text == "{") {
          next();
          auto dict = make(ExprKind::kDict, t.where);
          while (!is_op("}")) {
            if (peek().kind != TokenKind::kString) {
              fail_at(peek().where, "unsupported construct: a dict key that is not a string literal");
            }
            dict->keys.push_back(next().text);
            expect_op(":");
            dict->args.push_back(parse_expression());
            if (!is_op(",")) break;
            next();
          }
          expect_op("}");
          return dict;
        }
        break;
      default:
        break;
    }
    unexpected("an expression");
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) fail_at(peek().where, "unsupported construct: *args / **kwargs in a call");
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        e.kwarg_names.push_back(next().text);
        next();
        e.kwargs.push_back(parse_expression());
      } else {
        if (!e.kwargs.empty()) fail_at(peek().where, "a positional argument after a keyword argument");
        e.args.push_back(parse_expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (is_op(".")) {
        next();
        const Token& t = peek();
        if (t.kind == TokenKind::kInt) {  // x.0 is x[0]
          next();
          auto index = make(ExprKind::kLiteral, t.where);
          index->value = Value::integer(t.int_value);
          node = binary(ExprKind::kGetItem, "", std::move(node), std::move(index));
          continue;
        }
        std::string name = expect_name("an attribute name");
        if (is_op("(")) {
          if (!listed(kMethods, name)) {
            fail_at(t.where, "unsupported method '" + name + "()' (supported: " + joined(kMethods) + ")");
          }
          auto call = make(ExprKind::kMethod, t.where, name);
          call->args.push_back(std::move(node));
          parse_call_args(*call);
          node = std::move(call);
        } else {
          auto attr = make(ExprKind::kGetAttr, t.where, name);
          attr->args.push_back(std::move(node));
          node = std::move(attr);
        }
      } else if (is_op("[")) {
        const Location where = next().where;
        ExprPtr parts[3];
        bool slice = false;
        if (!is_op(":")) parts[0] = parse_expression();
        for (int k = 1; k < 3 && is_op(":"); ++k) {
          next();
          slice = true;
          if (!is_op(":") && !is_op("]")) parts[k] = parse_expression();
        }
        expect_op("]");
        auto e = make(slice ? ExprKind::kSlice : ExprKind::kGetItem, where);
        e->args.push_back(std::move(node));
        e->args.push_back(std::move(parts[0]));
        if (slice) {
          e->args.push_back(std::move(parts[1]));
          e->args.push_back(std::move(parts[2]));
        }
        node = std::move(e);
      } else if (is_op("(")) {
        if (node->kind != ExprKind::kName) fail_at(peek().where, "unsupported construct: calling this expression");
        if (!listed(kFunctions, node->name)) {
          fail_at(node->where, "unsupported function '" + node->name + "()' (supported: " + joined(kFunctions) + ")");
        }
        auto call = make(ExprKind::kCall, node->where, node->name);
        parse_call_args(*call);
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filters(ExprPtr node) {
    for (;;) {
      if (is_op("|")) {
        next();
        const Token& t = peek();
        std::string name = expect_name("a filter name");
        if (!listed(kFilters, name)) {
          fail_at(t.where, "unsupported filter '" + name + "' (supported: " + joined(kFilters) + ")");
        }
        auto f = make(ExprKind::kFilter, t.where, name);
        f->args.push_back(std::move(node));
        if (is_op("(")) parse_call_args(*f);
        node = parse_postfix(std::move(f));
      } else if (is_name("is")) {
        next();
        auto test = make(ExprKind::kTest, peek().where);
        if (is_name("not")) {
          next();
          test->negated = true;
        }
        const Token& t = peek();
        test->where = t.where;
        // "none", "true" and "false" are tests here, not literals.
        test->name = expect_name("a test name");
        if (!listed(kTests, test->name)) {
          fail_at(t.where, "unsupported test '" + test->name + "' (supported: " + joined(kTests) + ")");
        }
        test->args.push_back(std::move(node));
        if (is_op("(")) {
          parse_call_args(*test);
        } else {
          const Token& a = peek();
          const bool starts_arg =
              a.kind == TokenKind::kString || a.kind == TokenKind::kInt || a.kind == TokenKind::kFloat ||
              (a.kind == TokenKind::kOp && a.text == "[") ||
              (a.kind == TokenKind::kName && a.text != "else" && a.text != "or" && a.text != "and" && a.text != "if" &&
               a.text != "is" && a.text != "in" && a.text != "not");
          if (starts_arg) test->args.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(test);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(lex(source)).parse(); }

}  // namespace nnsight::jinja
