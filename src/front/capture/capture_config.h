// The capture settings of an engine, from EngineArgs and the environment
// (docs/capture.md):
//   NNSIGHT_CAPTURE_ENABLED        0/1 (also true/false)
//   NNSIGHT_CAPTURE_LAYERS         "0,5,10-12"; empty = every decoder layer
//   NNSIGHT_CAPTURE_SAMPLE_RATE    fraction of requests captured, in [0, 1]
//   NNSIGHT_CAPTURE_COMPRESSION_K  0 = off; k = rank-k factorization per step and layer
//   NNSIGHT_CAPTURE_BUFFER_SIZE_GB segment size per worker rank
//   NNSIGHT_CAPTURE_ASYNC          0/1: records written by a thread of their own
//                                  (default: on a GPU yes, on the CPU no)
// An EngineArgs field that was set (capture_enabled called, or any other
// field changed from its default) wins over its environment variable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nnsight/engine_args.hpp>

namespace nnsight::capture {

struct CaptureConfig {
  bool enabled = false;          // capture at all
  std::string layers;            // layer list text; "" = all decoder layers
  double sample_rate = 1.0;      // fraction of requests, decided per request id
  int64_t compression_k = 0;     // 0 = store rows as they are
  double buffer_size_gb = 0.25;  // shared-memory segment per rank
  uint64_t seed = 0;             // mixes into the per-request sampling hash
  int asynchronous = -1;         // -1: on a GPU only; 0 no; 1 yes (front/capture/capture_observer.h)
};

// Throws ConfigError naming the field or environment variable that is bad.
CaptureConfig resolve_capture_config(const EngineArgs& args);

// "0,5,10-12" -> {0, 5, 10, 11, 12} (sorted, unique); "" -> every layer.
// Throws ConfigError quoting `where` for a malformed item or a layer outside
// [0, num_layers).
std::vector<int32_t> parse_layer_list(const std::string& text, int64_t num_layers, const std::string& where);

// Whether a request is captured: a seeded hash of its id compared with
// `rate`, so every rank (and every run with the same seed) agrees.
bool request_sampled(uint64_t request_id, double rate, uint64_t seed);

}  // namespace nnsight::capture
