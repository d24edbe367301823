// ScratchDir: a fresh directory under $TMPDIR (or /tmp) for files a test
// writes, removed with its contents when the object goes away.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight {
namespace testing {

class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name
  std::string file(const std::string& name) const;
  // Writes `contents` to file(name) and returns that path.
  std::string write(const std::string& name, const std::string& contents) const;

 private:
  std::string path_;
};

// Whole-file helpers for tests.
void write_file(const std::string& path, const std::string& contents);
void write_file(const std::string& path, const std::vector<uint8_t>& contents);
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace testing
}  // namespace nnsight
