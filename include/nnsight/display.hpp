// Rich display in notebooks. xeus-cling shows the value of a cell's last
// expression through `mime_bundle_repr(value)`, found by argument-dependent
// lookup, which returns a JSON object from MIME type to content
// ({"text/plain": ..., "text/html": ..., "image/svg+xml": ...}). These
// overloads give the library's results such a picture:
//
//   out                                  a TraceResult: invokes, texts and saves as tables
//   nnsight::show(out, h)                a saved tensor: shape, dtype, statistics, a few values
//   nnsight::logit_lens(lm, prompt)      a LogitLens: an SVG heatmap, layers by positions
//   nnsight::attention_heatmap(p, head, tokens)
//                                        one head of a saved `<attn>.pattern`: an SVG heatmap,
//                                        queries by keys (docs/attention-internals.md)
//
// They are plain functions; outside a notebook, call them and use the strings.
#pragma once

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <nnsight/language_model.hpp>
#include <nnsight/logit_lens.hpp>
#include <nnsight/saved.hpp>

namespace nnsight {

// A tensor with the name it was saved under, for display.
struct SavedTensor {
  std::string name;
  at::Tensor value;
};

// The saved tensor `saved` of `result` (throws like result[saved]).
SavedTensor show(const TraceResult& result, const Saved& saved);
// Any tensor, under an optional name.
SavedTensor show(const at::Tensor& value, const std::string& name = "");

// text/plain and text/html: one row per invoke (prompt, generated text,
// finish reason) and one per save (name, dtype, shape).
nlohmann::json mime_bundle_repr(const TraceResult& result);
// text/plain and text/html: dtype, shape, device; min, max, mean, std, norm
// (over finite elements; NaN and inf counted); the leading rows and columns
// of the tensor viewed as a matrix (rows: all but the last dimension).
nlohmann::json mime_bundle_repr(const SavedTensor& tensor);
// image/svg+xml: a heatmap with a row per layer and a column per prompt
// position, each cell the top token, shaded by its probability; text/plain:
// the same as a table.
nlohmann::json mime_bundle_repr(const LogitLens& lens);

// The SVG alone (what mime_bundle_repr(lens) puts under "image/svg+xml").
std::string logit_lens_svg(const LogitLens& lens);

// One head's attention pattern: a row per query, a column per key.
struct AttentionHeatmap {
  std::string title;                      // shown above the picture
  std::vector<std::string> key_tokens;    // the token at each key position
  std::vector<std::string> query_tokens;  // the token at each query row
  at::Tensor probs;                       // [queries, keys] float32: the head's probabilities

  int64_t num_queries() const { return probs.defined() ? probs.size(0) : 0; }
  int64_t num_keys() const { return probs.defined() ? probs.size(1) : 0; }
};

// Head `head` of a saved `<attn>.pattern` value ([heads, queries, keys]; a
// negative head counts from the end). `key_tokens` labels the keys, one per
// key (token_labels(lm, prompt) at a prefill); a step's queries are its newest
// keys, so the rows are labelled with the last `queries` labels. Throws
// nnsight::Error for a tensor that is not 3-D, a head out of range or a label
// count that is not the number of keys.
AttentionHeatmap attention_heatmap(const at::Tensor& pattern, int64_t head, std::vector<std::string> key_tokens,
                                   std::string title = "");
// Each token of `text` (as the model tokenizes it, special tokens included)
// decoded on its own: labels for a heatmap's keys.
std::vector<std::string> token_labels(const LanguageModel& lm, const std::string& text);

// image/svg+xml: the heatmap, each cell shaded by its probability (white 0,
// dark blue 1), keys the model cannot see (above the diagonal, outside a
// window) are the white of probability 0; text/plain: the same as a table.
nlohmann::json mime_bundle_repr(const AttentionHeatmap& heatmap);
// The SVG alone.
std::string attention_heatmap_svg(const AttentionHeatmap& heatmap);

}  // namespace nnsight
