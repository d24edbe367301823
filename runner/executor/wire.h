// Wire format between the engine and its worker processes: framed messages
// over a local stream socket, payloads encoded with cereal's portable binary
// archive. The peer is our own worker program, but sizes are still bounded
// so a corrupted stream becomes an error, not a huge allocation.
#pragma once

#include <cstdint>
#include <string>

#include <nnsight/engine_args.hpp>

#include "core/model_config.h"
#include "runner/model_runner/model_structure.h"
#include "runner/step/step_data.h"

namespace nnsight::runner {

enum class MessageType : uint32_t {
  kInit = 1,      // engine -> worker: WorkerInit
  kReady = 2,     // worker -> engine: WorkerReady
  kStep = 3,      // engine -> worker: SchedulerOutput
  kStepDone = 4,  // worker -> engine: ModelRunnerOutput (rank 0) or empty (others)
  kShutdown = 5,  // engine -> worker
  kError = 6,     // worker -> engine: a message; the worker exits after sending it
};

struct WorkerInit {
  EngineArgs args;
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string rendezvous;  // where tensor-parallel ranks meet ("" for world size 1)
  int64_t num_threads = 0;

  template <class A>
  void serialize(A& ar) {
    ar(args, rank, world_size, rendezvous, num_threads);
  }
};

struct WorkerReady {
  int64_t num_kv_blocks = 0;
  ModelConfig config;
  ModelStructure structure;
};

// Largest message accepted (a step with saves of big activations fits).
constexpr uint64_t kMaxMessageBytes = uint64_t(4) << 30;

std::string encode(const WorkerInit& v);
std::string encode(const WorkerReady& v);
std::string encode(const SchedulerOutput& v);
std::string encode(const ModelRunnerOutput& v);
void decode(const std::string& bytes, WorkerInit& v);
void decode(const std::string& bytes, WorkerReady& v);
void decode(const std::string& bytes, SchedulerOutput& v);
void decode(const std::string& bytes, ModelRunnerOutput& v);

// Blocking framed I/O on a socket. send_message returns false if the peer is
// gone. recv_message waits up to timeout_s (< 0: forever) and returns false
// on timeout; it throws WorkerError on EOF or a corrupt frame.
bool send_message(int fd, MessageType type, const std::string& payload);
bool recv_message(int fd, double timeout_s, MessageType& type, std::string& payload);

}  // namespace nnsight::runner
