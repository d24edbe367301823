// Llama-3 rope divisors against Hugging Face's formula (written out here),
// and recovering the scaling parameters from the divisors llama.cpp stores.
#include "core/rope_scaling_factors.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nnsight/error.hpp>

#include "support/expect_load_error.h"

namespace nnsight {
namespace {

// transformers' _compute_llama3_parameters, as the ratio original / scaled inverse frequency.
std::vector<double> hf_divisors(double theta, int64_t dim, double factor, double low, double high, double orig) {
  std::vector<double> out;
  for (int64_t i = 0; i < dim; i += 2) {
    double inv = 1.0 / std::pow(theta, double(i) / dim);
    double wavelen = 2 * M_PI / inv;
    double scaled = wavelen > orig / low ? inv / factor : inv;
    if (!(wavelen < orig / high) && !(wavelen > orig / low)) {
      double smooth = (orig / wavelen - low) / (high - low);
      scaled = (1 - smooth) * scaled / factor + smooth * scaled;
    }
    out.push_back(inv / scaled);
  }
  return out;
}

struct Params {
  double theta;
  int64_t dim;
  double factor, low, high;
  int64_t orig;
};

TEST(RopeScalingFactors, ForwardMatchesHuggingFace) {
  for (Params p :
       {Params{500000, 128, 8, 1, 4, 8192}, Params{500000, 64, 32, 1, 4, 8192}, Params{10000, 64, 4, 2, 8, 4096}}) {
    RopeScaling s{p.factor, p.low, p.high, p.orig};
    std::vector<double> got = llama3_rope_freq_factors(s, p.theta, p.dim);
    std::vector<double> want = hf_divisors(p.theta, p.dim, p.factor, p.low, p.high, double(p.orig));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9 * want[i]) << i;
  }
  std::vector<double> none = llama3_rope_freq_factors(RopeScaling{}, 10000, 8);
  EXPECT_EQ(none, (std::vector<double>{1, 1, 1, 1}));
}

TEST(RopeScalingFactors, FitRecoversTheParametersFromFloat32Divisors) {
  for (Params p :
       {Params{500000, 128, 8, 1, 4, 8192}, Params{500000, 64, 32, 1, 4, 8192}, Params{10000, 64, 4, 2, 8, 4096}}) {
    std::vector<double> d = hf_divisors(p.theta, p.dim, p.factor, p.low, p.high, double(p.orig));
    std::vector<float> stored(d.begin(), d.end());
    RopeScaling s = fit_llama3_rope_scaling(stored, p.theta, p.dim, p.orig, "t");
    EXPECT_NEAR(s.factor, p.factor, 1e-3 * p.factor);
    EXPECT_NEAR(s.low_freq_factor, p.low, 1e-3);
    EXPECT_NEAR(s.high_freq_factor, p.high, 1e-3);
    EXPECT_EQ(s.original_max_position, p.orig);
  }
  std::vector<float> ones(32, 1.0f);
  EXPECT_EQ(fit_llama3_rope_scaling(ones, 500000, 64, 8192, "t").factor, 0.0);
}

TEST(RopeScalingFactors, FitRejectsOtherShapes) {
  std::vector<float> wrong_len(10, 1.0f);
  testing::expect_load_error([&] { fit_llama3_rope_scaling(wrong_len, 1e4, 64, 8192, "f: rope_freqs"); },
                             {"f: rope_freqs", "10 entries", "32"});
  std::vector<float> linear(32, 4.0f);  // every frequency divided: linear scaling, not Llama-3
  testing::expect_load_error([&] { fit_llama3_rope_scaling(linear, 1e4, 64, 8192, "f"); }, {"Llama-3"});
  std::vector<float> negative(32, 1.0f);
  negative[3] = -1.0f;
  testing::expect_load_error([&] { fit_llama3_rope_scaling(negative, 1e4, 64, 8192, "f"); }, {"non-positive"});
}

}  // namespace
}  // namespace nnsight
