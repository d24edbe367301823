// Capture settings: layer lists, environment variables and their precedence,
// and the per-request sampling decision.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>

#include <nnsight/error.hpp>

#include "front/capture/capture_config.h"

namespace nnsight::capture {
namespace {

// Sets (or clears) environment variables for a test's scope.
class Env {
 public:
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  ~Env() {
    for (auto& [name, old] : saved_) {
      if (old.first)
        ::setenv(name.c_str(), old.second.c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  Env& set(const std::string& name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = {old != nullptr, old ? old : ""};
    }
    if (value)
      ::setenv(name.c_str(), value, 1);
    else
      ::unsetenv(name.c_str());
    return *this;
  }

 private:
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

// An Env with every NNSIGHT_CAPTURE_* variable cleared.
class CleanEnv : public Env {
 public:
  CleanEnv() {
    for (const char* n : {"NNSIGHT_CAPTURE_ENABLED", "NNSIGHT_CAPTURE_LAYERS", "NNSIGHT_CAPTURE_SAMPLE_RATE",
                          "NNSIGHT_CAPTURE_COMPRESSION_K", "NNSIGHT_CAPTURE_BUFFER_SIZE_GB"})
      set(n, nullptr);
  }
};

std::string error_of(const EngineArgs& args) {
  try {
    resolve_capture_config(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CaptureConfig, LayerLists) {
  EXPECT_EQ(parse_layer_list("0,5,10-12", 30, "w"), (std::vector<int32_t>{0, 5, 10, 11, 12}));
  EXPECT_EQ(parse_layer_list(" 3 , 1-2,2 ", 30, "w"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_layer_list("", 3, "w"), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(parse_layer_list("29", 30, "w"), (std::vector<int32_t>{29}));
}

TEST(CaptureConfig, BadLayerListsNameTheProblem) {
  auto err = [](const std::string& text) {
    try {
      parse_layer_list(text, 30, "NNSIGHT_CAPTURE_LAYERS");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(err("30"), "NNSIGHT_CAPTURE_LAYERS: layer 30 in '30' is out of range; the model has 30 layers (0-29)");
  EXPECT_EQ(err("1,-2"), "NNSIGHT_CAPTURE_LAYERS: layer -2 in '1,-2' is out of range; the model has 30 layers (0-29)");
  EXPECT_EQ(err("5-3"), "NNSIGHT_CAPTURE_LAYERS: range '5-3' ends before it starts");
  EXPECT_EQ(err("1,,2"), "NNSIGHT_CAPTURE_LAYERS: empty item in layer list '1,,2'");
  EXPECT_EQ(err("x"), "NNSIGHT_CAPTURE_LAYERS item 'x' must be an integer, got 'x'");
}

TEST(CaptureConfig, EnvironmentFillsUnsetFields) {
  CleanEnv env;
  EXPECT_FALSE(resolve_capture_config(EngineArgs()).enabled);
  env.set("NNSIGHT_CAPTURE_ENABLED", "1")
      .set("NNSIGHT_CAPTURE_LAYERS", "0,5,10-12")
      .set("NNSIGHT_CAPTURE_SAMPLE_RATE", "0.25")
      .set("NNSIGHT_CAPTURE_COMPRESSION_K", "8")
      .set("NNSIGHT_CAPTURE_BUFFER_SIZE_GB", "0.5");
  CaptureConfig c = resolve_capture_config(EngineArgs().seed(9));
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.layers, "0,5,10-12");
  EXPECT_DOUBLE_EQ(c.sample_rate, 0.25);
  EXPECT_EQ(c.compression_k, 8);
  EXPECT_DOUBLE_EQ(c.buffer_size_gb, 0.5);
  EXPECT_EQ(c.seed, 9u);
}

TEST(CaptureConfig, EngineArgsWinOverEnvironment) {
  CleanEnv env;
  env.set("NNSIGHT_CAPTURE_ENABLED", "1").set("NNSIGHT_CAPTURE_LAYERS", "1").set("NNSIGHT_CAPTURE_SAMPLE_RATE", "0.5");
  CaptureConfig c =
      resolve_capture_config(EngineArgs().capture_enabled(false).capture_layers("2-3").capture_sample_rate(0.1));
  EXPECT_FALSE(c.enabled);
  EXPECT_EQ(c.layers, "2-3");
  EXPECT_DOUBLE_EQ(c.sample_rate, 0.1);
}

TEST(CaptureConfig, BadValuesNameTheirSource) {
  CleanEnv env;
  env.set("NNSIGHT_CAPTURE_ENABLED", "maybe");
  EXPECT_EQ(error_of(EngineArgs()), "NNSIGHT_CAPTURE_ENABLED must be 0 or 1, got 'maybe'");
  env.set("NNSIGHT_CAPTURE_ENABLED", "1").set("NNSIGHT_CAPTURE_SAMPLE_RATE", "1.5");
  EXPECT_EQ(error_of(EngineArgs()), "NNSIGHT_CAPTURE_SAMPLE_RATE must be in [0, 1], got 1.500000");
  env.set("NNSIGHT_CAPTURE_SAMPLE_RATE", "abc");
  EXPECT_EQ(error_of(EngineArgs()), "NNSIGHT_CAPTURE_SAMPLE_RATE must be a number, got 'abc'");
  env.set("NNSIGHT_CAPTURE_SAMPLE_RATE", nullptr).set("NNSIGHT_CAPTURE_COMPRESSION_K", "-1");
  EXPECT_EQ(error_of(EngineArgs()), "NNSIGHT_CAPTURE_COMPRESSION_K must be >= 0 (0 = off), got -1");
  env.set("NNSIGHT_CAPTURE_COMPRESSION_K", nullptr);
  EXPECT_EQ(error_of(EngineArgs().capture_buffer_size_gb(-2)),
            "EngineArgs.capture_buffer_size_gb must be in (0, 1024], got -2.000000");
}

TEST(CaptureConfig, SamplingIsDeterministicSeededAndNearTheRate) {
  for (double rate : {0.1, 0.25, 0.5, 0.9}) {
    int64_t hits = 0;
    const int64_t n = 200000;
    for (uint64_t id = 1; id <= static_cast<uint64_t>(n); ++id) hits += request_sampled(id, rate, 7);
    // Binomial standard deviation at n = 2e5 is at most ~0.0011.
    EXPECT_NEAR(static_cast<double>(hits) / n, rate, 0.006) << "rate " << rate;
  }
  int agree = 0;
  for (uint64_t id = 1; id <= 1000; ++id) {
    EXPECT_EQ(request_sampled(id, 0.3, 1), request_sampled(id, 0.3, 1));
    agree += request_sampled(id, 0.3, 1) == request_sampled(id, 0.3, 2);
  }
  EXPECT_LT(agree, 900) << "another seed must pick another subset";
  EXPECT_TRUE(request_sampled(5, 1.0, 0));
  EXPECT_FALSE(request_sampled(5, 0.0, 0));
}

}  // namespace
}  // namespace nnsight::capture
