#include "support/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace nnsight::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "nnsight_test_XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& contents) const {
  const std::string p = file(name);
  std::ofstream out(p, std::ios::binary);
  out << contents;
  if (!out) throw std::runtime_error("cannot write " + p);
  return p;
}

}  // namespace nnsight::testing
