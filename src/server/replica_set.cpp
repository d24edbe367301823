#include "server/replica_set.h"

#include <nnsight/error.hpp>

#include "core/log.h"
#include "runner/engine/llm_access.h"

namespace nnsight::server {

ReplicaSet::ReplicaSet(const ServeOptions& options) {
  if (options.replicas < 1)
    throw ConfigError("--replicas must be at least 1 (got " + std::to_string(options.replicas) + ")");
  std::vector<std::string> addresses;
  if (!options.replica_worker_addresses.empty()) {
    std::string rest = options.replica_worker_addresses;
    size_t start = 0;
    while (start <= rest.size()) {
      size_t semi = rest.find(';', start);
      if (semi == std::string::npos) semi = rest.size();
      addresses.push_back(rest.substr(start, semi - start));
      start = semi + 1;
    }
    if (static_cast<int64_t>(addresses.size()) != options.replicas)
      throw ConfigError("--worker-addresses names " + std::to_string(addresses.size()) +
                        " replicas (separated by ';') "
                        "but --replicas is " +
                        std::to_string(options.replicas));
  }
  for (int64_t i = 0; i < options.replicas; ++i) {
    EngineArgs args = options.engine;
    if (!addresses.empty()) args.worker_addresses(addresses[static_cast<size_t>(i)]);
    if (options.replicas > 1 && !args.engine_id().empty()) args.engine_id(args.engine_id() + "-" + std::to_string(i));
    if (options.replicas > 1)
      log_info("starting replica " + std::to_string(i + 1) + " of " + std::to_string(options.replicas));
    auto r = std::make_unique<Replica>();
    r->llm = std::make_unique<LLM>(args);
    replicas_.push_back(std::move(r));
  }
}

size_t ReplicaSet::acquire(int64_t requests) {
  size_t best = 0;
  for (size_t i = 1; i < replicas_.size(); ++i)
    if (replicas_[i]->outstanding.load() < replicas_[best]->outstanding.load()) best = i;
  replicas_[best]->outstanding += requests;
  return best;
}

void ReplicaSet::release(size_t replica, int64_t requests) { replicas_[replica]->outstanding -= requests; }

runner::AsyncEngine& ReplicaSet::engine(size_t replica) { return runner::LLMAccess::engine(*replicas_[replica]->llm); }

const runner::ModelStructure& ReplicaSet::structure() const {
  return runner::LLMAccess::engine(*replicas_.front()->llm).model_structure();
}

const ModelConfig& ReplicaSet::model_config() const {
  return runner::LLMAccess::engine(*replicas_.front()->llm).model_config();
}

}  // namespace nnsight::server
