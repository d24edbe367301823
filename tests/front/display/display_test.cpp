// Rich display bundles (include/nnsight/display.hpp), checked on values built
// by hand: the MIME types xeus-cling looks for, the numbers against values
// computed here, escaping of hostile text, and a well-formed SVG heatmap.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nnsight/display.hpp>
#include <nnsight/error.hpp>

#include "front/display/markup.h"

namespace nnsight {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// A minimal XML well-formedness check: tags nest and close in order, and no
// raw '<' or '&' appears in text. Enough to catch unescaped tokens.
bool well_formed_xml(const std::string& x, std::string* why) {
  std::vector<std::string> stack;
  for (size_t i = 0; i < x.size();) {
    if (x[i] == '&') {
      const size_t semi = x.find(';', i);
      const std::string ent = semi == std::string::npos ? "" : x.substr(i, semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&#39;") {
        *why = "bad entity at " + std::to_string(i);
        return false;
      }
      i = semi + 1;
      continue;
    }
    if (x[i] != '<') {
      ++i;
      continue;
    }
    const size_t end = x.find('>', i);
    if (end == std::string::npos) {
      *why = "unclosed tag at " + std::to_string(i);
      return false;
    }
    std::string tag = x.substr(i + 1, end - i - 1);
    // Quoted attribute values must not hold '<' (checked by the tag scan) or '>'.
    if (count(tag, "\"") % 2 != 0) {
      *why = "odd quotes in <" + tag + ">";
      return false;
    }
    const bool closing = !tag.empty() && tag[0] == '/';
    const bool self = !tag.empty() && tag.back() == '/';
    std::string name = tag.substr(closing ? 1 : 0);
    name = name.substr(0, name.find_first_of(" /\n"));
    if (closing) {
      if (stack.empty() || stack.back() != name) {
        *why = "</" + name + "> closes " + (stack.empty() ? std::string("nothing") : stack.back());
        return false;
      }
      stack.pop_back();
    } else if (!self) {
      stack.push_back(name);
    }
    i = end + 1;
  }
  if (!stack.empty()) *why = "unclosed <" + stack.back() + ">";
  return stack.empty();
}

TEST(Display, SavedTensorStatisticsAndValues) {
  at::Tensor t = at::arange(24, at::kFloat).reshape({2, 3, 4}) - 5;  // [2, 3, 4]
  nlohmann::json b = mime_bundle_repr(show(t, "h"));
  ASSERT_TRUE(b.contains("text/plain"));
  ASSERT_TRUE(b.contains("text/html"));
  const std::string text = b["text/plain"];
  EXPECT_EQ(text.rfind("h: float32 [2, 3, 4]\n", 0), 0u) << text;
  // Reference statistics: values -5..18.
  std::vector<double> v;
  for (int i = 0; i < 24; ++i) v.push_back(i - 5);
  double mean = 0, sq = 0;
  for (double x : v) mean += x / 24;
  for (double x : v) sq += (x - mean) * (x - mean);
  const double stddev = std::sqrt(sq / 23), norm = std::sqrt([&] {
                                              double s = 0;
                                              for (double x : v) s += x * x;
                                              return s;
                                            }());
  EXPECT_NE(text.find("min      -5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("max      18\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mean     " + display::format_number(mean) + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("std      " + display::format_number(stddev) + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("norm     " + display::format_number(norm) + "\n"), std::string::npos) << text;
  // As a matrix [6, 4]: all rows and columns fit; the first row is -5 -4 -3 -2.
  EXPECT_NE(text.find("values (as [6, 4]):\n  -5         -4         -3         -2"), std::string::npos) << text;
  const std::string html = b["text/html"];
  EXPECT_EQ(count(html, "<tr><td>"), 6u);
  std::string why;
  EXPECT_TRUE(well_formed_xml(html, &why)) << why;
}

TEST(Display, LargeTensorsAreCutWithAnEllipsis) {
  at::Tensor t = at::zeros({100, 50}, at::kFloat);
  t[99][49] = 7;
  const std::string text = mime_bundle_repr(show(t))["text/plain"];
  EXPECT_EQ(text.rfind("tensor: float32 [100, 50]\n", 0), 0u) << text;
  // 6 rows shown: 4 leading, a gap, the last; 8 columns: 6 leading, a gap, the last.
  EXPECT_NE(text.find("\u2026"), std::string::npos);
  EXPECT_NE(text.find("7" + std::string(10, ' ') + "\n"), std::string::npos) << text;  // the last element
  const std::string html = mime_bundle_repr(show(t))["text/html"];
  EXPECT_EQ(count(html, "<tr><td>"), 6u);
  EXPECT_EQ(count(html, "<td>"), 6u * 8u + 6u);  // the values, and the six statistics rows
}

TEST(Display, NonFiniteIntegerBoolAndUndefinedTensors) {
  at::Tensor f = at::tensor({1.0f, NAN, INFINITY, 3.0f});
  const std::string text = mime_bundle_repr(show(f, "x"))["text/plain"];
  EXPECT_NE(text.find("nan      1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("inf      1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("max      3\n"), std::string::npos) << text;  // over finite elements
  const std::string ints = mime_bundle_repr(show(at::tensor({int64_t{7}, int64_t{-2}})))["text/plain"];
  EXPECT_NE(ints.find("int64 [2]"), std::string::npos);
  EXPECT_NE(ints.find("  7          -2"), std::string::npos) << ints;
  const std::string bools = mime_bundle_repr(show(at::tensor({1, 0}).to(at::kBool)))["text/plain"];
  EXPECT_NE(bools.find("true       false"), std::string::npos) << bools;
  const std::string scalar = mime_bundle_repr(show(at::scalar_tensor(2.5, at::kDouble)))["text/plain"];
  EXPECT_NE(scalar.find("float64 []"), std::string::npos) << scalar;
  const std::string none = mime_bundle_repr(show(at::Tensor(), "gone"))["text/plain"];
  EXPECT_EQ(none, "gone: None (undefined tensor)");
}

TEST(Display, TraceResultListsInvokesAndSaves) {
  RequestOutput a, b;
  a.prompt = "The <b>Eiffel</b> Tower";
  a.text = " Paris\nand";
  a.token_ids = {7042, 284};
  a.finish_reason = FinishReason::kLength;
  b.prompt = "x";
  b.error = "node 3 failed";
  b.finish_reason = FinishReason::kError;
  std::map<std::string, SavedValue> saves;
  saves["logits"] = SavedValue(at::zeros({1, 49152}));
  saves["steps"] = SavedValue::of_list({at::zeros({3}), at::zeros({1})});
  TraceResult r({a, b}, saves);
  nlohmann::json bundle = mime_bundle_repr(r);
  const std::string text = bundle["text/plain"];
  EXPECT_EQ(text.rfind("TraceResult: 2 invokes, 2 saves\n", 0), 0u) << text;
  EXPECT_NE(text.find("[0] \"The <b>Eiffel</b> Tower\" -> \" Paris\\nand\" (2 tokens, length)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("(0 tokens, error: node 3 failed)"), std::string::npos) << text;
  EXPECT_NE(text.find("logits: float32 [1, 49152]"), std::string::npos) << text;
  EXPECT_NE(text.find("steps: list of 2: float32 [3], ..."), std::string::npos) << text;
  const std::string html = bundle["text/html"];
  EXPECT_NE(html.find("The &lt;b&gt;Eiffel&lt;/b&gt; Tower"), std::string::npos) << html;
  std::string why;
  EXPECT_TRUE(well_formed_xml(html, &why)) << why;
}

LogitLens hand_made_lens() {
  LogitLens lens;
  lens.prompt = "a <b> & \"c\"";
  lens.prompt_token_ids = {1, 2, 3};
  lens.layers = {0, 5};
  lens.positions = {0, 1, 2};
  lens.input_tokens = {"a", " <b>", " &\n"};
  lens.top_ids = at::tensor({10, 11, 12, 13, 14, 15}, at::kLong).reshape({2, 3});
  lens.top_probs = at::tensor({0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 0.6f}).reshape({2, 3});
  lens.top_tokens = {"x", "</svg>", "&amp;", " Paris", "\x01", "\xff"};
  return lens;
}

TEST(Display, LogitLensIsAWellFormedSvgHeatmap) {
  const LogitLens lens = hand_made_lens();
  nlohmann::json b = mime_bundle_repr(lens);
  ASSERT_TRUE(b.contains("image/svg+xml"));
  ASSERT_TRUE(b.contains("text/plain"));
  const std::string svg = b["image/svg+xml"];
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  std::string why;
  EXPECT_TRUE(well_formed_xml(svg, &why)) << why;
  EXPECT_EQ(count(svg, "<rect class=\"cell\""), 6u);
  // Hostile tokens are escaped or made visible, never raw.
  EXPECT_NE(svg.find("&lt;/svg&gt;"), std::string::npos);
  EXPECT_NE(svg.find("&amp;amp;"), std::string::npos);
  EXPECT_NE(svg.find("\\x01"), std::string::npos);
  EXPECT_NE(svg.find("\\xFF"), std::string::npos);
  EXPECT_EQ(count(svg, "</svg>"), 1u);
  // Fills darken with the probability: cell (0,0) p=0 is the light end, (1,1) p=1 the dark end.
  std::regex cell(
      "<rect class=\"cell\"[^>]*fill=\"(#[0-9a-f]{6})\"[^>]*data-layer=\"(\\d+)\" data-position=\"(\\d+)\" "
      "data-prob=\"([0-9.]+)\"");
  std::map<std::pair<int, int>, std::pair<std::string, double>> cells;
  for (std::sregex_iterator it(svg.begin(), svg.end(), cell), end; it != end; ++it)
    cells[{std::stoi((*it)[2]), std::stoi((*it)[3])}] = {(*it)[1], std::stod((*it)[4])};
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ((cells[{0, 0}].first), "#f7fbff");
  EXPECT_EQ((cells[{5, 1}].first), "#08306b");
  EXPECT_DOUBLE_EQ((cells[{5, 0}].second), 0.75);
  auto blue = [](const std::string& hex) { return std::stoi(hex.substr(5, 2), nullptr, 16); };
  EXPECT_GT((blue(cells[{0, 1}].first)), (blue(cells[{0, 2}].first)));
  // The text table: a row per layer, quoted tokens with probabilities.
  const std::string text = b["text/plain"];
  EXPECT_NE(text.find("(2 layers x 3 positions"), std::string::npos) << text;
  EXPECT_NE(text.find("5      \" Paris\" 0.75"), std::string::npos) << text;
}

TEST(Display, InconsistentLensIsAnError) {
  LogitLens lens = hand_made_lens();
  lens.top_tokens.pop_back();
  EXPECT_THROW(mime_bundle_repr(lens), Error);
  EXPECT_THROW(logit_lens_svg(lens), Error);
}

TEST(Display, AttentionHeatmapIsAWellFormedSvgOfOneHead) {
  // [2 heads, 2 queries, 3 keys]: the queries are the last two keys (a causal pattern).
  at::Tensor pattern = at::tensor({1.0f, 0.0f, 0.0f, 0.5f, 0.5f, 0.0f,     // head 0
                                   0.0f, 1.0f, 0.0f, 0.25f, 0.0f, 0.75f})  // head 1
                           .reshape({2, 2, 3});
  const AttentionHeatmap h = attention_heatmap(pattern, -1, {"<s>", " </svg>", " &x"}, "layer 3 head 1");
  EXPECT_EQ(h.num_queries(), 2);
  EXPECT_EQ(h.num_keys(), 3);
  EXPECT_EQ(h.query_tokens, (std::vector<std::string>{" </svg>", " &x"}));
  EXPECT_TRUE(at::equal(h.probs, pattern[1]));
  nlohmann::json b = mime_bundle_repr(h);
  const std::string svg = b["image/svg+xml"];
  std::string why;
  EXPECT_TRUE(well_formed_xml(svg, &why)) << why;
  EXPECT_EQ(count(svg, "<rect class=\"cell\""), 6u);
  EXPECT_EQ(count(svg, "</svg>"), 1u);
  EXPECT_NE(svg.find("&lt;/svg&gt;"), std::string::npos);
  EXPECT_NE(svg.find("layer 3 head 1"), std::string::npos);
  std::regex cell(
      "<rect class=\"cell\"[^>]*fill=\"(#[0-9a-f]{6})\"[^>]*data-query=\"(\\d+)\" data-key=\"(\\d+)\" "
      "data-prob=\"([0-9.]+)\"");
  std::map<std::pair<int, int>, std::pair<std::string, double>> cells;
  for (std::sregex_iterator it(svg.begin(), svg.end(), cell), end; it != end; ++it)
    cells[{std::stoi((*it)[2]), std::stoi((*it)[3])}] = {(*it)[1], std::stod((*it)[4])};
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ((cells[{0, 1}].first), "#08306b");  // p = 1
  EXPECT_EQ((cells[{0, 0}].first), "#f7fbff");  // p = 0
  EXPECT_DOUBLE_EQ((cells[{1, 2}].second), 0.75);
  EXPECT_DOUBLE_EQ((cells[{1, 0}].second), 0.25);
  const std::string text = b["text/plain"];
  EXPECT_NE(text.find("(2 queries x 3 keys"), std::string::npos) << text;
  EXPECT_NE(text.find("0.250   0.000   0.750"), std::string::npos) << text;
}

TEST(Display, AttentionHeatmapRefusesWhatIsNotAPattern) {
  at::Tensor pattern = at::zeros({4, 2, 3});
  EXPECT_THROW(attention_heatmap(at::zeros({2, 3}), 0, {"a", "b", "c"}), Error);
  EXPECT_THROW(attention_heatmap(pattern, 4, {"a", "b", "c"}), Error);
  EXPECT_THROW(attention_heatmap(pattern, -5, {"a", "b", "c"}), Error);
  EXPECT_THROW(attention_heatmap(pattern, 0, {"a", "b"}), Error);
  EXPECT_THROW(attention_heatmap(at::zeros({1, 3, 2}), 0, {"a", "b"}), Error);
  try {
    attention_heatmap(pattern, 0, {"a"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 key labels for 3 keys"), std::string::npos) << e.what();
  }
}

TEST(Display, MarkupHelpers) {
  EXPECT_EQ(display::escape_xml("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(display::visible("a\nb\tc\x01\xc3\xa9\xe2"), "a\\nb\\tc\\x01\xc3\xa9\\xE2");
  EXPECT_EQ(display::utf8_length("\xc3\xa9t\xe2\x80\xa6"), 3u);
  EXPECT_EQ(display::truncate_utf8("abcdef", 4), "abc\u2026");
  EXPECT_EQ(display::truncate_utf8("abc", 3), "abc");
  EXPECT_EQ(display::format_number(NAN), "nan");
  EXPECT_EQ(display::format_number(-INFINITY), "-inf");
  EXPECT_EQ(display::format_number(0.000123456), "0.0001235");
  EXPECT_EQ(display::format_shape({}), "[]");
  EXPECT_EQ(display::pad("\xc3\xa9", 3), "\xc3\xa9  ");
}

}  // namespace
}  // namespace nnsight
