#include "core/available_memory.h"

#include <gtest/gtest.h>

namespace nnsight {
namespace {

TEST(AvailableMemory, ParsesMeminfo) {
  const std::string meminfo =
      "MemTotal:       24542184 kB\nMemFree:        21234567 kB\nMemAvailable:   22000000 kB\nBuffers: 1 kB\n";
  EXPECT_EQ(meminfo_available_bytes(meminfo), std::optional<int64_t>(int64_t(22000000) * 1024));
  EXPECT_EQ(meminfo_available_bytes("MemTotal: 5 kB\n"), std::nullopt);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: lots\n"), std::nullopt);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: 12 MB\n"), std::nullopt);
}

TEST(AvailableMemory, ParsesCgroupLimits) {
  EXPECT_EQ(cgroup_limit_bytes("max\n"), std::nullopt);
  EXPECT_EQ(cgroup_limit_bytes("8589934592\n"), std::optional<int64_t>(int64_t(8589934592)));
  EXPECT_EQ(cgroup_limit_bytes(""), std::nullopt);
  EXPECT_EQ(cgroup_limit_bytes("12abc"), std::nullopt);
  EXPECT_EQ(cgroup_limit_bytes("-1"), std::nullopt);
}

TEST(AvailableMemory, FindsTheProcessCgroups) {
  const CgroupPaths v2 = parse_proc_cgroup("0::/user.slice/session-1.scope\n");
  EXPECT_EQ(v2.unified, std::optional<std::string>("/user.slice/session-1.scope"));
  EXPECT_EQ(v2.memory_v1, std::nullopt);
  const CgroupPaths hybrid = parse_proc_cgroup("9:name=systemd:/\n4:memory:/process_api/c846\n3:cpu,cpuacct:/\n0::/\n");
  EXPECT_EQ(hybrid.unified, std::optional<std::string>("/"));
  EXPECT_EQ(hybrid.memory_v1, std::optional<std::string>("/process_api/c846"));
  EXPECT_EQ(parse_proc_cgroup("5:cpuset,memory:/job\n").memory_v1, std::optional<std::string>("/job"));
  EXPECT_EQ(parse_proc_cgroup("garbage\n").memory_v1, std::nullopt);
}

TEST(AvailableMemory, ThisMachineHasSome) {
  const std::optional<int64_t> avail = available_memory_bytes();
  ASSERT_TRUE(avail.has_value()) << "neither /proc/meminfo nor a cgroup limit could be read";
  EXPECT_GT(*avail, int64_t(64) << 20);
  EXPECT_LT(*avail, int64_t(1) << 50);
}

}  // namespace
}  // namespace nnsight
