#include "dsl/node.h"

namespace nnsight::dsl {

void Node::set_key(std::string text) {
  key = parse_provider_key(text);
  name = std::move(text);
}

const char* node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::Const:
      return "const";
    case NodeKind::Get:
      return "get";
    case NodeKind::Set:
      return "set";
    case NodeKind::Op:
      return "op";
    case NodeKind::Save:
      return "save";
    case NodeKind::Iter:
      return "iter";
    case NodeKind::Cond:
      return "cond";
    case NodeKind::Else:
      return "else";
    case NodeKind::End:
      return "end";
    case NodeKind::Stop:
      return "stop";
    case NodeKind::External:
      return "external";
    case NodeKind::Apply:
      return "apply";
    case NodeKind::Call:
      return "call";
    case NodeKind::Grad:
      return "grad";
    case NodeKind::Backward:
      return "backward";
  }
  return "?";
}

std::string StepSpec::str() const {
  if (mode == Mode::Fixed) return std::to_string(value);
  return value == 0 ? std::string("iter") : "iter+" + std::to_string(value);
}

bool Node::has_value() const {
  switch (kind) {
    case NodeKind::Const:
    case NodeKind::Get:
    case NodeKind::Op:
    case NodeKind::Iter:
    case NodeKind::External:
    case NodeKind::Apply:
    case NodeKind::Call:
    case NodeKind::Grad:
      return true;
    default:
      return false;
  }
}

std::string Node::describe(NodeId id) const {
  std::string s = "node " + std::to_string(id) + " (" + node_kind_name(kind);
  switch (kind) {
    case NodeKind::Op:
      s += " '" + name + "'";
      break;
    case NodeKind::Apply:
    case NodeKind::Call:
      s += " '" + name + "'";
      break;
    case NodeKind::Get:
    case NodeKind::Set:
      s += " '" + name + "' @ " + step.str();
      break;
    case NodeKind::Save:
      s += " '" + name + "'";
      break;
    default:
      break;
  }
  s += ")";
  if (loc.known()) s += " at " + loc.str();
  return s;
}

bool identical(const Node& a, const Node& b) {
  if (a.kind != b.kind || a.loc != b.loc) return false;
  switch (a.kind) {
    case NodeKind::Const:
      return identical(a.value, b.value);
    case NodeKind::Get:
      return a.name == b.name && a.step == b.step;
    case NodeKind::Set:
      return a.name == b.name && a.step == b.step && a.args == b.args;
    case NodeKind::Op:
    case NodeKind::Apply:
    case NodeKind::Call:
      return a.name == b.name && a.args == b.args;
    case NodeKind::Save:
      return a.name == b.name && a.args == b.args && a.save_mode == b.save_mode;
    case NodeKind::Iter:
      return a.range == b.range;
    case NodeKind::Cond:
    case NodeKind::Grad:
    case NodeKind::Backward:
      return a.args == b.args;
    case NodeKind::Else:
    case NodeKind::End:
    case NodeKind::Stop:
      return true;
    case NodeKind::External:
      return a.ext_invoke == b.ext_invoke && a.ext_node == b.ext_node;
  }
  return false;
}

}  // namespace nnsight::dsl
