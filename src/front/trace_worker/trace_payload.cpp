#include "front/trace_worker/trace_payload.h"

#include "dsl/analysis.h"

#include <cstring>

#include "dsl/binary_codec.h"
#include "dsl/errors.h"

namespace nnsight::tracing {

namespace {
constexpr char kMagic[4] = {'N', 'N', 'T', 'P'};
constexpr uint16_t kVersion = 1;
constexpr uint32_t kMaxGraphs = 1024;
constexpr uint32_t kMaxRequests = 65536;

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) b[i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  out.append(b, sizeof(T));
}

template <class T>
T take(std::string_view& in, const char* what) {
  if (in.size() < sizeof(T)) throw dsl::DecodeError(std::string("trace payload truncated reading ") + what);
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(sizeof(T));
  return static_cast<T>(v);
}
}  // namespace

std::string encode_payload(const TracePayload& p) {
  std::string out(kMagic, 4);
  put<uint16_t>(out, kVersion);
  put<uint32_t>(out, p.num_requests);
  put<uint32_t>(out, p.num_invokes);
  put<uint32_t>(out, static_cast<uint32_t>(p.graphs.size()));
  for (const auto& g : p.graphs) {
    std::string bytes = dsl::encode_binary(g.graph);
    put<uint8_t>(out, static_cast<uint8_t>(g.role));
    put<uint64_t>(out, bytes.size());
    out += bytes;
  }
  return out;
}

TracePayload decode_payload(std::string_view in, const dsl::Limits& limits) {
  if (in.size() < 4 || std::memcmp(in.data(), kMagic, 4) != 0)
    throw dsl::DecodeError("trace payload: bad magic (not an nnsight trace payload)");
  in.remove_prefix(4);
  const uint16_t version = take<uint16_t>(in, "the version");
  if (version != kVersion)
    throw dsl::DecodeError("trace payload: unsupported version " + std::to_string(version) + " (this build reads " +
                           std::to_string(kVersion) + ")");
  TracePayload p;
  p.num_requests = take<uint32_t>(in, "the request count");
  p.num_invokes = take<uint32_t>(in, "the invoke count");
  const uint32_t n = take<uint32_t>(in, "the graph count");
  // A request with no graph is a further prompt of an invoke with several
  // (its graph rides on that invoke's first request), so requests may
  // outnumber invokes.
  if (n > kMaxGraphs || p.num_invokes == 0 || p.num_invokes > kMaxGraphs || p.num_requests == 0 ||
      p.num_requests > kMaxRequests)
    throw dsl::DecodeError("trace payload: implausible counts (" + std::to_string(n) + " graphs, " +
                           std::to_string(p.num_invokes) + " invokes, " + std::to_string(p.num_requests) +
                           " requests)");
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t role = take<uint8_t>(in, "a graph role");
    if (role > static_cast<uint8_t>(GraphRole::kPromptless))
      throw dsl::DecodeError("trace payload: graph " + std::to_string(i) + " has unknown role " + std::to_string(role));
    const uint64_t len = take<uint64_t>(in, "a graph length");
    if (len > in.size() || len > limits.max_encoded_bytes)
      throw dsl::DecodeError("trace payload: graph " + std::to_string(i) + " declares " + std::to_string(len) +
                             " bytes but " + std::to_string(in.size()) + " remain");
    p.graphs.push_back(PayloadGraph{static_cast<GraphRole>(role), dsl::decode_binary(in.substr(0, len), limits)});
    in.remove_prefix(len);
  }
  if (!in.empty()) throw dsl::DecodeError("trace payload: " + std::to_string(in.size()) + " trailing bytes");
  if (!p.graphs.empty() && p.graphs.front().role == GraphRole::kAuxiliary)
    throw dsl::DecodeError("trace payload: the first graph must be an invoke's");
  return p;
}

void make_traced(SamplingParams& params, const TracePayload& payload, uint64_t trace_id, int32_t invoke_index) {
  params.payload(encode_payload(payload));
  apply_trace_policy(params, payload, trace_id, invoke_index);
}

void apply_trace_policy(SamplingParams& params, const TracePayload& payload, uint64_t trace_id, int32_t invoke_index) {
  params.trace_id(trace_id)
      .invoke_index(invoke_index)
      .group_id("trace:" + std::to_string(trace_id))
      .allow_chunking(false)
      .prefix_caching(false);
  bool backward = false;
  for (const auto& g : payload.graphs) backward = backward || dsl::uses_gradients(g.graph);
  params.gradients(backward);
}

}  // namespace nnsight::tracing
