#include "front/cli/cli_args.h"

#include <algorithm>
#include <stdexcept>

#include <CLI/CLI.hpp>

namespace nnsight::cli {

CliArgs::CliArgs(int argc, char** argv, int first, const std::vector<std::string>& flags,
                 const std::vector<std::string>& options) {
  std::vector<std::string> args(argv + first, argv + argc);
  const bool help = std::find(args.begin(), args.end(), "--help") != args.end();
  CLI::App app;
  app.set_help_flag();  // each command prints its own help text
  app.allow_extras();   // reported below, in our words
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, int64_t> counts;
  for (const auto& f : flags) app.add_flag("--" + f, counts[f]);
  for (const auto& o : options) {
    if (std::find(flags.begin(), flags.end(), o) != flags.end()) continue;
    app.add_option("--" + o, values[o])->expected(1)->allow_extra_args(false)->take_all();
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments back to front
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (help) {
      values_["help"] = {"1"};
      return;
    }
    // The one error left with extras allowed: an option without its value.
    std::string name = e.what();
    name = name.substr(0, name.find(':'));
    throw std::invalid_argument("option " + name + " needs a value");
  }
  if (help) {
    values_["help"] = {"1"};
    return;
  }
  for (const auto& extra : app.remaining()) {
    if (extra.rfind("--", 0) == 0 && extra.size() > 2)
      throw std::invalid_argument("unknown option " + extra.substr(0, extra.find('=')));
    throw std::invalid_argument("unexpected argument '" + extra + "'");
  }
  for (auto& [name, v] : values)
    if (!v.empty()) values_[name] = std::move(v);
  for (const auto& [name, n] : counts)
    if (n > 0) values_[name] = {"1"};
}

std::string CliArgs::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> CliArgs::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t CliArgs::get_int(const std::string& name, int64_t fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  size_t pos = 0;
  int64_t out = 0;
  try {
    out = std::stoll(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != v.size() || v.empty())
    throw std::invalid_argument("option --" + name + " expects an integer, got '" + v + "'");
  return out;
}

double CliArgs::get_double(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  size_t pos = 0;
  double out = 0;
  try {
    out = std::stod(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != v.size() || v.empty())
    throw std::invalid_argument("option --" + name + " expects a number, got '" + v + "'");
  return out;
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
