// mime_bundle_repr(LogitLens) and logit_lens_svg (include/nnsight/display.hpp):
// the heatmap is written by hand as SVG, one rect and one label per cell.
#include <nnsight/display.hpp>
#include <nnsight/error.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "front/display/markup.h"

namespace nnsight {
namespace {

constexpr int kCellWidth = 76;
constexpr int kCellHeight = 20;
constexpr int kLeft = 64;           // room for the layer labels
constexpr int kTop = 34;            // room for the title
constexpr int kBottom = 90;         // room for the rotated input tokens
constexpr int kLegendWidth = 70;    // colour bar and its labels
constexpr size_t kCellChars = 9;    // characters of a token shown in a cell
constexpr size_t kTextColumn = 14;  // width of a column of the text table

std::string quoted(const std::string& token) { return "\"" + display::visible(token) + "\""; }

void check_shape(const LogitLens& lens) {
  const size_t cells = static_cast<size_t>(lens.num_layers() * lens.num_positions());
  if (lens.top_tokens.size() != cells || lens.input_tokens.size() != lens.positions.size() ||
      !lens.top_probs.defined() || static_cast<size_t>(lens.top_probs.numel()) != cells)
    throw Error("LogitLens: inconsistent result (" + std::to_string(lens.num_layers()) + " layers, " +
                std::to_string(lens.num_positions()) + " positions, " + std::to_string(lens.top_tokens.size()) +
                " tokens)");
}

std::string text_table(const LogitLens& lens) {
  std::ostringstream out;
  out << "logit lens: \"" << display::visible(lens.prompt) << "\" (" << lens.num_layers() << " layers x "
      << lens.num_positions() << " positions; top token, probability)\n";
  out << display::pad("layer", 7);
  for (const auto& t : lens.input_tokens)
    out << display::pad(display::truncate_utf8(quoted(t), kTextColumn - 1), kTextColumn);
  out << "\n";
  at::Tensor probs = lens.top_probs.to(at::kDouble).contiguous();
  const double* p = probs.data_ptr<double>();
  for (int64_t r = 0; r < lens.num_layers(); ++r) {
    out << display::pad(std::to_string(lens.layers[static_cast<size_t>(r)]), 7);
    for (int64_t c = 0; c < lens.num_positions(); ++c) {
      const size_t i = static_cast<size_t>(r * lens.num_positions() + c);
      char prob[16];
      std::snprintf(prob, sizeof prob, " %.2f", p[i]);
      out << display::pad(display::truncate_utf8(quoted(lens.top_tokens[i]), kTextColumn - 6) + prob, kTextColumn);
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace

std::string logit_lens_svg(const LogitLens& lens) {
  using display::escape_xml;
  check_shape(lens);
  const int64_t rows = lens.num_layers(), cols = lens.num_positions();
  const int64_t width = kLeft + cols * kCellWidth + kLegendWidth;
  const int64_t height = kTop + rows * kCellHeight + kBottom;
  at::Tensor probs = lens.top_probs.to(at::kDouble).contiguous();
  const double* p = probs.data_ptr<double>();

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << width << " " << height << "\" font-family=\"monospace\" font-size=\"11\">\n";
  s << "<text class=\"title\" x=\"" << kLeft << "\" y=\"20\" font-size=\"13\">logit lens: "
    << escape_xml(display::truncate_utf8(display::visible(lens.prompt), 80)) << "</text>\n";
  // Rows: one label per layer, one rect + token per cell.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t y = kTop + r * kCellHeight;
    s << "<text class=\"layer\" x=\"" << kLeft - 6 << "\" y=\"" << y + 14 << "\" text-anchor=\"end\">"
      << lens.layers[static_cast<size_t>(r)] << "</text>\n";
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      const int64_t x = kLeft + c * kCellWidth;
      const std::string token = display::visible(lens.top_tokens[i]);
      char prob[16];
      std::snprintf(prob, sizeof prob, "%.3f", p[i]);
      s << "<rect class=\"cell\" x=\"" << x << "\" y=\"" << y << "\" width=\"" << kCellWidth << "\" height=\""
        << kCellHeight << "\" fill=\"" << display::probability_fill(p[i]) << "\" stroke=\"#ffffff\" data-layer=\""
        << lens.layers[static_cast<size_t>(r)] << "\" data-position=\"" << lens.positions[static_cast<size_t>(c)]
        << "\" data-prob=\"" << prob << "\"><title>layer " << lens.layers[static_cast<size_t>(r)] << ", position "
        << lens.positions[static_cast<size_t>(c)] << ": " << escape_xml(quoted(lens.top_tokens[i])) << " p=" << prob
        << "</title></rect>\n";
      s << "<text class=\"token\" x=\"" << x + kCellWidth / 2 << "\" y=\"" << y + 14
        << "\" text-anchor=\"middle\" xml:space=\"preserve\" fill=\"" << (p[i] > 0.5 ? "#ffffff" : "#000000") << "\">"
        << escape_xml(display::truncate_utf8(token, kCellChars)) << "</text>\n";
    }
  }
  // Columns: the input token at each position, rotated.
  const int64_t base = kTop + rows * kCellHeight + 10;
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t x = kLeft + c * kCellWidth + kCellWidth / 2;
    s << "<text class=\"input\" x=\"" << x << "\" y=\"" << base << "\" text-anchor=\"end\" xml:space=\"preserve\""
      << " transform=\"rotate(-40 " << x << " " << base << ")\">"
      << escape_xml(display::truncate_utf8(display::visible(lens.input_tokens[static_cast<size_t>(c)]), 14))
      << "</text>\n";
  }
  s << "<text x=\"8\" y=\"" << kTop - 6 << "\">layer</text>\n";
  // Legend: probability 0 (bottom) to 1 (top).
  const int64_t lx = kLeft + cols * kCellWidth + 16;
  const int64_t lh = std::max<int64_t>(rows * kCellHeight, 60);
  s << display::probability_legend(lx, kTop, lh);
  s << "<text x=\"" << lx << "\" y=\"" << kTop + lh + 16 << "\">p(top)</text>\n";
  s << "</svg>\n";
  return s.str();
}

nlohmann::json mime_bundle_repr(const LogitLens& lens) {
  check_shape(lens);
  return {{"text/plain", text_table(lens)}, {"image/svg+xml", logit_lens_svg(lens)}};
}

}  // namespace nnsight
