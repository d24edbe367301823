// TempDir: a fresh directory under the system temp folder, removed (with its
// contents) when the object goes out of scope.
#pragma once

#include <string>

namespace nnsight::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `contents` to file(name) and returns that path.
  std::string write(const std::string& name, const std::string& contents) const;

 private:
  std::string path_;
};

}  // namespace nnsight::testing
