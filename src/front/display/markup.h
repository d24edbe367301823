// Small text helpers shared by the display functions: escaping for HTML/SVG,
// readable token labels, compact numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nnsight::display {

// Escapes &, <, >, " and ' for HTML text and attribute values (also SVG).
std::string escape_xml(const std::string& s);
// A token as a reader should see it: control characters, newlines and tabs
// written as \n, \t, \xHH; bytes that are not valid UTF-8 as \xHH.
std::string visible(const std::string& s);
// At most `max_chars` code points of `s`, with "…" when cut.
std::string truncate_utf8(const std::string& s, size_t max_chars);
// Code points in a UTF-8 string (invalid bytes count one each).
size_t utf8_length(const std::string& s);
// %.4g, with "nan" / "inf" / "-inf".
std::string format_number(double v);
// "[2, 3, 4]".
std::string format_shape(const std::vector<int64_t>& sizes);
// Pads (with spaces on the right) to `width` code points.
std::string pad(const std::string& s, size_t width);
// A probability's fill in the heatmaps: "#rrggbb" from near white (0) to dark
// blue (1), linear in RGB; clamped to [0, 1].
std::string probability_fill(double p);
// An SVG colour bar for probability_fill at (x, top), `height` pixels tall:
// 1 at the top, 0 at the bottom, labelled.
std::string probability_legend(int64_t x, int64_t top, int64_t height);

}  // namespace nnsight::display
