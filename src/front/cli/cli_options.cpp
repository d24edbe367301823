#include "front/cli/cli_options.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace nnsight::cli {
namespace {

std::string range_text(int64_t lo, int64_t hi) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  if (lo == kMin && hi == kMax) return "an integer";
  if (hi == kMax) return "an integer >= " + std::to_string(lo);
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

CLI::Option* add_integer(CLI::App& cmd, const std::string& flag, int64_t& value, const std::string& help, int64_t lo,
                         int64_t hi) {
  CLI::Validator check(
      [lo, hi](std::string& text) -> std::string {
        int64_t v = 0;
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || ptr != end || v < lo || v > hi)
          return "expected " + range_text(lo, hi) + ", got '" + text + "'";
        return "";
      },
      "", "integer");
  return cmd.add_option(flag, value, help)->check(check)->capture_default_str();
}

CLI::Option* add_number(CLI::App& cmd, const std::string& flag, double& value, const std::string& help, double lo,
                        double hi) {
  CLI::Validator check(
      [lo, hi](std::string& text) -> std::string {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        constexpr double kMax = std::numeric_limits<double>::max();
        const std::string range = hi < kMax    ? " in [" + number_text(lo) + ", " + number_text(hi) + "]"
                                  : lo > -kMax ? " >= " + number_text(lo)
                                               : "";
        if (text.empty() || used != text.size() || !std::isfinite(v) || v < lo || v > hi)
          return "expected a finite number" + range + ", got '" + text + "'";
        return "";
      },
      "", "number");
  return cmd.add_option(flag, value, help)->check(check)->capture_default_str();
}

std::string escape_newlines(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\\')
      out += "\\\\";
    else
      out += c;
  }
  return out;
}

}  // namespace nnsight::cli
