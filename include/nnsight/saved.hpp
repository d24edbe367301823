// Saved: a handle to a value saved during a trace (proxy.save()). It holds
// the save's name; the value is read after the run from the result, e.g.
// out[handle]. Copyable, and default-constructible so it can be declared
// before the trace body assigns it.
#pragma once

#include <string>
#include <utility>

#include <nnsight/call_site.hpp>

namespace nnsight {

class Saved {
 public:
  // Declared before the trace body assigns it; where, so that reading it while
  // it is still unassigned names that line.
  Saved(CallSite declared = CallSite()) : declared_(declared) {}
  explicit Saved(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  bool valid() const { return !name_.empty(); }
  // Where the handle was declared (line 0 when it was made from a name).
  const CallSite& declared() const { return declared_; }
  bool operator==(const Saved& o) const { return name_ == o.name_; }
  bool operator!=(const Saved& o) const { return name_ != o.name_; }

 private:
  std::string name_;
  CallSite declared_ = CallSite::at(nullptr, 0);
};

}  // namespace nnsight
