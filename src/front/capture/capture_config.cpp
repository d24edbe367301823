#include "front/capture/capture_config.h"

#include <absl/strings/ascii.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include <nnsight/error.hpp>

namespace nnsight::capture {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool parse_bool(const std::string& v, const char* name) {
  if (v == "1" || v == "true" || v == "TRUE" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "FALSE" || v == "no" || v == "off") return false;
  throw ConfigError(std::string(name) + " must be 0 or 1, got '" + v + "'");
}

double parse_double(const std::string& v, const char* name) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !std::isfinite(d))
    throw ConfigError(std::string(name) + " must be a number, got '" + v + "'");
  return d;
}

int64_t parse_int(const std::string& v, const std::string& name) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || errno == ERANGE)
    throw ConfigError(name + " must be an integer, got '" + v + "'");
  return n;
}

}  // namespace

CaptureConfig resolve_capture_config(const EngineArgs& args) {
  const EngineArgs defaults;
  CaptureConfig c;
  c.seed = args.seed();

  if (args.capture_configured())
    c.enabled = args.capture_enabled();
  else if (const char* v = env("NNSIGHT_CAPTURE_ENABLED"))
    c.enabled = parse_bool(v, "NNSIGHT_CAPTURE_ENABLED");

  if (args.capture_layers() != defaults.capture_layers())
    c.layers = args.capture_layers();
  else if (const char* v = env("NNSIGHT_CAPTURE_LAYERS"))
    c.layers = v;

  std::string rate_src = "EngineArgs.capture_sample_rate";
  if (args.capture_sample_rate() != defaults.capture_sample_rate()) {
    c.sample_rate = args.capture_sample_rate();
  } else if (const char* v = env("NNSIGHT_CAPTURE_SAMPLE_RATE")) {
    c.sample_rate = parse_double(v, "NNSIGHT_CAPTURE_SAMPLE_RATE");
    rate_src = "NNSIGHT_CAPTURE_SAMPLE_RATE";
  }
  if (!(c.sample_rate >= 0.0 && c.sample_rate <= 1.0))
    throw ConfigError(rate_src + " must be in [0, 1], got " + std::to_string(c.sample_rate));

  std::string k_src = "EngineArgs.capture_compression_k";
  if (args.capture_compression_k() != defaults.capture_compression_k()) {
    c.compression_k = args.capture_compression_k();
  } else if (const char* v = env("NNSIGHT_CAPTURE_COMPRESSION_K")) {
    c.compression_k = parse_int(v, "NNSIGHT_CAPTURE_COMPRESSION_K");
    k_src = "NNSIGHT_CAPTURE_COMPRESSION_K";
  }
  if (c.compression_k < 0) throw ConfigError(k_src + " must be >= 0 (0 = off), got " + std::to_string(c.compression_k));

  std::string gb_src = "EngineArgs.capture_buffer_size_gb";
  if (args.capture_buffer_size_gb() != defaults.capture_buffer_size_gb()) {
    c.buffer_size_gb = args.capture_buffer_size_gb();
  } else if (const char* v = env("NNSIGHT_CAPTURE_BUFFER_SIZE_GB")) {
    c.buffer_size_gb = parse_double(v, "NNSIGHT_CAPTURE_BUFFER_SIZE_GB");
    gb_src = "NNSIGHT_CAPTURE_BUFFER_SIZE_GB";
  }
  if (!(c.buffer_size_gb > 0.0 && c.buffer_size_gb <= 1024.0))
    throw ConfigError(gb_src + " must be in (0, 1024], got " + std::to_string(c.buffer_size_gb));
  if (const char* v = env("NNSIGHT_CAPTURE_ASYNC")) c.asynchronous = parse_bool(v, "NNSIGHT_CAPTURE_ASYNC") ? 1 : 0;
  return c;
}

std::vector<int32_t> parse_layer_list(const std::string& text, int64_t num_layers, const std::string& where) {
  std::set<int32_t> out;
  if (absl::StripAsciiWhitespace(text).empty()) {
    for (int64_t i = 0; i < num_layers; ++i) out.insert(static_cast<int32_t>(i));
    return {out.begin(), out.end()};
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item(absl::StripAsciiWhitespace(absl::string_view(text).substr(start, end - start)));
    start = end + 1;
    if (item.empty()) throw ConfigError(where + ": empty item in layer list '" + text + "'");
    const size_t dash = item.find('-', 1);
    int64_t lo, hi;
    if (dash == std::string::npos) {
      lo = hi = parse_int(item, where + " item '" + item + "'");
    } else {
      lo = parse_int(std::string(absl::StripAsciiWhitespace(absl::string_view(item).substr(0, dash))),
                     where + " item '" + item + "'");
      hi = parse_int(std::string(absl::StripAsciiWhitespace(absl::string_view(item).substr(dash + 1))),
                     where + " item '" + item + "'");
      if (hi < lo) throw ConfigError(where + ": range '" + item + "' ends before it starts");
    }
    if (lo < 0 || hi >= num_layers)
      throw ConfigError(where + ": layer " + std::to_string(lo < 0 ? lo : hi) + " in '" + text +
                        "' is out of range; the model has " + std::to_string(num_layers) + " layers (0-" +
                        std::to_string(num_layers - 1) + ")");
    for (int64_t l = lo; l <= hi; ++l) out.insert(static_cast<int32_t>(l));
  }
  return {out.begin(), out.end()};
}

bool request_sampled(uint64_t request_id, double rate, uint64_t seed) {
  if (rate >= 1.0) return true;
  if (rate <= 0.0) return false;
  // splitmix64 of (id, seed): well mixed even for consecutive ids.
  uint64_t x = request_id ^ (seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL);
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  const double u = static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
  return u < rate;
}

}  // namespace nnsight::capture
