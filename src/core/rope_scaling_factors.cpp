#include "core/rope_scaling_factors.h"

#include <algorithm>
#include <cmath>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

constexpr double kPi = 3.14159265358979323846;

double wavelength(double theta, int64_t head_dim, int64_t i) {
  double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  return 2.0 * kPi / inv_freq;
}

bool matches(const std::vector<double>& want, const std::vector<float>& got) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::fabs(want[i] - got[i]) > 1e-3 * std::max(1.0, std::fabs(want[i]))) return false;
  }
  return true;
}

}  // namespace

std::vector<double> llama3_rope_freq_factors(const RopeScaling& s, double theta, int64_t head_dim) {
  std::vector<double> out(static_cast<size_t>(head_dim / 2), 1.0);
  if (s.factor == 0.0) return out;
  const double orig = static_cast<double>(s.original_max_position);
  const double low_wavelen = orig / s.low_freq_factor;
  const double high_wavelen = orig / s.high_freq_factor;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double w = wavelength(theta, head_dim, i);
    if (w < high_wavelen) {
      out[i] = 1.0;
    } else if (w > low_wavelen) {
      out[i] = s.factor;
    } else {
      double smooth = (orig / w - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out[i] = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
  }
  return out;
}

RopeScaling fit_llama3_rope_scaling(const std::vector<float>& factors, double theta, int64_t head_dim,
                                    int64_t original_max_position, const std::string& what) {
  if (head_dim <= 0 || factors.size() != static_cast<size_t>(head_dim / 2)) {
    throw LoadError(what + ": has " + std::to_string(factors.size()) +
                    " entries, expected head_dim/2 = " + std::to_string(head_dim / 2));
  }
  if (original_max_position <= 0) {
    throw LoadError(what + ": original context length " + std::to_string(original_max_position) + " is not positive");
  }
  double big = 0.0;
  for (float f : factors) {
    if (!std::isfinite(f) || f <= 0.0f) {
      throw LoadError(what + ": holds a non-positive or non-finite divisor " + std::to_string(f));
    }
    big = std::max(big, static_cast<double>(f));
  }
  RopeScaling none;
  if (big <= 1.0 + 1e-6) {
    if (matches(llama3_rope_freq_factors(none, theta, head_dim), factors)) return none;
    throw LoadError(what + ": divisors below 1 are not Llama-3 rope scaling");
  }
  // Blended entries satisfy s = (1/f - 1/F) / (1 - 1/F) = A / wavelen - B with
  // A = orig / (high - low), B = low / (high - low): a line in 1/wavelen.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double f = factors[i];
    if (f > 1.0 + 1e-4 && f < big * (1.0 - 1e-4)) {
      double x = 1.0 / wavelength(theta, head_dim, i);
      double y = (1.0 / f - 1.0 / big) / (1.0 - 1.0 / big);
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
      ++n;
    }
  }
  RopeScaling fit;
  fit.factor = big;
  fit.original_max_position = original_max_position;
  const double orig = static_cast<double>(original_max_position);
  double denom = n * sxx - sx * sx;
  if (n >= 2 && denom > 0) {
    double a = (n * sxy - sx * sy) / denom;
    double b = (a * sx - sy) / n;
    if (a > 0) {
      fit.low_freq_factor = b * orig / a;
      fit.high_freq_factor = fit.low_freq_factor + orig / a;
      // Published configs use round numbers (1, 4); prefer them when they fit.
      RopeScaling rounded = fit;
      rounded.low_freq_factor = std::round(fit.low_freq_factor * 1000.0) / 1000.0;
      rounded.high_freq_factor = std::round(fit.high_freq_factor * 1000.0) / 1000.0;
      rounded.factor = std::round(fit.factor * 1000.0) / 1000.0;
      if (rounded.low_freq_factor > 0 && rounded.high_freq_factor > rounded.low_freq_factor &&
          matches(llama3_rope_freq_factors(rounded, theta, head_dim), factors)) {
        return rounded;
      }
    }
  }
  // With fewer than two blended entries the defaults (low 1, high 4) are
  // tried; either way the result must reproduce every divisor.
  if (fit.low_freq_factor > 0 && fit.high_freq_factor > fit.low_freq_factor &&
      matches(llama3_rope_freq_factors(fit, theta, head_dim), factors)) {
    return fit;
  }
  throw LoadError(what +
                  ": rope frequency divisors do not follow Llama-3 rope scaling "
                  "(only that form of scaling is supported)");
}

}  // namespace nnsight
