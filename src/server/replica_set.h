// ReplicaSet: the engines behind one server. Each replica is a whole engine
// (its own worker processes or tensor-parallel group, here or on other
// machines); a request goes to the replica with the fewest outstanding
// requests. A replica's failure stays with its requests: its engine restarts
// its workers and the other replicas go on.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <nnsight/llm.hpp>

#include "runner/engine/async_engine.h"
#include "server/serve_options.h"

namespace nnsight::server {

class ReplicaSet {
 public:
  // Starts every replica (loads the model in each). Throws what the engine throws.
  explicit ReplicaSet(const ServeOptions& options);

  size_t size() const { return replicas_.size(); }
  // The least loaded replica; its count goes up by `requests` until release().
  size_t acquire(int64_t requests);
  void release(size_t replica, int64_t requests);
  LLM& llm(size_t replica) { return *replicas_[replica]->llm; }
  runner::AsyncEngine& engine(size_t replica);
  // Every replica serves the same model: these are replica 0's.
  const runner::ModelStructure& structure() const;
  const ModelConfig& model_config() const;
  LLM& first() { return *replicas_.front()->llm; }

 private:
  struct Replica {
    std::unique_ptr<LLM> llm;
    std::atomic<int64_t> outstanding{0};
  };
  std::vector<std::unique_ptr<Replica>> replicas_;
};

}  // namespace nnsight::server
