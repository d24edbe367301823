// ShmSegment: a POSIX shared-memory object mapped read-write into this
// process. Unmapped when destroyed; unlinking the name is separate (only the
// writer that created it does that).
#pragma once

#include <cstdint>
#include <string>

namespace nnsight::capture {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates `name` exclusively with `bytes` of zeroed memory, reserved up
  // front (posix_fallocate) so a full /dev/shm fails here rather than later
  // with SIGBUS. Returns false when the name exists; throws nnsight::Error on
  // other failures.
  static bool create(const std::string& name, uint64_t bytes, ShmSegment& out);
  // Maps an existing segment whole. Throws nnsight::Error (no such segment,
  // permission, empty).
  static ShmSegment open(const std::string& name);
  // Removes the name (mappings stay valid). Returns false if it did not exist.
  static bool unlink(const std::string& name);

  void* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool valid() const { return data_ != nullptr; }
  // Inode of the object mapped (tells a replacement of the same name apart).
  uint64_t inode() const { return inode_; }
  // Whether `name` still names the object this mapping came from.
  bool still_named() const;

 private:
  void reset();
  std::string name_;
  void* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t inode_ = 0;
};

// Whether process `pid` exists and (when start_ticks != 0) started at that
// time, so a pid reused by an unrelated process reads as dead.
bool process_alive(int64_t pid, uint64_t start_ticks);
// The start time of `pid` in clock ticks since boot (/proc/<pid>/stat), 0 if unknown.
uint64_t process_start_ticks(int64_t pid);

}  // namespace nnsight::capture
