#include "core/host_copies.h"

#include <ATen/ATen.h>

#include <map>

#ifndef NNSIGHT_TORCH_CUDA
#define NNSIGHT_TORCH_CUDA 0
#endif
#if NNSIGHT_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace nnsight {

HostCopies HostCopies::start(std::vector<at::Tensor> tensors) {
  HostCopies c;
  c.hosts_.resize(tensors.size());
#if NNSIGHT_TORCH_CUDA
  // One side stream and one event per device, behind everything already
  // queued on that device's current (compute) stream.
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> sides;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!t.defined() || !t.is_cuda()) continue;
    const c10::DeviceIndex d = t.device().index();
    auto it = sides.find(d);
    if (it == sides.end()) {
      c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d);
      at::cuda::CUDAEvent ready;
      ready.record(c10::cuda::getCurrentCUDAStream(d));
      ready.block(side);
      it = sides.emplace(d, side).first;
    }
    const c10::cuda::CUDAStreamGuard on_side(it->second);
    at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    host.copy_(t, /*non_blocking=*/true);
    c.hosts_[i] = std::move(host);
    ++c.asynchronous_;
  }
  for (auto& [d, side] : sides) {
    auto done = std::make_shared<at::cuda::CUDAEvent>();
    done->record(side);
    c.done_.push_back(std::move(done));
  }
#endif
  c.sources_ = std::move(tensors);
  return c;
}

std::vector<at::Tensor> HostCopies::wait() {
  TORCH_CHECK(!waited_, "HostCopies::wait called twice");
  waited_ = true;
#if NNSIGHT_TORCH_CUDA
  for (auto& e : done_) static_cast<at::cuda::CUDAEvent*>(e.get())->synchronize();
#endif
  std::vector<at::Tensor> out(sources_.size());
  for (size_t i = 0; i < sources_.size(); ++i) {
    const at::Tensor& t = sources_[i];
    if (hosts_[i].defined())
      out[i] = std::move(hosts_[i]);
    else if (t.defined())
      out[i] = t.device().is_cpu() ? t : t.to(at::kCPU);
  }
  sources_.clear();
  done_.clear();
  return out;
}

}  // namespace nnsight
