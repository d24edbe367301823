// Exceptions a user can cause. Each message says what was wrong and where.
#pragma once

#include <stdexcept>
#include <string>

namespace nnsight {

// Base of every error the library raises for bad user input.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A model or tokenizer file that is missing, corrupt, truncated or unsupported.
// The message names the file and the tensor or key involved.
class LoadError : public Error {
 public:
  using Error::Error;
};

// A bad option value (sampling params, engine args); the message names the field.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A trace that cannot run (unknown module path, out-of-order access, a value
// used before it exists) or that failed while running (an op raised inside an
// intervention). The message names the user's file and line.
class TraceError : public Error {
 public:
  using Error::Error;
};

}  // namespace nnsight
