// Running graphs written as data (JSON files, other clients) as one trace,
// the way LanguageModel runs recorded ones: one request per prompt, each
// carrying its invoke's graph, admitted together. Used by `nnsight trace`.
#pragma once

#include <string>
#include <vector>

#include <nnsight/language_model.hpp>
#include <nnsight/llm.hpp>
#include <nnsight/sampling_params.hpp>

#include "front/trace_client/graph_file.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::tracing {

// `graphs` holds one graph for every prompt, or one graph that every prompt
// runs, or graphs that name their "prompts" (GraphFile::prompts): graph i is
// then invoke i over those prompts, every prompt in exactly one graph. The
// outputs are in prompt order. A shared graph run by several prompts saves under "<prompt index>/<name>"
// (e.g. "1/h"); otherwise a save keeps its name. Each graph's invoke index is
// set to its prompt's. Graphs are validated and checked against the model
// before anything runs (TraceError naming the node's place in its file);
// a failure while running throws TraceError with the engine's message.
// The prompts of each invoke (see above); TraceError when the graphs and the
// number of prompts do not fit together.
std::vector<std::vector<size_t>> invoke_prompts(const std::vector<GraphFile>& graphs, size_t num_prompts);

TraceResult run_graph_trace(LLM& llm, const std::vector<std::string>& prompts, const std::vector<GraphFile>& graphs,
                            const SamplingParams& params);

// The requests such a trace submits, after every check (the graphs, their
// save names, the schedule against `structure`), with trace id `trace_id`
// (next_trace_id()). `prompts[i]` holds prompt i's text or token ids. The
// requests of one invoke are contiguous; prompt_of[r] is request r's prompt.
// Throws TraceError. `edits` (persistent edits, front/trace_worker/persistent_edits.h,
// already checked) run first, as invokes without a prompt.
struct PreparedGraphTrace {
  std::vector<runner::RequestInput> requests;
  std::vector<size_t> prompt_of;
};
PreparedGraphTrace prepare_graph_trace(const runner::ModelStructure& structure,
                                       std::vector<runner::RequestInput> prompts, const std::vector<GraphFile>& graphs,
                                       const SamplingParams& params, uint64_t trace_id,
                                       const std::vector<dsl::Graph>& edits = {});
// A trace id for graphs run as data (far from the ones LanguageModel counts
// up from 1, so both may share an engine).
uint64_t next_trace_id();
// The same with tokenized prompts.
TraceResult run_graph_trace(LLM& llm, const std::vector<std::vector<int32_t>>& prompt_token_ids,
                            const std::vector<GraphFile>& graphs, const SamplingParams& params);

}  // namespace nnsight::tracing
