// TenantLimits: each API key's share of the server. A key has a number of
// traces that may run at once; more wait in its own queue up to a bound
// (beyond it, 429), so one tenant's burst never fills the engine ahead of
// everyone else. Tokens (prompt + max_tokens) are counted per minute per key.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "server/serve_options.h"

namespace nnsight::server {

class TenantLimits {
 public:
  explicit TenantLimits(TenantLimitOptions options) : options_(options) {}

  // Counts `tokens` against the key's minute; throws HttpError 429 (naming the
  // limit) when that goes over it.
  void charge_tokens(const std::string& tenant, int64_t tokens);
  // A trace of `tenant` wants to run: `start` runs now (on this thread) when
  // the key has a free place, else later on the thread that calls finished();
  // throws HttpError 429 when its queue is full.
  void enqueue(const std::string& tenant, const std::string& id, std::function<void()> start);
  // A trace of `tenant` that was started has ended: starts its next queued one.
  void finished(const std::string& tenant);
  // Drops trace `id` of `tenant` if it is still queued (cancelled before it
  // started); returns whether it was.
  bool remove_queued(const std::string& tenant, const std::string& id);

  const TenantLimitOptions& options() const { return options_; }

 private:
  struct Tenant {
    int64_t running = 0;
    std::deque<std::pair<std::string, std::function<void()>>> queued;              // trace id, start
    std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> tokens;  // last minute
    int64_t tokens_in_window = 0;
  };
  TenantLimitOptions options_;
  std::mutex mu_;
  std::map<std::string, Tenant> tenants_;
};

}  // namespace nnsight::server
