#include "front/capture/shm_segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include <nnsight/error.hpp>

namespace nnsight::capture {

namespace {
std::string errno_text(int e) { return std::strerror(e); }
}  // namespace

ShmSegment::~ShmSegment() { reset(); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)), data_(other.data_), size_(other.size_), inode_(other.inode_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    inode_ = other.inode_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void ShmSegment::reset() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

bool ShmSegment::create(const std::string& name, uint64_t bytes, ShmSegment& out) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw Error("capture: cannot create shared memory '" + name + "': " + errno_text(errno));
  }
  auto fail = [&](const std::string& what, int e) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw Error("capture: " + what + " for shared memory '" + name + "' (" + std::to_string(bytes) +
                " bytes): " + errno_text(e) + "; lower the capture buffer size or enlarge /dev/shm");
  };
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) fail("ftruncate failed", errno);
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) fail("cannot reserve memory", rc);
  struct stat st;
  if (::fstat(fd, &st) != 0) fail("fstat failed", errno);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw Error("capture: cannot map shared memory '" + name + "': " + errno_text(map_errno));
  }
  out.reset();
  out.name_ = name;
  out.data_ = p;
  out.size_ = bytes;
  out.inode_ = static_cast<uint64_t>(st.st_ino);
  return true;
}

ShmSegment ShmSegment::open(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT)
      throw Error("capture: no shared-memory segment '" + name + "' (is the engine running with capture on?)");
    throw Error("capture: cannot open shared memory '" + name + "': " + errno_text(e));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    throw Error("capture: shared memory '" + name + "' is empty (its writer is starting or crashed)");
  }
  const uint64_t bytes = static_cast<uint64_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw Error("capture: cannot map shared memory '" + name + "': " + errno_text(map_errno));
  ShmSegment s;
  s.name_ = name;
  s.data_ = p;
  s.size_ = bytes;
  s.inode_ = static_cast<uint64_t>(st.st_ino);
  return s;
}

bool ShmSegment::unlink(const std::string& name) { return ::shm_unlink(name.c_str()) == 0; }

bool ShmSegment::still_named() const {
  const int fd = ::shm_open(name_.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  struct stat st;
  const bool same = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) == inode_;
  ::close(fd);
  return same;
}

namespace {
// State (field 3) and start time (field 22) of /proc/<pid>/stat; false if unreadable.
bool read_stat(int64_t pid, char& state, uint64_t& start_ticks) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string line;
  std::getline(in, line);
  // The command name (field 2) may hold spaces and parentheses: fields
  // resume after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return false;
    if (i == 3) state = field.empty() ? '?' : field[0];
  }
  try {
    start_ticks = std::stoull(field);
  } catch (...) {
    return false;
  }
  return true;
}
}  // namespace

uint64_t process_start_ticks(int64_t pid) {
  char state = 0;
  uint64_t ticks = 0;
  return read_stat(pid, state, ticks) ? ticks : 0;
}

bool process_alive(int64_t pid, uint64_t start_ticks) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  char state = 0;
  uint64_t ticks = 0;
  if (!read_stat(pid, state, ticks)) return true;  // no /proc: trust kill()
  if (state == 'Z' || state == 'X') return false;  // killed, not yet reaped
  return start_ticks == 0 || ticks == start_ticks;
}

}  // namespace nnsight::capture
