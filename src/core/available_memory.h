// How much more memory this process can take before the kernel (or its
// container's memory limit) refuses or kills it: what memory that is
// allocated lazily (the KV cache, lazy_zeros.h) is checked against up front,
// so that a budget the machine cannot hold is an error at startup, not an
// out-of-memory kill when the cache fills hours later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace nnsight {

// The smaller of MemAvailable (/proc/meminfo) and what the process's cgroup
// still allows (v2 memory.max - memory.current, or v1's limit - usage);
// nullopt where neither can be read (not Linux).
std::optional<int64_t> available_memory_bytes();

// Parsers for the files above (tests feed them text).
std::optional<int64_t> meminfo_available_bytes(const std::string& meminfo);
// "max" (no limit) -> nullopt.
std::optional<int64_t> cgroup_limit_bytes(const std::string& text);

// The process's groups from /proc/self/cgroup: the unified (v2) one, and
// the v1 hierarchy's that holds the memory controller.
struct CgroupPaths {
  std::optional<std::string> unified;    // "0::/path"
  std::optional<std::string> memory_v1;  // "N:...memory...:/path"
};
CgroupPaths parse_proc_cgroup(const std::string& text);

}  // namespace nnsight
