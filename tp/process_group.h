// ProcessGroup: the collectives tensor parallelism needs, over one backend
// (gloo through c10d on the CPU, NCCL on GPUs). World size 1 never
// communicates.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

namespace nnsight::tp {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;
  // Sums t over all ranks, in place.
  virtual void all_reduce_sum(at::Tensor& t) = 0;
  // Concatenates every rank's t (same shape on all ranks) along dim.
  virtual at::Tensor all_gather(const at::Tensor& t, int64_t dim) = 0;
  // Overwrites t on every rank with root's t.
  virtual void broadcast(at::Tensor& t, int root) = 0;
  virtual void barrier() = 0;
};

// Rank 0 of a world of 1: every collective is the identity.
class SingleProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "single"; }
  void all_reduce_sum(at::Tensor&) override {}
  at::Tensor all_gather(const at::Tensor& t, int64_t) override { return t; }
  void broadcast(at::Tensor&, int) override {}
  void barrier() override {}
};

// What a model is built for: this rank's place in the tensor-parallel group.
struct ParallelContext {
  std::shared_ptr<ProcessGroup> group = std::make_shared<SingleProcessGroup>();

  int rank() const { return group->rank(); }
  int world_size() const { return group->world_size(); }
  bool single() const { return group->world_size() == 1; }
};

}  // namespace nnsight::tp
