#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

namespace nnsight {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total > 0 ? total : 1), enabled_(enabled && ::isatty(2)) {}

ProgressBar::~ProgressBar() { done(); }

void ProgressBar::advance(int64_t n) {
  done_ += n;
  draw();
}

void ProgressBar::draw() {
  if (!enabled_ || finished_) return;
  const int percent = static_cast<int>(100 * done_ / total_);
  if (percent == last_percent_) return;
  last_percent_ = percent;
  const int width = 30, filled = percent * width / 100;
  std::fprintf(stderr, "\r%s [%.*s%*s] %3d%%", label_.c_str(), filled, "##############################", width - filled,
               "", percent);
  std::fflush(stderr);
}

void ProgressBar::done() {
  if (!enabled_ || finished_) return;
  done_ = total_;
  last_percent_ = -1;
  draw();
  std::fprintf(stderr, "\n");
  finished_ = true;
}

}  // namespace nnsight
