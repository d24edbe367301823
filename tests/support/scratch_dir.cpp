#include "support/scratch_dir.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <ftw.h>
#include <unistd.h>

namespace nnsight {
namespace testing {
namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

}  // namespace

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/nnsight_test_XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = buf.data();
}

ScratchDir::~ScratchDir() { ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

std::string ScratchDir::file(const std::string& name) const { return path_ + "/" + name; }

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_file(const std::string& path, const std::vector<uint8_t>& contents) {
  write_file(path, std::string(contents.begin(), contents.end()));
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string ScratchDir::write(const std::string& name, const std::string& contents) const {
  const std::string p = file(name);
  write_file(p, contents);
  return p;
}

}  // namespace testing
}  // namespace nnsight
