// Syntax tree of the Jinja subset (core/jinja): what the parser builds and
// the evaluator walks. Every node keeps where it starts in the template.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/jinja/jinja_lexer.h"
#include "core/jinja/jinja_value.h"

namespace nnsight::jinja {

enum class ExprKind {
  kLiteral,    // value
  kName,       // name
  kList,       // [args...] and tuples (a, b)
  kDict,       // {keys[k]: args[k]}
  kGetAttr,    // args[0].name
  kGetItem,    // args[0][args[1]]
  kSlice,      // args[0][args[1]:args[2]:args[3]] (a missing part is nullptr)
  kCall,       // name(args..., kwargs...): a global function
  kMethod,     // args[0].name(args[1:]..., kwargs...)
  kFilter,     // args[0] | name(args[1:]..., kwargs...)
  kTest,       // args[0] is [not] name(args[1:]...)
  kUnary,      // op args[0]: "-", "+", "not"
  kBinary,     // args[0] op args[1]: arithmetic, "~", comparisons, "in", "not in"
  kAnd,        // args[0] and args[1]
  kOr,         // args[0] or args[1]
  kCondition,  // args[0] if args[1] else args[2] (args[2] may be nullptr)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  Location where;
  std::string name;      // variable, attribute, function, method, filter or test name; operator
  Value value;           // kLiteral
  bool negated = false;  // kTest: "is not"
  std::vector<ExprPtr> args;
  std::vector<std::string> keys;         // kDict keys
  std::vector<std::string> kwarg_names;  // keyword arguments, in order
  std::vector<ExprPtr> kwargs;
};

enum class StmtKind {
  kText,    // text
  kOutput,  // {{ expr }}
  kIf,      // branches: conditions[k] -> bodies[k]; a last body without condition is the else
  kFor,     // {% for targets in expr %} bodies[0] {% else %} bodies[1]
  kSet,     // {% set target = expr %} or {% set target.attr = expr %}
  kBreak,
  kContinue,
  kBlock,  // bodies[0] ({% generation %} ... {% endgeneration %})
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind;
  Location where;
  std::string text;                  // kText
  ExprPtr expr;                      // kOutput, kFor (iterable), kSet (value)
  std::vector<ExprPtr> conditions;   // kIf
  std::vector<Body> bodies;          // kIf, kFor, kBlock
  std::vector<std::string> targets;  // kFor loop variables; kSet: {name} or {namespace, attribute}
};

}  // namespace nnsight::jinja
