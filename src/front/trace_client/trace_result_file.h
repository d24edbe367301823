// A TraceResult as one safetensors file: the format `nnsight trace --out`
// writes, the server's /v1/traces/{id}/saves returns, and the remote client
// reads back. Python's `safetensors` reads it as plain tensors:
//   - a save `x` is the tensor `x`; a list save `x` is `x.0`, `x.1`, ... with
//     the index zero-padded to the widest one (so names sort in list order);
//     None elements are left out; numbers are 0-d tensors;
//   - metadata: "format" = "nnsight.trace", "prompts" and "texts" (JSON string
//     arrays), "outputs" (JSON: each request's prompt and generated token ids,
//     finish reason), "lists" (JSON: list saves and their lengths, so a reader
//     can rebuild them, None elements included).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nnsight/language_model.hpp>

namespace nnsight::tracing {

std::vector<std::pair<std::string, at::Tensor>> flatten_saves(const TraceResult& result);
// `prompts`: each request's prompt text (empty strings for token-id prompts).
std::string encode_trace_result(const TraceResult& result, const std::vector<std::string>& prompts);
void write_trace_result(const std::string& path, const TraceResult& result, const std::vector<std::string>& prompts);
// Throws nnsight::LoadError naming `what` for bytes that are not such a file.
TraceResult decode_trace_result(std::string bytes, const std::string& what);

}  // namespace nnsight::tracing
