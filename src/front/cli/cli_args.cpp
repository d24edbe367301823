#include "front/cli/cli_args.h"

#include <algorithm>
#include <stdexcept>

namespace nnsight::cli {

CliArgs::CliArgs(int argc, char** argv, int first, const std::vector<std::string>& flags) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() < 3) throw std::invalid_argument("unexpected argument '" + a + "'");
    std::string name = a.substr(2), value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
      value = "1";
    } else {
      if (i + 1 >= argc) throw std::invalid_argument("option --" + name + " needs a value");
      value = argv[++i];
    }
    values_[name].push_back(value);
  }
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
  if (pos != v.size() || v.empty()) throw std::invalid_argument("option --" + name + " expects an integer, got '" + v + "'");
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
  if (pos != v.size() || v.empty()) throw std::invalid_argument("option --" + name + " expects a number, got '" + v + "'");
  return out;
}

void CliArgs::check_known(const std::vector<std::string>& known) const {
  for (const auto& [name, v] : values_)
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw std::invalid_argument("unknown option --" + name);
}

std::string escape_newlines(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out;
}

}  // namespace nnsight::cli
