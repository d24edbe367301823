// CollectiveError: a collective failed (a peer died, timed out, or the
// backend broke). The group is unusable afterwards: a worker that sees one
// reports it and exits instead of failing only the step's requests.
#pragma once

#include <nnsight/error.hpp>

namespace nnsight::tp {

class CollectiveError : public Error {
 public:
  using Error::Error;
};

}  // namespace nnsight::tp
