// HttpError: an answer other than success, thrown where the reason is found
// and turned into a JSON error body by the router.
#pragma once

#include <stdexcept>
#include <string>

namespace nnsight::server {

class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

}  // namespace nnsight::server
