#include "server/tenant_limits.h"

#include "server/http_error.h"

namespace nnsight::server {

void TenantLimits::charge_tokens(const std::string& tenant, int64_t tokens) {
  if (options_.max_tokens_per_minute <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Tenant& t = tenants_[tenant];
  const auto now = std::chrono::steady_clock::now();
  while (!t.tokens.empty() && now - t.tokens.front().first > std::chrono::minutes(1)) {
    t.tokens_in_window -= t.tokens.front().second;
    t.tokens.pop_front();
  }
  if (t.tokens_in_window + tokens > options_.max_tokens_per_minute)
    throw HttpError(429, "tokens per minute limit: this key used " + std::to_string(t.tokens_in_window) +
                             " tokens in the last minute and the request needs " + std::to_string(tokens) +
                             "; the limit is " + std::to_string(options_.max_tokens_per_minute));
  t.tokens.emplace_back(now, tokens);
  t.tokens_in_window += tokens;
}

void TenantLimits::enqueue(const std::string& tenant, const std::string& id, std::function<void()> start) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Tenant& t = tenants_[tenant];
    if (t.running >= options_.max_concurrent_traces) {
      if (static_cast<int64_t>(t.queued.size()) >= options_.max_queued_traces)
        throw HttpError(429, "queued traces limit: this key has " + std::to_string(t.running) + " traces running and " +
                                 std::to_string(t.queued.size()) + " waiting (limits " +
                                 std::to_string(options_.max_concurrent_traces) + " and " +
                                 std::to_string(options_.max_queued_traces) + ")");
      t.queued.emplace_back(id, std::move(start));
      return;
    }
    ++t.running;
  }
  start();
}

void TenantLimits::finished(const std::string& tenant) {
  std::function<void()> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Tenant& t = tenants_[tenant];
    if (t.queued.empty()) {
      --t.running;
      return;
    }
    next = std::move(t.queued.front().second);  // the place passes to the next one
    t.queued.pop_front();
  }
  next();
}

bool TenantLimits::remove_queued(const std::string& tenant, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Tenant& t = tenants_[tenant];
  for (auto it = t.queued.begin(); it != t.queued.end(); ++it)
    if (it->first == id) {
      t.queued.erase(it);
      return true;
    }
  return false;
}

}  // namespace nnsight::server
