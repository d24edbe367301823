#include "core/available_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace nnsight {

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<int64_t> read_number(const std::string& path) {
  const auto text = read_text(path);
  return text ? cgroup_limit_bytes(*text) : std::nullopt;
}

// What the cgroup still allows: limit - usage (0 when over), nullopt without a limit.
std::optional<int64_t> cgroup_headroom() {
  const auto text = read_text("/proc/self/cgroup");
  const CgroupPaths paths = text ? parse_proc_cgroup(*text) : CgroupPaths{};
  std::optional<int64_t> limit, usage;
  if (paths.unified) {
    limit = read_number("/sys/fs/cgroup" + *paths.unified + "/memory.max");
    usage = read_number("/sys/fs/cgroup" + *paths.unified + "/memory.current");
  }
  if (!limit) {
    // v1 (or a hybrid system, whose memory controller is v1): the process's
    // own group, else the hierarchy's root (a container's view of itself).
    for (const std::string& dir :
         {"/sys/fs/cgroup/memory" + paths.memory_v1.value_or("/"), std::string("/sys/fs/cgroup/memory")}) {
      limit = read_number(dir + "/memory.limit_in_bytes");
      usage = read_number(dir + "/memory.usage_in_bytes");
      // v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages).
      if (limit && *limit >= (int64_t(1) << 60)) limit.reset();
      if (limit) break;
    }
  }
  if (!limit) return std::nullopt;
  return std::max<int64_t>(0, *limit - usage.value_or(0));
}

}  // namespace

std::optional<int64_t> meminfo_available_bytes(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = -1;
    std::string unit;
    fields >> kib >> unit;
    if (!fields.fail() && kib >= 0 && unit == "kB") return kib * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

CgroupPaths parse_proc_cgroup(const std::string& text) {
  CgroupPaths out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controller-list:path
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      out.unified = path;
      continue;
    }
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") out.memory_v1 = path;
  }
  return out;
}

std::optional<int64_t> cgroup_limit_bytes(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  in >> word;
  if (word.empty() || word == "max") return std::nullopt;
  try {
    size_t used = 0;
    const long long v = std::stoll(word, &used);
    if (used != word.size() || v < 0) return std::nullopt;
    return static_cast<int64_t>(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<int64_t> available_memory_bytes() {
  std::optional<int64_t> avail;
  if (const auto meminfo = read_text("/proc/meminfo")) avail = meminfo_available_bytes(*meminfo);
  if (const auto headroom = cgroup_headroom()) avail = avail ? std::min(*avail, *headroom) : *headroom;
  return avail;
}

}  // namespace nnsight
