#include "core/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

namespace nnsight {

namespace {

struct LogState {
  std::mutex mu;
  LogSink sink;
  int threshold = 0;
  LogState() {
    const char* env = std::getenv("NNSIGHT_LOG_LEVEL");
    if (!env) return;
    if (std::strcmp(env, "warning") == 0)
      threshold = 1;
    else if (std::strcmp(env, "error") == 0)
      threshold = 2;
    else if (std::strcmp(env, "off") == 0)
      threshold = 3;
  }
};

LogState& state() {
  static LogState s;
  return s;
}

}  // namespace

void log(LogLevel level, const std::string& message) {
  LogState& s = state();
  if (static_cast<int>(level) < s.threshold) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sink) {
    s.sink(level, message);
    return;
  }
  const char* tag = level == LogLevel::kWarning ? "WARNING: " : level == LogLevel::kError ? "ERROR: " : "";
  std::fprintf(stderr, "[nnsight] %s%s\n", tag, message.c_str());
}

LogSink set_log_sink(LogSink sink) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::swap(s.sink, sink);
  return sink;
}

}  // namespace nnsight
