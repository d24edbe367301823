// The logit lens: what each decoder layer would predict if the model stopped
// there. Every layer's residual stream (its output) at every prompt position
// goes through the model's final norm and LM head; the result holds the top
// token and its probability per (layer, position).
//
//   nnsight::LogitLens lens = nnsight::logit_lens(lm, "The Eiffel Tower is located in the city of");
//   lens.token(lens.num_layers() - 1, -1);   // " Paris": the last layer at the last position
//
// In a notebook the result displays as an SVG heatmap (nnsight/display.hpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nnsight/call_site.hpp>

namespace nnsight {

class LanguageModel;

class LogitLensOptions {
 public:
  LogitLensOptions() = default;

  // Decoder layers to look at, in order; empty = every layer.
  const std::vector<int64_t>& layers() const { return layers_; }
  LogitLensOptions& layers(std::vector<int64_t> v) {
    layers_ = std::move(v);
    return *this;
  }
  // Prompt positions to look at (negative counts from the end); empty = every position.
  const std::vector<int64_t>& positions() const { return positions_; }
  LogitLensOptions& positions(std::vector<int64_t> v) {
    positions_ = std::move(v);
    return *this;
  }

 private:
  std::vector<int64_t> layers_;
  std::vector<int64_t> positions_;
};

// What logit_lens() computed: rows are layers, columns prompt positions.
struct LogitLens {
  std::string prompt;
  std::vector<int32_t> prompt_token_ids;  // the whole tokenized prompt
  std::vector<int64_t> layers;            // decoder layer of each row
  std::vector<int64_t> positions;         // prompt position of each column
  std::vector<std::string> input_tokens;  // the decoded prompt token at each column
  at::Tensor top_ids;                     // [layers, positions] int64: the most likely next token
  at::Tensor top_probs;                   // [layers, positions] float32: its probability
  std::vector<std::string> top_tokens;    // decoded top_ids, row-major

  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  int64_t num_positions() const { return static_cast<int64_t>(positions.size()); }
  // The top token of row `row` at column `column` (a negative column counts
  // from the end). Throws nnsight::Error when out of range.
  const std::string& token(int64_t row, int64_t column) const;
  int32_t token_id(int64_t row, int64_t column) const;
  double prob(int64_t row, int64_t column) const;
};

// Runs one trace of `prompt` on `lm` (greedy, one token) whose graph applies
// the model's own final norm and LM head to every chosen layer's output where
// the model runs (envoy(path)(x): nothing is computed in this process, and
// only the top tokens and probabilities come back). Works for every
// architecture whose modules are named as Hugging Face's Llama-style models,
// GPT-2 or GPT-NeoX name them (docs/weights.md), in process, in worker
// processes and under tensor parallelism. Throws nnsight::Error for an empty
// prompt or a layer/position out of range.
LogitLens logit_lens(LanguageModel& lm, const std::string& prompt, const LogitLensOptions& options = LogitLensOptions(),
                     CallSite site = CallSite());

}  // namespace nnsight
