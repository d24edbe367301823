// validate() of the public option types the engine consumes.
#include <cmath>
#include <string>

#include <nnsight/engine_args.hpp>
#include <nnsight/error.hpp>
#include <nnsight/request_output.hpp>
#include <nnsight/sampling_params.hpp>

#include "runner/executor/tcp_endpoint.h"
#include "tp/rendezvous.h"

namespace nnsight {

namespace {
[[noreturn]] void bad(const std::string& type, const std::string& field, const std::string& why) {
  throw ConfigError(type + "." + field + " " + why);
}
std::string num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}
}  // namespace

void SamplingParams::validate() const {
  const std::string t = "SamplingParams";
  if (!(temperature_ >= 0) || !std::isfinite(temperature_))
    bad(t, "temperature", "must be >= 0, got " + num(temperature_));
  if (!(top_p_ > 0 && top_p_ <= 1)) bad(t, "top_p", "must be in (0, 1], got " + num(top_p_));
  if (top_k_ < 0) bad(t, "top_k", "must be >= 0 (0 = off), got " + std::to_string(top_k_));
  if (!(min_p_ >= 0 && min_p_ <= 1)) bad(t, "min_p", "must be in [0, 1], got " + num(min_p_));
  if (max_tokens_ < 1) bad(t, "max_tokens", "must be >= 1, got " + std::to_string(max_tokens_));
  if (logprobs_ && (*logprobs_ < 0 || *logprobs_ > 100))
    bad(t, "logprobs", "must be in [0, 100], got " + std::to_string(*logprobs_));
  for (const auto& s : stop_)
    if (s.empty()) bad(t, "stop", "must not contain an empty string");
  for (auto id : stop_token_ids_)
    if (id < 0) bad(t, "stop_token_ids", "must be non-negative, got " + std::to_string(id));
  if (invoke_index_ < 0) bad(t, "invoke_index", "must be >= 0");
  if (max_saved_bytes_ < 0)
    bad(t, "max_saved_bytes", "must be >= 0 (0 = unbounded), got " + std::to_string(max_saved_bytes_));
}

void EngineArgs::validate() const {
  const std::string t = "EngineArgs";
  if (model_.empty()) bad(t, "model", "must name a model");
  if (dtype_ != "float32" && dtype_ != "bfloat16") bad(t, "dtype", "must be float32 or bfloat16, got '" + dtype_ + "'");
  if (device_ != "cpu" && device_.rfind("cuda", 0) != 0)
    bad(t, "device", "must be cpu or cuda[:N], got '" + device_ + "'");
  if (max_num_seqs_ < 1) bad(t, "max_num_seqs", "must be >= 1, got " + std::to_string(max_num_seqs_));
  if (max_num_batched_tokens_ < 1)
    bad(t, "max_num_batched_tokens", "must be >= 1, got " + std::to_string(max_num_batched_tokens_));
  if (max_model_len_ < 0)
    bad(t, "max_model_len", "must be >= 0 (0 = the model's), got " + std::to_string(max_model_len_));
  if (block_size_ < 1 || block_size_ > 1024)
    bad(t, "block_size", "must be in [1, 1024], got " + std::to_string(block_size_));
  if (num_kv_blocks_ < 0) bad(t, "num_kv_blocks", "must be >= 0, got " + std::to_string(num_kv_blocks_));
  if (kv_cache_memory_mb_ < 1) bad(t, "kv_cache_memory_mb", "must be >= 1, got " + std::to_string(kv_cache_memory_mb_));
  if (intervention_memory_mb_ < 0)
    bad(t, "intervention_memory_mb",
        "must be >= 0 (0 = sized for the machine), got " + std::to_string(intervention_memory_mb_));
  if (executor_ != "inproc" && executor_ != "mp") bad(t, "executor", "must be inproc or mp, got '" + executor_ + "'");
  if (tensor_parallel_size_ < 1 || tensor_parallel_size_ > 64)
    bad(t, "tensor_parallel_size", "must be in [1, 64], got " + std::to_string(tensor_parallel_size_));
  if (!(worker_timeout_s_ > 0)) bad(t, "worker_timeout_s", "must be > 0");
  if (max_worker_restarts_ < -1)
    bad(t, "max_worker_restarts", "must be >= -1 (-1 = always), got " + std::to_string(max_worker_restarts_));
  if (!tp_rendezvous_.empty()) {
    try {
      tp::Rendezvous::parse(tp_rendezvous_);
    } catch (const ConfigError& e) {
      bad(t, "tp_rendezvous", std::string("is unusable: ") + e.what());
    }
  }
  if (!worker_addresses_.empty()) {
    int64_t count = 0;
    size_t begin = 0;
    while (begin <= worker_addresses_.size()) {
      size_t end = worker_addresses_.find(',', begin);
      if (end == std::string::npos) end = worker_addresses_.size();
      std::string item = worker_addresses_.substr(begin, end - begin);
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (!item.empty()) {
        runner::HostPort::parse(item, "EngineArgs.worker_addresses entry");
        ++count;
      }
      begin = end + 1;
    }
    if (count != tensor_parallel_size_)
      bad(t, "worker_addresses",
          "names " + std::to_string(count) + " workers but tensor_parallel_size is " +
              std::to_string(tensor_parallel_size_));
  }
  if (num_threads_ < 0) bad(t, "num_threads", "must be >= 0 (0 = all cores)");
  if (fast_untraced_ && !forward_hooks_.empty())
    bad(t, "fast_untraced",
        "cannot be combined with forward_hooks: the hooks would see untraced requests' 8-bit-activation values");
  if (fast_untraced_ && capture_set_ && capture_enabled_)
    bad(t, "fast_untraced",
        "cannot be combined with activation capture: it would record untraced requests' 8-bit-activation values");
}

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

}  // namespace nnsight
