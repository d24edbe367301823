// mime_bundle_repr(TraceResult) (include/nnsight/display.hpp).
#include <nnsight/display.hpp>

#include <sstream>

#include "dsl/dtype.h"
#include "front/display/markup.h"

namespace nnsight {
namespace {

constexpr size_t kMaxTextChars = 120;  // prompt / generated text shown per invoke

std::string describe(const at::Tensor& t) {
  if (!t.defined()) return "None";
  return dsl::dtype_name(t.scalar_type()) + " " + display::format_shape(t.sizes().vec());
}

std::string describe(const SavedValue& v) {
  if (!v.is_list) return describe(v.tensor);
  std::string s = "list of " + std::to_string(v.list.size());
  if (!v.list.empty()) s += ": " + describe(v.list.front()) + (v.list.size() > 1 ? ", ..." : "");
  return s;
}

std::string shown_text(const std::string& s) { return display::truncate_utf8(display::visible(s), kMaxTextChars); }

}  // namespace

nlohmann::json mime_bundle_repr(const TraceResult& result) {
  using display::escape_xml;
  std::ostringstream text, html;
  const auto& outs = result.outputs();
  text << "TraceResult: " << outs.size() << (outs.size() == 1 ? " invoke" : " invokes") << ", " << result.saves().size()
       << (result.saves().size() == 1 ? " save" : " saves") << "\n";
  html << "<div class=\"nnsight-trace\">\n<table>\n<tr><th>invoke</th><th>prompt</th><th>generated</th>"
          "<th>tokens</th><th>finish</th></tr>\n";
  for (size_t i = 0; i < outs.size(); ++i) {
    const RequestOutput& o = outs[i];
    const std::string finish = o.error.empty() ? to_string(o.finish_reason) : "error: " + o.error;
    text << "  [" << i << "] \"" << shown_text(o.prompt) << "\" -> \"" << shown_text(o.text) << "\" ("
         << o.token_ids.size() << " tokens, " << finish << ")\n";
    html << "<tr><td>" << i << "</td><td>" << escape_xml(shown_text(o.prompt)) << "</td><td><b>"
         << escape_xml(shown_text(o.text)) << "</b></td><td>" << o.token_ids.size() << "</td><td>" << escape_xml(finish)
         << "</td></tr>\n";
  }
  html << "</table>\n";
  if (!result.saves().empty()) {
    text << "saves:\n";
    html << "<table>\n<tr><th>save</th><th>value</th></tr>\n";
    for (const auto& [name, v] : result.saves()) {
      text << "  " << name << ": " << describe(v) << "\n";
      html << "<tr><td>" << escape_xml(name) << "</td><td>" << escape_xml(describe(v)) << "</td></tr>\n";
    }
    html << "</table>\n";
  }
  html << "</div>";
  return {{"text/plain", text.str()}, {"text/html", html.str()}};
}

}  // namespace nnsight
