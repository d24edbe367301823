// Rich display in notebooks. xeus-cling shows the value of a cell's last
// expression through `mime_bundle_repr(value)`, found by argument-dependent
// lookup, which returns a JSON object from MIME type to content
// ({"text/plain": ..., "text/html": ..., "image/svg+xml": ...}). These
// overloads give the library's results such a picture:
//
//   out                                  a TraceResult: invokes, texts and saves as tables
//   nnsight::show(out, h)                a saved tensor: shape, dtype, statistics, a few values
//   nnsight::logit_lens(lm, prompt)      a LogitLens: an SVG heatmap, layers by positions
//
// They are plain functions; outside a notebook, call them and use the strings.
#pragma once

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <string>

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

}  // namespace nnsight
