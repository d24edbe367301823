#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nnsight/error.hpp>

namespace nnsight {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw LoadError(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw LoadError(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw LoadError(path + ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw LoadError(path + ": cannot mmap " + std::to_string(size_) + " bytes: " + std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
    mapped_ = true;
  }
  // The mapping keeps the file alive; the descriptor is no longer needed.
  ::close(fd);
}

MappedFile::MappedFile(std::string name, std::string bytes) : path_(std::move(name)), owned_(std::move(bytes)) {
  data_ = owned_.empty() ? nullptr : reinterpret_cast<const uint8_t*>(owned_.data());
  size_ = owned_.size();
}

MappedFile::~MappedFile() {
  if (mapped_ && data_ != nullptr) {
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
}

}  // namespace nnsight
