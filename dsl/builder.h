// GraphBuilder: records one invoke's graph node by node. The tracing layer
// drives it (blocks, gets, sets) and the public Proxy type records ops through
// it. Mistakes are reported here, at the user's source line, as BuildError:
// unknown op, wrong argument count or kind, unbalanced blocks, a proxy of
// another trace.
//
// Cross-invoke references: a trace has one builder per invoke, all with the
// same trace id. A proxy recorded under invoke i used while recording invoke
// j > i becomes an External(i, node) node of invoke j (see import()).
#pragma once

#include "dsl/graph.h"
#include "dsl/node.h"
#include "dsl/value.h"

#include <nnsight/source_location.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace nnsight::dsl {

// Create with std::make_shared: proxies hold shared_ptrs to their builder.
class GraphBuilder : public std::enable_shared_from_this<GraphBuilder> {
 public:
  explicit GraphBuilder(uint64_t trace_id = 0, uint32_t invoke = 0);

  uint64_t trace_id() const { return trace_id_; }
  uint32_t invoke() const { return graph_.invoke; }
  const Graph& graph() const { return graph_; }
  size_t size() const { return graph_.nodes.size(); }
  bool finished() const { return finished_; }

  NodeId constant(Value v, SourceLoc loc);
  NodeId get(std::string key, StepSpec step, SourceLoc loc);
  NodeId set(std::string key, StepSpec step, NodeId value, SourceLoc loc);
  // Checks the op exists and the arguments fit its signature.
  NodeId op(std::string_view name, std::vector<NodeId> args, SourceLoc loc);
  NodeId apply(std::string name, std::vector<NodeId> args, SourceLoc loc);
  // The model's module at `module` (a Hugging Face path) run on `arg`.
  NodeId call(std::string module, NodeId arg, SourceLoc loc);
  // The gradient of `value` (a module value as read) after a backward().
  NodeId grad(NodeId value, SourceLoc loc);
  // Backpropagates `metric` (a one-element tensor) to the values grad() names.
  NodeId backward(NodeId metric, SourceLoc loc);
  // Empty name: a unique default name (default_save_name of the new node).
  NodeId save(NodeId value, std::string name, SaveMode mode, SourceLoc loc);
  NodeId stop(SourceLoc loc);
  NodeId external(uint32_t invoke, NodeId node, SourceLoc loc);

  // Blocks. The node returned by begin_iter evaluates to the current step.
  NodeId begin_iter(IterRange range, SourceLoc loc);
  NodeId end_iter(SourceLoc loc);
  NodeId begin_cond(NodeId condition, SourceLoc loc);
  NodeId begin_else(SourceLoc loc);
  NodeId end_cond(SourceLoc loc);
  size_t depth() const { return blocks_.size(); }
  bool in_iter() const;

  // A node id usable in this builder for `node` of builder `owner`: the same
  // id when owner is this builder, an External node when owner records an
  // earlier invoke of the same trace; BuildError otherwise.
  NodeId import(const GraphBuilder& owner, NodeId node, SourceLoc loc);

  // The graph; all blocks must be closed. The builder cannot record after.
  Graph finish();

  // "i<invoke>.n<node>": names of saves recorded without one.
  std::string default_save_name(NodeId save_node) const;
  // Static kind of a node's value (kinds::Nothing for nodes without one).
  KindMask kind(NodeId id) const { return kinds_.at(id); }

  // The builder proxy operators record into on this thread, if any (set by
  // the tracing layer while a trace body runs).
  static GraphBuilder* current();
  class Scope {
   public:
    explicit Scope(GraphBuilder* b);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    GraphBuilder* prev_;
  };

 private:
  struct Block {
    NodeKind kind;  // Iter or Cond
    NodeId node;
    bool has_else = false;
  };

  NodeId push(Node n, KindMask result);
  void check_open(const SourceLoc& loc) const;
  void check_ref(NodeId id, const SourceLoc& loc, const char* what) const;
  [[noreturn]] void fail(const SourceLoc& loc, const std::string& what) const;

  uint64_t trace_id_;
  Graph graph_;
  std::vector<KindMask> kinds_;
  std::vector<Block> blocks_;
  std::unordered_map<std::string, SourceLoc> save_names_;  // where each name was first saved
  bool finished_ = false;
};

}  // namespace nnsight::dsl
