// Saved: a handle to a value saved during a trace (proxy.save()). It holds
// the save's name; the value is read after the run from the result, e.g.
// out[handle]. Copyable, and default-constructible so it can be declared
// before the trace body assigns it.
#pragma once

#include <string>
#include <utility>

namespace nnsight {

class Saved {
 public:
  Saved() = default;
  explicit Saved(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  bool valid() const { return !name_.empty(); }
  bool operator==(const Saved& o) const { return name_ == o.name_; }
  bool operator!=(const Saved& o) const { return name_ != o.name_; }

 private:
  std::string name_;
};

}  // namespace nnsight
