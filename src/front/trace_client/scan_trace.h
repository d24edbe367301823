// Scan (LanguageModel::scan, the server's POST /v1/scan; NNsight's
// model.scan): a recorded trace's graphs run in this process on ATen meta
// tensors, which carry shapes and dtypes and no data, without the model.
// Module values get the shapes and dtypes the start-up probe recorded
// (ModuleInfo::inputs/outputs in runner/model_runner/model_structure.h) with
// the rows of the step they address: every prompt token of the invoke at the
// prefill step, one row per prompt after it, [heads, query, key] of the
// invoke's first prompt for per-sequence points. Every op of the graph then
// runs as it would, on meta tensors. docs/design.md, "Scan".
#pragma once

#include <cstdint>
#include <vector>

#include <nnsight/scan_result.hpp>

#include "dsl/limits.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::tracing {

// `requests`: what the trace would submit (recorded and checked: their
// payloads hold the graphs); `prompt_tokens[r]`: request r's prompt length in
// tokens; `num_edits`: how many of the trace's first invokes are persistent
// edits. Throws TraceError where a real trace would fail on a shape (a write
// of the wrong shape, an op on shapes that do not fit), with the message a
// real trace gives ("invoke i: node n (...) at file:line: ..."), and for what
// a scan cannot know (a user function's result, a condition on a tensor's
// value).
ScanResult scan_trace(const runner::ModelStructure& structure, const std::vector<runner::RequestInput>& requests,
                      const std::vector<int64_t>& prompt_tokens, uint32_t num_edits, const dsl::Limits& limits);

}  // namespace nnsight::tracing
