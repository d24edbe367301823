// WorkerError: a worker process died, hung, or broke the protocol. The
// engine turns it into an error on the affected requests.
#pragma once

#include <nnsight/error.hpp>

namespace nnsight::runner {

class WorkerError : public Error {
 public:
  using Error::Error;
};

}  // namespace nnsight::runner
