#include "front/capture/segment_name.h"

#include <nnsight/capture.hpp>
#include <nnsight/error.hpp>

#include "front/capture/ring_format.h"

namespace nnsight {

namespace capture {
void validate_engine_id(const std::string& id) {
  if (id.empty() || id.size() > kEngineIdMax)
    throw ConfigError("engine_id must have 1 to " + std::to_string(kEngineIdMax) + " characters, got " +
                      std::to_string(id.size()) + " ('" + id + "')");
  for (char c : id) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok)
      throw ConfigError("engine_id '" + id + "' has the character '" + std::string(1, c) +
                        "'; use only letters, digits, '.', '_' and '-'");
  }
}
}  // namespace capture

std::string capture_segment_name(const std::string& engine_id, int rank) {
  capture::validate_engine_id(engine_id);
  return "/nnsight-capture-" + engine_id + "-r" + std::to_string(rank);
}

}  // namespace nnsight
