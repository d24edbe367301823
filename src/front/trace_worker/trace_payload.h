// TracePayload: what one request of a trace carries to the workers in its
// SamplingParams payload -- the graphs to run as mediators on that request.
//
// The first graph is the invoke's own; further graphs are auxiliary (a
// tracer.cache() recorder) or belong to invokes without a prompt of their
// own, which ride on the trace's first request and see all of the trace's
// rows. An invoke with several prompts has one request per prompt, all with
// its invoke index (SamplingParams::invoke_index); its graphs ride on the
// first, the others carry none, and its mediators see the rows of all of
// them in prompt order. Encoding: "NNTP" + u16 version + u32 trace size + entries, each the
// graph's binary encoding (dsl/binary_codec.h), all lengths bounded.
// Version 2 adds, after the counts, a u64 bound on the bytes the trace's
// saves may hold on a worker (a server's --max-saved-mb); a payload without
// one is written as version 1, as before.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nnsight/sampling_params.hpp>

#include "dsl/graph.h"
#include "dsl/limits.h"

namespace nnsight::tracing {

enum class GraphRole : uint8_t {
  kInvoke = 0,      // the request's own invoke
  kAuxiliary = 1,   // another graph of the same invoke (cache recorder), run after it
  kPromptless = 2,  // an invoke without a prompt: sees every request of the trace
};

struct PayloadGraph {
  GraphRole role = GraphRole::kInvoke;
  dsl::Graph graph;
};

struct TracePayload {
  uint32_t num_requests = 1;  // requests (prompts) in the trace
  uint32_t num_invokes = 1;   // invokes in the trace, promptless ones included
  std::vector<PayloadGraph> graphs;
};

std::string encode_payload(const TracePayload& payload);

// The policy for a request that carries a trace, in one place (the C++ trace
// and `nnsight trace` both use it): the payload, the trace and invoke it
// belongs to, one scheduling group per trace (its invokes are admitted in one
// step together), no chunked prefill (a traced prefill is one step) and no
// prefix cache (hooks must see every token, and a writing intervention's KV
// must never be shared).
void make_traced(SamplingParams& params, const TracePayload& payload, uint64_t trace_id, int32_t invoke_index);
// The same policy for a request whose payload bytes are already in `params`
// (a recorded trace a server received: its bytes pass through unchanged).
void apply_trace_policy(SamplingParams& params, const TracePayload& payload, uint64_t trace_id, int32_t invoke_index);
// When a graph of the trace calls backward(), every request of the trace
// (each prompt of each invoke) runs with autograd: the scheduler keeps the
// trace's steps apart from other requests (SamplingParams::gradients).
template <class Requests>
void share_gradients(Requests& requests) {
  bool any = false;
  for (const auto& r : requests) any = any || r.params.gradients();
  for (auto& r : requests) r.params.gradients(any);
}
// Throws dsl::DecodeError for malformed bytes (never allocates beyond `limits`).
TracePayload decode_payload(std::string_view bytes, const dsl::Limits& limits);

}  // namespace nnsight::tracing
