// mime_bundle_repr(SavedTensor) and show() (include/nnsight/display.hpp).
#include <nnsight/display.hpp>
#include <nnsight/error.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <sstream>

#include "dsl/dtype.h"
#include "front/display/markup.h"

namespace nnsight {
namespace {

constexpr int64_t kMaxRows = 6;     // rows of the value table
constexpr int64_t kMaxColumns = 8;  // columns of the value table

struct Stats {
  int64_t numel = 0;
  int64_t finite = 0;
  int64_t nan = 0;
  int64_t inf = 0;
  double min = 0, max = 0, mean = 0, std = 0, norm = 0;
};

// Statistics in float64 over the finite elements (bool and integers too).
Stats stats_of(const at::Tensor& t) {
  Stats s;
  at::Tensor x = t.detach().to(at::kCPU).to(at::kDouble).reshape({-1});
  s.numel = x.numel();
  if (s.numel == 0) return s;
  at::Tensor nan = at::isnan(x);
  at::Tensor fin = at::isfinite(x);
  s.nan = nan.sum().item<int64_t>();
  s.finite = fin.sum().item<int64_t>();
  s.inf = s.numel - s.finite - s.nan;
  if (s.finite == 0) return s;
  at::Tensor f = x.masked_select(fin);
  s.min = f.min().item<double>();
  s.max = f.max().item<double>();
  s.mean = f.mean().item<double>();
  s.std = s.finite > 1 ? f.std().item<double>() : 0.0;
  s.norm = f.norm().item<double>();
  return s;
}

// The tensor as a matrix: rows are every dimension but the last.
at::Tensor as_matrix(const at::Tensor& t) {
  at::Tensor x = t.detach().to(at::kCPU);
  if (x.dim() == 0) return x.reshape({1, 1});
  if (x.dim() == 1) return x.reshape({1, -1});
  return x.reshape({-1, x.size(-1)});
}

std::string element(const at::Tensor& m, int64_t r, int64_t c) {
  at::Tensor e = m[r][c];
  if (m.scalar_type() == at::kBool) return e.item<bool>() ? "true" : "false";
  if (at::isIntegralType(m.scalar_type(), /*includeBool=*/false)) return std::to_string(e.item<int64_t>());
  return display::format_number(e.to(at::kDouble).item<double>());
}

// Indices shown along a dimension of n: all, or max entries: the first max-2,
// a gap (-1) and the last.
std::vector<int64_t> shown(int64_t n, int64_t max) {
  std::vector<int64_t> out;
  if (n <= max) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
  } else {
    for (int64_t i = 0; i < max - 2; ++i) out.push_back(i);
    out.push_back(-1);  // the gap
    out.push_back(n - 1);
  }
  return out;
}

std::string header(const SavedTensor& t) {
  std::string s = t.name.empty() ? std::string("tensor") : t.name;
  return s + ": " + dsl::dtype_name(t.value.scalar_type()) + " " + display::format_shape(t.value.sizes().vec()) +
         (t.value.device().is_cpu() ? "" : " on " + t.value.device().str());
}

}  // namespace

SavedTensor show(const TraceResult& result, const Saved& saved) { return SavedTensor{saved.name(), result[saved]}; }

SavedTensor show(const at::Tensor& value, const std::string& name) { return SavedTensor{name, value}; }

nlohmann::json mime_bundle_repr(const SavedTensor& t) {
  using display::escape_xml;
  if (!t.value.defined()) {
    const std::string what = (t.name.empty() ? std::string("tensor") : t.name) + ": None (undefined tensor)";
    return {{"text/plain", what}, {"text/html", "<div class=\"nnsight-tensor\"><b>" + escape_xml(what) + "</b></div>"}};
  }
  const Stats s = stats_of(t.value);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"elements", std::to_string(s.numel)},  {"min", display::format_number(s.min)},
      {"max", display::format_number(s.max)}, {"mean", display::format_number(s.mean)},
      {"std", display::format_number(s.std)}, {"norm", display::format_number(s.norm)}};
  if (s.nan) rows.emplace_back("nan", std::to_string(s.nan));
  if (s.inf) rows.emplace_back("inf", std::to_string(s.inf));
  if (s.finite == 0) rows.resize(1);

  at::Tensor m = as_matrix(t.value);
  const std::vector<int64_t> rs = shown(m.size(0), kMaxRows), cs = shown(m.size(1), kMaxColumns);

  std::ostringstream text, html;
  text << header(t) << "\n";
  for (const auto& [k, v] : rows) text << "  " << display::pad(k, 9) << v << "\n";
  html << "<div class=\"nnsight-tensor\"><b>" << escape_xml(header(t)) << "</b>\n<table>\n";
  for (const auto& [k, v] : rows) html << "<tr><th>" << k << "</th><td>" << v << "</td></tr>\n";
  html << "</table>\n";
  if (m.numel() > 0) {
    text << "values" << (t.value.dim() > 2 ? " (as " + display::format_shape(m.sizes().vec()) + ")" : "") << ":\n";
    html << "<table class=\"nnsight-values\">\n";
    for (int64_t r : rs) {
      text << "  ";
      html << "<tr>";
      for (int64_t c : cs) {
        const std::string v = (r < 0 || c < 0) ? "\u2026" : element(m, r, c);
        text << display::pad(v, 11);
        html << "<td>" << v << "</td>";
      }
      text << "\n";
      html << "</tr>\n";
    }
    html << "</table>\n";
  }
  html << "</div>";
  return {{"text/plain", text.str()}, {"text/html", html.str()}};
}

}  // namespace nnsight
