#include "core/host_copy_queue.h"

#include <exception>
#include <utility>

namespace nnsight {

HostCopyQueue::HostCopyQueue(size_t max_pending)
    : max_pending_(max_pending == 0 ? 1 : max_pending), thread_([this] { run(); }) {}

HostCopyQueue::~HostCopyQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HostCopyQueue::push(std::vector<at::Tensor> tensors, Job job) {
  HostCopies copies = HostCopies::start(std::move(tensors));  // enqueued now, on the caller's streams
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return items_.size() < max_pending_; });
  items_.push_back(Item{std::move(copies), std::move(job)});
  cv_.notify_all();
}

void HostCopyQueue::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return items_.empty() && running_ == 0; });
}

std::vector<std::string> HostCopyQueue::take_errors() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(errors_, {});
}

void HostCopyQueue::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !items_.empty(); });
    if (items_.empty()) return;  // stopping, nothing left
    Item item = std::move(items_.front());
    items_.pop_front();
    ++running_;
    cv_.notify_all();  // room for a push
    lock.unlock();
    std::string error;
    try {
      std::vector<at::Tensor> host = item.copies.wait();
      item.job(host);
    } catch (const std::exception& e) {
      error = e.what();
    }
    item = Item{};  // the device memory goes back before drain() returns
    lock.lock();
    if (!error.empty()) errors_.push_back(std::move(error));
    --running_;
    cv_.notify_all();
  }
}

}  // namespace nnsight
