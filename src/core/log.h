// Log lines for the operator of an engine: one place that decides where they
// go. Default: stderr, each line prefixed "[nnsight] " (warnings and errors
// also say so). NNSIGHT_LOG_LEVEL=info|warning|error|off sets the threshold
// (default info). Tests replace the sink to assert on messages.
#pragma once

#include <functional>
#include <string>

namespace nnsight {

enum class LogLevel { kInfo = 0, kWarning = 1, kError = 2 };

void log(LogLevel level, const std::string& message);
inline void log_info(const std::string& message) { log(LogLevel::kInfo, message); }
inline void log_warning(const std::string& message) { log(LogLevel::kWarning, message); }
inline void log_error(const std::string& message) { log(LogLevel::kError, message); }

// Receives every message at or above the threshold, without prefix.
using LogSink = std::function<void(LogLevel level, const std::string& message)>;
// Replaces the sink and returns the previous one; an empty sink restores stderr.
LogSink set_log_sink(LogSink sink);

}  // namespace nnsight
