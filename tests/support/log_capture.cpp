#include "support/log_capture.h"

#include <algorithm>

namespace nnsight::testing {

LogCapture::LogCapture() {
  previous_ = set_log_sink([this](LogLevel level, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(level, message);
  });
}

LogCapture::~LogCapture() { set_log_sink(previous_); }

std::vector<std::pair<LogLevel, std::string>> LogCapture::lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

std::vector<std::string> LogCapture::messages(LogLevel level) const {
  std::vector<std::string> out;
  for (const auto& [l, m] : lines())
    if (l == level) out.push_back(m);
  return out;
}

bool LogCapture::has(LogLevel level, const std::string& message) const {
  const auto m = messages(level);
  return std::find(m.begin(), m.end(), message) != m.end();
}

}  // namespace nnsight::testing
