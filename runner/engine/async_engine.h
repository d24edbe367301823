// AsyncEngine: thread-safe submission to one Engine driven by a background
// loop thread. Any thread may submit requests (getting a future and an
// optional streaming callback) or abort them; the loop adds them, steps the
// engine while work remains, calls callbacks with every update and fulfils
// futures with the final output. Callbacks run on the loop thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runner/engine/engine.h"

namespace nnsight::runner {

using StreamCallback = std::function<void(const RequestOutput&)>;
// Called once, on the loop thread, when every request of a group has its
// final output (in submission order), or with the error that kept the group
// from being queued.
using GroupCallback = std::function<void(std::vector<RequestOutput> outputs, std::exception_ptr error)>;

struct RequestHandle {
  uint64_t id = 0;
  std::shared_future<RequestOutput> result;
};

class AsyncEngine {
 public:
  explicit AsyncEngine(std::unique_ptr<Engine> engine);
  ~AsyncEngine();

  // Validates params on the caller's thread (throws ConfigError at once);
  // other errors (prompt too long, engine broken) arrive through the future.
  RequestHandle submit(RequestInput input, StreamCallback on_update = nullptr);
  // Several requests admitted atomically (a trace's invokes).
  std::vector<RequestHandle> submit_group(std::vector<RequestInput> inputs, std::vector<StreamCallback> on_update = {},
                                          GroupCallback on_done = nullptr);
  void abort(uint64_t id);
  // Stops the loop; unfinished requests end with an error. Idempotent.
  void shutdown();

  // Immutable after construction: safe from any thread.
  const std::shared_ptr<const Tokenizer>& tokenizer() const { return tokenizer_; }
  const ModelConfig& model_config() const { return config_; }
  const ModelStructure& model_structure() const { return structure_; }
  // The engine itself: only for callers that know the loop is idle (tests, benches).
  Engine& engine_unsafe() { return *engine_; }

 private:
  // A group's outputs as they finish.
  struct GroupState {
    GroupCallback on_done;
    std::vector<RequestOutput> outputs;
    size_t remaining = 0;
  };
  struct Pending {
    std::vector<RequestInput> inputs;
    std::vector<StreamCallback> callbacks;
    std::vector<std::shared_ptr<std::promise<RequestOutput>>> promises;
    GroupCallback on_done;
  };
  struct Live {
    StreamCallback callback;
    std::shared_ptr<std::promise<RequestOutput>> promise;
    std::shared_ptr<GroupState> group;  // null when no one waits for the whole group
    size_t index = 0;                   // in the group
  };
  void loop();

  std::unique_ptr<Engine> engine_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  ModelConfig config_;
  ModelStructure structure_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::vector<uint64_t> aborts_;
  bool stop_ = false;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Live> live_;  // loop thread only
  std::thread thread_;
};

}  // namespace nnsight::runner
