// LogCapture: collects the library's log lines (core/log.h) while it lives,
// so tests can assert on warnings and info messages.
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"

namespace nnsight::testing {

class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::pair<LogLevel, std::string>> lines() const;
  // Messages at `level`, in order.
  std::vector<std::string> messages(LogLevel level) const;
  bool has(LogLevel level, const std::string& message) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<LogLevel, std::string>> lines_;
  LogSink previous_;
};

}  // namespace nnsight::testing
