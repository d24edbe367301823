#include "front/trace_client/result_thread.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace nnsight::tracing {
namespace {

class ResultThread {
 public:
  ResultThread() : thread_([this] { loop(); }) { thread_.detach(); }

  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::thread thread_;
};

}  // namespace

void run_on_result_thread(std::function<void()> job) {
  // Never destroyed: the thread may still hold a job while the process exits.
  static ResultThread* const thread = new ResultThread();
  thread->post(std::move(job));
}

}  // namespace nnsight::tracing
