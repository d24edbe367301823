// ProgressBar: a one-line progress bar on stderr, drawn only when stderr is a
// terminal (logs stay clean in CI and pipes).
#pragma once

#include <cstdint>
#include <string>

namespace nnsight {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  ~ProgressBar();
  void advance(int64_t n = 1);
  void done();

 private:
  void draw();
  std::string label_;
  int64_t total_, done_ = 0;
  bool enabled_, finished_ = false;
  int last_percent_ = -1;
};

}  // namespace nnsight
