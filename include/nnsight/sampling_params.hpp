// SamplingParams: how one request is sampled and when it stops, plus the
// opaque per-request payload the tracing layer fills with its serialized
// intervention graph. Chainable setters; validate() names the bad field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nnsight {

class SamplingParams {
 public:
  SamplingParams() = default;

  // ---- sampling
  double temperature() const { return temperature_; }
  SamplingParams& temperature(double v) {
    temperature_ = v;
    return *this;
  }  // 0 = greedy; default 1
  double top_p() const { return top_p_; }
  SamplingParams& top_p(double v) {
    top_p_ = v;
    return *this;
  }  // (0, 1]; default 1 (off)
  int64_t top_k() const { return top_k_; }
  SamplingParams& top_k(int64_t v) {
    top_k_ = v;
    return *this;
  }  // 0 = off
  double min_p() const { return min_p_; }
  SamplingParams& min_p(double v) {
    min_p_ = v;
    return *this;
  }  // [0, 1]; 0 = off
  const std::optional<uint64_t>& seed() const { return seed_; }
  SamplingParams& seed(uint64_t v) {
    seed_ = v;
    return *this;
  }  // per-request RNG seed
  // Top-n log-probabilities per generated token (plus the sampled token's); unset = none.
  const std::optional<int64_t>& logprobs() const { return logprobs_; }
  SamplingParams& logprobs(int64_t n) {
    logprobs_ = n;
    return *this;
  }

  // ---- stopping
  int64_t max_tokens() const { return max_tokens_; }
  SamplingParams& max_tokens(int64_t v) {
    max_tokens_ = v;
    return *this;
  }  // >= 1; default 16
  const std::vector<int32_t>& stop_token_ids() const { return stop_token_ids_; }
  SamplingParams& stop_token_ids(std::vector<int32_t> v) {
    stop_token_ids_ = std::move(v);
    return *this;
  }
  // Generation stops when the text ends with one; the stop string is not part of the text.
  const std::vector<std::string>& stop() const { return stop_; }
  SamplingParams& stop(std::vector<std::string> v) {
    stop_ = std::move(v);
    return *this;
  }
  bool ignore_eos() const { return ignore_eos_; }
  SamplingParams& ignore_eos(bool v) {
    ignore_eos_ = v;
    return *this;
  }  // keep going past EOS
  bool skip_special_tokens() const { return skip_special_tokens_; }
  SamplingParams& skip_special_tokens(bool v) {
    skip_special_tokens_ = v;
    return *this;
  }  // in text

  // ---- scheduling
  // Requests sharing a non-empty group id are admitted in the same step (gang scheduling).
  const std::string& group_id() const { return group_id_; }
  SamplingParams& group_id(std::string v) {
    group_id_ = std::move(v);
    return *this;
  }
  bool allow_chunking() const { return allow_chunking_; }
  SamplingParams& allow_chunking(bool v) {
    allow_chunking_ = v;
    return *this;
  }  // split a long prefill
  bool prefix_caching() const { return prefix_caching_; }
  SamplingParams& prefix_caching(bool v) {
    prefix_caching_ = v;
    return *this;
  }  // reuse/offer cached KV
  // Extra key mixed into prefix-cache block hashes: requests share cached KV only with equal salts.
  const std::string& cache_salt() const { return cache_salt_; }
  SamplingParams& cache_salt(std::string v) {
    cache_salt_ = std::move(v);
    return *this;
  }

  // ---- tracing payload (opaque to the engine)
  const std::string& payload() const { return payload_; }
  SamplingParams& payload(std::string v) {
    payload_ = std::move(v);
    return *this;
  }
  uint64_t trace_id() const { return trace_id_; }
  SamplingParams& trace_id(uint64_t v) {
    trace_id_ = v;
    return *this;
  }
  // The request's graphs ask for gradients: its steps run with autograd, apart
  // from every other request's (set by the tracing front end; docs/gradients.md).
  bool gradients() const { return gradients_; }
  SamplingParams& gradients(bool v) {
    gradients_ = v;
    return *this;
  }
  int32_t invoke_index() const { return invoke_index_; }
  SamplingParams& invoke_index(int32_t v) {
    invoke_index_ = v;
    return *this;
  }
  // The most bytes the trace's saves may hold on a worker: the save that
  // would go over fails the trace at its step. 0 = unbounded (`nnsight
  // serve` sets its --max-saved-mb here on every trace it runs).
  int64_t max_saved_bytes() const { return max_saved_bytes_; }
  SamplingParams& max_saved_bytes(int64_t v) {
    max_saved_bytes_ = v;
    return *this;
  }

  // Throws nnsight::ConfigError naming the first bad field.
  void validate() const;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(temperature_, top_p_, top_k_, min_p_, seed_, logprobs_, max_tokens_, stop_token_ids_, stop_, ignore_eos_,
       skip_special_tokens_, group_id_, allow_chunking_, prefix_caching_, cache_salt_, payload_, trace_id_,
       invoke_index_, gradients_, max_saved_bytes_);
  }

 private:
  double temperature_ = 1.0;
  double top_p_ = 1.0;
  int64_t top_k_ = 0;
  double min_p_ = 0.0;
  std::optional<uint64_t> seed_;
  std::optional<int64_t> logprobs_;
  int64_t max_tokens_ = 16;
  std::vector<int32_t> stop_token_ids_;
  std::vector<std::string> stop_;
  bool ignore_eos_ = false;
  bool skip_special_tokens_ = true;
  std::string group_id_;
  bool allow_chunking_ = true;
  bool prefix_caching_ = true;
  std::string cache_salt_;
  std::string payload_;
  uint64_t trace_id_ = 0;
  int32_t invoke_index_ = 0;
  bool gradients_ = false;
  int64_t max_saved_bytes_ = 0;
};

}  // namespace nnsight
