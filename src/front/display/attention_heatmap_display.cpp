// attention_heatmap, mime_bundle_repr(AttentionHeatmap) and
// attention_heatmap_svg (include/nnsight/display.hpp): the picture is written
// by hand as SVG like the logit lens's, one rect per (query, key) cell.
#include <ATen/ATen.h>

#include <nnsight/display.hpp>
#include <nnsight/error.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "front/display/markup.h"

namespace nnsight {
namespace {

constexpr int kCell = 22;           // a cell is square
constexpr int kLeft = 110;          // room for the query labels
constexpr int kTop = 34;            // room for the title
constexpr int kBottom = 96;         // room for the rotated key labels
constexpr int kLegendWidth = 70;    // colour bar and its labels
constexpr size_t kLabelChars = 14;  // characters of a token label
constexpr size_t kTextColumn = 8;   // width of a column of the text table

void check(const AttentionHeatmap& h) {
  if (!h.probs.defined() || h.probs.dim() != 2) throw Error("AttentionHeatmap: probs must be a [queries, keys] tensor");
  if (static_cast<int64_t>(h.key_tokens.size()) != h.num_keys() ||
      static_cast<int64_t>(h.query_tokens.size()) != h.num_queries())
    throw Error("AttentionHeatmap: " + std::to_string(h.key_tokens.size()) + " key and " +
                std::to_string(h.query_tokens.size()) + " query labels for a [" + std::to_string(h.num_queries()) +
                ", " + std::to_string(h.num_keys()) + "] pattern");
}

std::string label(const std::string& token, size_t chars) {
  return display::truncate_utf8("\"" + display::visible(token) + "\"", chars);
}

std::string text_table(const AttentionHeatmap& h) {
  std::ostringstream out;
  out << (h.title.empty() ? std::string("attention pattern") : display::visible(h.title)) << " (" << h.num_queries()
      << " queries x " << h.num_keys() << " keys; rows: queries)\n";
  out << display::pad("", kLabelChars + 1);
  for (int64_t k = 0; k < h.num_keys(); ++k)
    out << display::pad(label(h.key_tokens[static_cast<size_t>(k)], kTextColumn - 1), kTextColumn);
  out << "\n";
  at::Tensor probs = h.probs.to(at::kDouble).contiguous();
  const double* p = probs.data_ptr<double>();
  for (int64_t q = 0; q < h.num_queries(); ++q) {
    out << display::pad(label(h.query_tokens[static_cast<size_t>(q)], kLabelChars), kLabelChars + 1);
    for (int64_t k = 0; k < h.num_keys(); ++k) {
      char cell[16];
      std::snprintf(cell, sizeof cell, "%.3f", p[q * h.num_keys() + k]);
      out << display::pad(cell, kTextColumn);
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace

AttentionHeatmap attention_heatmap(const at::Tensor& pattern, int64_t head, std::vector<std::string> key_tokens,
                                   std::string title) {
  if (!pattern.defined() || pattern.dim() != 3)
    throw Error("attention_heatmap: expected a pattern [heads, queries, keys], got a " +
                (pattern.defined() ? std::to_string(pattern.dim()) + "-D tensor" : std::string("undefined tensor")));
  const int64_t heads = pattern.size(0), queries = pattern.size(1), keys = pattern.size(2);
  if (head < -heads || head >= heads)
    throw Error("attention_heatmap: head " + std::to_string(head) + " out of range for " + std::to_string(heads) +
                " heads");
  if (head < 0) head += heads;
  if (static_cast<int64_t>(key_tokens.size()) != keys)
    throw Error("attention_heatmap: " + std::to_string(key_tokens.size()) + " key labels for " + std::to_string(keys) +
                " keys");
  if (queries > keys)
    throw Error("attention_heatmap: " + std::to_string(queries) + " queries but only " + std::to_string(keys) +
                " keys (a step's queries are its newest keys)");
  AttentionHeatmap h;
  h.title = std::move(title);
  h.query_tokens.assign(key_tokens.end() - queries, key_tokens.end());
  h.key_tokens = std::move(key_tokens);
  h.probs = pattern[head].to(at::kCPU, at::kFloat).contiguous();  // [queries, keys]
  return h;
}

std::vector<std::string> token_labels(const LanguageModel& lm, const std::string& text) {
  std::vector<std::string> labels;
  for (int32_t id : lm.encode(text)) labels.push_back(lm.decode({id}));
  return labels;
}

std::string attention_heatmap_svg(const AttentionHeatmap& h) {
  using display::escape_xml;
  check(h);
  const int64_t rows = h.num_queries(), cols = h.num_keys();
  const std::string title =
      display::truncate_utf8(h.title.empty() ? "attention pattern" : display::visible(h.title), 80);
  // Wide enough for the title too (13 px monospace: under 8 px a character).
  const int64_t width = std::max<int64_t>(kLeft + cols * kCell + kLegendWidth,
                                          kLeft + 8 * static_cast<int64_t>(display::utf8_length(title)) + 8);
  const int64_t height = kTop + rows * kCell + kBottom;
  at::Tensor probs = h.probs.to(at::kDouble).contiguous();
  const double* p = probs.data_ptr<double>();

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << width << " " << height << "\" font-family=\"monospace\" font-size=\"11\">\n";
  s << "<text class=\"title\" x=\"" << kLeft << "\" y=\"20\" font-size=\"13\">" << escape_xml(title) << "</text>\n";
  for (int64_t q = 0; q < rows; ++q) {
    const int64_t y = kTop + q * kCell;
    s << "<text class=\"query\" x=\"" << kLeft - 6 << "\" y=\"" << y + 15
      << "\" text-anchor=\"end\" xml:space=\"preserve\">"
      << escape_xml(label(h.query_tokens[static_cast<size_t>(q)], kLabelChars)) << "</text>\n";
    for (int64_t k = 0; k < cols; ++k) {
      const double v = p[q * cols + k];
      char prob[16];
      std::snprintf(prob, sizeof prob, "%.3f", v);
      s << "<rect class=\"cell\" x=\"" << kLeft + k * kCell << "\" y=\"" << y << "\" width=\"" << kCell
        << "\" height=\"" << kCell << "\" fill=\"" << display::probability_fill(v)
        << "\" stroke=\"#ffffff\" data-query=\"" << q << "\" data-key=\"" << k << "\" data-prob=\"" << prob
        << "\"><title>" << escape_xml(label(h.query_tokens[static_cast<size_t>(q)], kLabelChars)) << " -> "
        << escape_xml(label(h.key_tokens[static_cast<size_t>(k)], kLabelChars)) << " p=" << prob << "</title></rect>\n";
    }
  }
  const int64_t base = kTop + rows * kCell + 10;
  for (int64_t k = 0; k < cols; ++k) {
    const int64_t x = kLeft + k * kCell + kCell / 2;
    s << "<text class=\"key\" x=\"" << x << "\" y=\"" << base << "\" text-anchor=\"end\" xml:space=\"preserve\""
      << " transform=\"rotate(-50 " << x << " " << base << ")\">"
      << escape_xml(label(h.key_tokens[static_cast<size_t>(k)], kLabelChars)) << "</text>\n";
  }
  // Legend: probability 0 (bottom) to 1 (top).
  const int64_t lx = kLeft + cols * kCell + 16;
  const int64_t lh = std::max<int64_t>(rows * kCell, 60);
  s << display::probability_legend(lx, kTop, lh);
  s << "</svg>\n";
  return s.str();
}

nlohmann::json mime_bundle_repr(const AttentionHeatmap& heatmap) {
  check(heatmap);
  return {{"text/plain", text_table(heatmap)}, {"image/svg+xml", attention_heatmap_svg(heatmap)}};
}

}  // namespace nnsight
