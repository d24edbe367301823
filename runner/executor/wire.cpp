#include "runner/executor/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "runner/executor/worker_error.h"

namespace nnsight {

template <class A>
void serialize(A& ar, RopeScaling& r) {
  ar(r.type, r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_position, r.short_factor, r.long_factor,
     r.attention_factor, r.beta_fast, r.beta_slow, r.truncate);
}

template <class A>
void serialize(A& ar, ModelConfig& c) {
  ar(c.architecture, c.name, c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads,
     c.num_kv_heads, c.head_dim, c.max_position, c.norm_eps, c.rope_theta, c.rope_scaling, c.tie_word_embeddings,
     c.attention_bias, c.mlp_bias, c.hidden_act, c.bos_token_id, c.eos_token_id, c.sliding_window, c.sliding_layers,
     c.rope_local_theta, c.rotary_dim, c.attn_logit_softcap, c.final_logit_softcap, c.query_pre_attn_scalar,
     c.parallel_residual, c.num_experts, c.num_experts_per_token, c.moe_intermediate_size, c.norm_topk_prob,
     c.moe_layers, c.multimodal, c.more_eos_token_ids, c.attention_out_bias, c.model_type, c.nope_layers);
}

}  // namespace nnsight

namespace nnsight::runner {

namespace {

// Tensors cross as (dtype, shape, raw bytes) on the CPU.
void save_tensor(cereal::PortableBinaryOutputArchive& ar, const at::Tensor& t) {
  const bool defined = t.defined();
  ar(defined);
  if (!defined) return;
  at::Tensor c = t.to(at::kCPU).contiguous();
  ar(static_cast<int32_t>(c.scalar_type()));
  std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
  ar(shape);
  const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * c.element_size();
  ar(nbytes);
  // As bytes: cereal's portable archive takes the element size from the
  // pointer's type (sizeof(void) is a GCC extension).
  ar(cereal::binary_data(static_cast<uint8_t*>(c.data_ptr()), nbytes));
}

at::Tensor load_tensor(cereal::PortableBinaryInputArchive& ar, uint64_t remaining) {
  bool defined = false;
  ar(defined);
  if (!defined) return at::Tensor();
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
  ar(dtype);
  ar(shape);
  ar(nbytes);
  if (dtype < 0 || dtype >= static_cast<int32_t>(at::ScalarType::NumOptions) || nbytes > remaining)
    throw WorkerError("worker message: corrupt tensor header");
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(static_cast<at::ScalarType>(dtype)));
  if (static_cast<uint64_t>(t.numel()) * t.element_size() != nbytes)
    throw WorkerError("worker message: tensor size mismatch");
  ar(cereal::binary_data(static_cast<uint8_t*>(t.data_ptr()), nbytes));
  return t;
}

template <class T>
std::string encode_plain(const T& v) {
  std::ostringstream os;
  {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(const_cast<T&>(v));
  }
  return os.str();
}

template <class T>
void decode_plain(const std::string& bytes, T& v) {
  try {
    std::istringstream is(bytes);
    cereal::PortableBinaryInputArchive ar(is);
    ar(v);
  } catch (const cereal::Exception& e) {
    throw WorkerError(std::string("worker message: corrupt payload (") + e.what() + ")");
  }
}

}  // namespace

std::string encode(const WorkerInit& v) { return encode_plain(v); }
void decode(const std::string& b, WorkerInit& v) { decode_plain(b, v); }
std::string encode(const SchedulerOutput& v) { return encode_plain(v); }
void decode(const std::string& b, SchedulerOutput& v) { decode_plain(b, v); }

std::string encode(const WorkerReady& v) {
  std::ostringstream os;
  {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(v.num_kv_blocks, const_cast<ModelConfig&>(v.config));
    std::vector<std::string> paths, types;
    std::vector<int32_t> tuples;
    std::vector<uint8_t> levels, callable;
    // Probed shapes (scan): per module, its inputs' and outputs' sizes and dtypes.
    std::vector<std::vector<std::vector<int64_t>>> in_sizes, out_sizes;
    std::vector<std::vector<int8_t>> in_dtypes, out_dtypes;
    for (const auto& m : v.structure.modules()) {
      in_sizes.emplace_back();
      in_dtypes.emplace_back();
      out_sizes.emplace_back();
      out_dtypes.emplace_back();
      for (const auto& t : m.inputs) {
        in_sizes.back().push_back(t.sizes);
        in_dtypes.back().push_back(t.dtype);
      }
      for (const auto& t : m.outputs) {
        out_sizes.back().push_back(t.sizes);
        out_dtypes.back().push_back(t.dtype);
      }
      paths.push_back(m.path);
      types.push_back(m.type_name);
      tuples.push_back(m.output_tuple_size);
      levels.push_back(static_cast<uint8_t>(m.row_level));
      callable.push_back(m.callable ? 1 : 0);
    }
    ar(paths, types, tuples, levels, callable, v.structure.events(), v.structure.functions());
    ar(in_sizes, in_dtypes, out_sizes, out_dtypes, v.structure.logits().sizes, v.structure.logits().dtype);
  }
  return os.str();
}
void decode(const std::string& b, WorkerReady& v) {
  try {
    std::istringstream is(b);
    cereal::PortableBinaryInputArchive ar(is);
    ar(v.num_kv_blocks, v.config);
    std::vector<std::string> paths, types, events, functions;
    std::vector<int32_t> tuples;
    std::vector<uint8_t> levels, callable;
    ar(paths, types, tuples, levels, callable, events, functions);
    std::vector<std::vector<std::vector<int64_t>>> in_sizes, out_sizes;
    std::vector<std::vector<int8_t>> in_dtypes, out_dtypes;
    ProbedTensor logits;
    ar(in_sizes, in_dtypes, out_sizes, out_dtypes, logits.sizes, logits.dtype);
    if (in_sizes.size() != paths.size() || in_dtypes.size() != paths.size() || out_sizes.size() != paths.size() ||
        out_dtypes.size() != paths.size())
      throw WorkerError("worker message: corrupt structure");
    if (types.size() != paths.size() || tuples.size() != paths.size() || levels.size() != paths.size() ||
        callable.size() != paths.size())
      throw WorkerError("worker message: corrupt structure");
    std::vector<ModuleInfo> modules;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (levels[i] > static_cast<uint8_t>(batching::RowLevel::kSequence) || callable[i] > 1)
        throw WorkerError("worker message: corrupt structure");
      modules.push_back(
          ModuleInfo{paths[i], types[i], tuples[i], static_cast<batching::RowLevel>(levels[i]), callable[i] == 1});
      if (in_sizes[i].size() != in_dtypes[i].size() || out_sizes[i].size() != out_dtypes[i].size())
        throw WorkerError("worker message: corrupt structure");
      for (size_t k = 0; k < in_sizes[i].size(); ++k)
        modules.back().inputs.push_back(ProbedTensor{in_sizes[i][k], in_dtypes[i][k]});
      for (size_t k = 0; k < out_sizes[i].size(); ++k)
        modules.back().outputs.push_back(ProbedTensor{out_sizes[i][k], out_dtypes[i][k]});
    }
    v.structure = ModelStructure(std::move(modules), std::move(events));
    v.structure.set_functions(std::move(functions));
    v.structure.set_logits(std::move(logits));
  } catch (const cereal::Exception& e) {
    throw WorkerError(std::string("worker message: corrupt payload (") + e.what() + ")");
  }
}

std::string encode(const ModelRunnerOutput& v) {
  std::ostringstream os;
  {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(v.step, const_cast<std::vector<SampledToken>&>(v.sampled));
    ar(static_cast<uint64_t>(v.finished.size()));
    for (const auto& f : v.finished) {
      ar(f.id, static_cast<int32_t>(f.reason), f.error, static_cast<uint64_t>(f.saves.size()));
      for (const auto& [name, v] : f.saves) {
        ar(name, v.is_list);
        if (!v.is_list) {
          save_tensor(ar, v.tensor);
        } else {
          ar(static_cast<uint64_t>(v.list.size()));
          for (const auto& t : v.list) save_tensor(ar, t);
        }
      }
    }
  }
  return os.str();
}

void decode(const std::string& b, ModelRunnerOutput& v) {
  try {
    std::istringstream is(b);
    cereal::PortableBinaryInputArchive ar(is);
    ar(v.step, v.sampled);
    uint64_t n = 0;
    ar(n);
    if (n > b.size()) throw WorkerError("worker message: corrupt finished count");
    v.finished.resize(n);
    for (auto& f : v.finished) {
      int32_t reason = 0;
      uint64_t num_saves = 0;
      ar(f.id, reason, f.error, num_saves);
      if (num_saves > b.size()) throw WorkerError("worker message: corrupt save count");
      f.reason = static_cast<FinishReason>(reason);
      for (uint64_t i = 0; i < num_saves; ++i) {
        std::string name;
        bool is_list = false;
        ar(name, is_list);
        if (!is_list) {
          f.saves[name] = SavedValue(load_tensor(ar, b.size()));
        } else {
          uint64_t count = 0;
          ar(count);
          if (count > b.size()) throw WorkerError("worker message: corrupt list length");
          std::vector<at::Tensor> items;
          for (uint64_t k = 0; k < count; ++k) items.push_back(load_tensor(ar, b.size()));
          f.saves[name] = SavedValue::of_list(std::move(items));
        }
      }
    }
  } catch (const cereal::Exception& e) {
    throw WorkerError(std::string("worker message: corrupt payload (") + e.what() + ")");
  }
}

namespace {
struct FrameHeader {
  uint32_t magic;
  uint32_t type;
  uint64_t length;
};
constexpr uint32_t kFrameMagic = 0x4e4e5357;  // "NNSW"

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes; waits at most until `deadline` (steady clock, 0 = forever).
enum class ReadResult { kOk, kTimeout, kEof };
ReadResult read_all(int fd, char* p, size_t n, std::chrono::steady_clock::time_point deadline, bool has_deadline) {
  while (n > 0) {
    int wait_ms = -1;
    if (has_deadline) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return ReadResult::kTimeout;
      wait_ms = static_cast<int>(std::min<long long>(left, 1 << 30));
    }
    pollfd pfd{fd, POLLIN, 0};
    int pr = ::poll(&pfd, 1, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return ReadResult::kEof;
    }
    if (pr == 0) return ReadResult::kTimeout;
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ReadResult::kEof;
    }
    if (r == 0) return ReadResult::kEof;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return ReadResult::kOk;
}
}  // namespace

bool send_message(int fd, MessageType type, const std::string& payload) {
  FrameHeader h{kFrameMagic, static_cast<uint32_t>(type), payload.size()};
  return write_all(fd, reinterpret_cast<const char*>(&h), sizeof h) && write_all(fd, payload.data(), payload.size());
}

bool recv_message(int fd, double timeout_s, MessageType& type, std::string& payload) {
  const bool has_deadline = timeout_s >= 0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>((has_deadline ? timeout_s : 0) * 1e6));
  FrameHeader h{};
  ReadResult r = read_all(fd, reinterpret_cast<char*>(&h), sizeof h, deadline, has_deadline);
  if (r == ReadResult::kTimeout) return false;
  if (r == ReadResult::kEof) throw WorkerError("connection closed");
  if (h.magic != kFrameMagic || h.length > kMaxMessageBytes) throw WorkerError("corrupt message frame");
  type = static_cast<MessageType>(h.type);
  payload.resize(h.length);
  // Once a frame started, its body must follow promptly even without a deadline.
  r = read_all(fd, payload.data(), payload.size(), deadline, has_deadline);
  if (r == ReadResult::kTimeout) return false;
  if (r == ReadResult::kEof) throw WorkerError("connection closed in the middle of a message");
  return true;
}

}  // namespace nnsight::runner
