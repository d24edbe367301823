// Names of capture segments. An engine id becomes part of a POSIX
// shared-memory name, so it is restricted to [A-Za-z0-9._-], 1..64 chars.
#pragma once

#include <string>

namespace nnsight::capture {

// Throws ConfigError naming the bad character or length.
void validate_engine_id(const std::string& engine_id);

}  // namespace nnsight::capture
