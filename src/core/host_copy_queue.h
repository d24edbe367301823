// HostCopyQueue: copies to the host finished by a thread of their own. push()
// starts the copies (core/host_copies.h: a side stream, pinned memory) and
// returns; the queue's thread waits for them to land and runs the job on the
// host tensors, one job after another in push order. The pushing thread (the
// engine's loop) never waits for the bus, only for room when `max_pending`
// jobs are already waiting. drain() returns once every job pushed so far ran.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/host_copies.h"

namespace nnsight {

class HostCopyQueue {
 public:
  // Runs on the queue's thread with the host tensors, in push()'s order.
  using Job = std::function<void(std::vector<at::Tensor>& host)>;

  explicit HostCopyQueue(size_t max_pending = 8);
  ~HostCopyQueue();  // runs the jobs still queued, then stops its thread
  HostCopyQueue(const HostCopyQueue&) = delete;
  HostCopyQueue& operator=(const HostCopyQueue&) = delete;

  void push(std::vector<at::Tensor> tensors, Job job);
  void drain();
  // What the jobs threw since the last call (their messages).
  std::vector<std::string> take_errors();

 private:
  struct Item {
    HostCopies copies;
    Job job;
  };
  void run();

  size_t max_pending_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  size_t running_ = 0;  // jobs taken off items_ and not finished
  bool stopping_ = false;
  std::vector<std::string> errors_;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace nnsight
