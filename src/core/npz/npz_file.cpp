#include "core/npz/npz_file.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include <nnsight/error.hpp>

namespace nnsight {

namespace {

// Zip's little-endian fields, bounds-checked against the mapped bytes.
class Bytes {
 public:
  Bytes(const MappedFile& f) : f_(f) {}
  uint64_t u(uint64_t at, int width, const char* what) const {
    if (at > f_.size() || static_cast<uint64_t>(width) > f_.size() - at)
      throw LoadError(f_.path() + ": truncated (" + what + " lies past the end of the file)");
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | f_.data()[at + i];
    return v;
  }
  std::string str(uint64_t at, uint64_t n, const char* what) const {
    if (at > f_.size() || n > f_.size() - at)
      throw LoadError(f_.path() + ": truncated (" + what + " lies past the end of the file)");
    return std::string(reinterpret_cast<const char*>(f_.data() + at), n);
  }

 private:
  const MappedFile& f_;
};

constexpr uint32_t kEocd = 0x06054b50, kEocd64Locator = 0x07064b50, kEocd64 = 0x06064b50;
constexpr uint32_t kCentral = 0x02014b50, kLocal = 0x04034b50;

// A value of the .npy header's Python dict literal: {'descr': '<f4', ...}.
std::string header_value(const std::string& header, const std::string& key, const std::string& where) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) throw LoadError(where + ": the .npy header has no '" + key + "'");
  const size_t colon = header.find(':', k);
  if (colon == std::string::npos) throw LoadError(where + ": malformed .npy header");
  size_t b = header.find_first_not_of(' ', colon + 1);
  if (b == std::string::npos) throw LoadError(where + ": malformed .npy header");
  size_t e;
  if (header[b] == '\'') {
    e = header.find('\'', b + 1);
    if (e == std::string::npos) throw LoadError(where + ": malformed .npy header");
    return header.substr(b + 1, e - b - 1);
  }
  if (header[b] == '(') {
    e = header.find(')', b);
    if (e == std::string::npos) throw LoadError(where + ": malformed .npy header");
    return header.substr(b, e - b + 1);
  }
  e = header.find_first_of(",}", b);
  if (e == std::string::npos) throw LoadError(where + ": malformed .npy header");
  return header.substr(b, e - b);
}

std::vector<int64_t> parse_shape(const std::string& tuple, const std::string& where) {
  std::vector<int64_t> shape;
  size_t i = 1;  // after '('
  while (i < tuple.size()) {
    while (i < tuple.size() && (tuple[i] == ' ' || tuple[i] == ',')) ++i;
    if (i >= tuple.size() || tuple[i] == ')') break;
    size_t end = i;
    while (end < tuple.size() && tuple[end] >= '0' && tuple[end] <= '9') ++end;
    if (end == i || end - i > 15) throw LoadError(where + ": the .npy shape " + tuple + " is not a tuple of sizes");
    shape.push_back(std::stoll(tuple.substr(i, end - i)));
    i = end;
  }
  return shape;
}

int64_t element_size(const std::string& descr) {
  if (descr == "<f2") return 2;
  if (descr == "<f4") return 4;
  if (descr == "<f8") return 8;
  return 0;
}

}  // namespace

NpzFile::NpzFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
  const MappedFile& f = *file_;
  const Bytes b(f);
  // The end-of-central-directory record: the last 22 bytes, or before a comment of up to 64 KiB.
  if (f.size() < 22) throw LoadError(path + ": not a .npz archive (too short for a zip file)");
  uint64_t eocd = std::numeric_limits<uint64_t>::max();
  for (uint64_t at = f.size() - 22;; --at) {
    if (b.u(at, 4, "the zip directory") == kEocd) {
      eocd = at;
      break;
    }
    if (at == 0 || f.size() - at > 22 + 65535) break;
  }
  if (eocd == std::numeric_limits<uint64_t>::max())
    throw LoadError(path + ": not a .npz archive (no zip end-of-directory record)");
  uint64_t entries = b.u(eocd + 10, 2, "the zip directory");
  uint64_t dir_offset = b.u(eocd + 16, 4, "the zip directory");
  if ((entries == 0xFFFF || dir_offset == 0xFFFFFFFF) && eocd >= 20 &&
      b.u(eocd - 20, 4, "the zip64 locator") == kEocd64Locator) {
    const uint64_t eocd64 = b.u(eocd - 20 + 8, 8, "the zip64 locator");
    if (b.u(eocd64, 4, "the zip64 directory") != kEocd64) throw LoadError(path + ": bad zip64 end-of-directory record");
    entries = b.u(eocd64 + 32, 8, "the zip64 directory");
    dir_offset = b.u(eocd64 + 48, 8, "the zip64 directory");
  }
  uint64_t at = dir_offset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (b.u(at, 4, "a zip directory entry") != kCentral) throw LoadError(path + ": bad zip directory entry");
    const uint64_t method = b.u(at + 10, 2, "a zip directory entry");
    uint64_t csize = b.u(at + 20, 4, "a zip directory entry");
    uint64_t usize = b.u(at + 24, 4, "a zip directory entry");
    const uint64_t name_len = b.u(at + 28, 2, "a zip directory entry");
    const uint64_t extra_len = b.u(at + 30, 2, "a zip directory entry");
    const uint64_t comment_len = b.u(at + 32, 2, "a zip directory entry");
    uint64_t local = b.u(at + 42, 4, "a zip directory entry");
    const std::string name = b.str(at + 46, name_len, "a zip entry's name");
    // zip64: the sizes and offset that do not fit in 32 bits follow in extra field 0x0001, in this order.
    for (uint64_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const uint64_t id = b.u(x, 2, "a zip extra field"), len = b.u(x + 2, 2, "a zip extra field");
      if (id == 0x0001) {
        uint64_t y = x + 4;
        if (usize == 0xFFFFFFFF) usize = b.u(y, 8, "a zip64 field"), y += 8;
        if (csize == 0xFFFFFFFF) csize = b.u(y, 8, "a zip64 field"), y += 8;
        if (local == 0xFFFFFFFF) local = b.u(y, 8, "a zip64 field");
      }
      x += 4 + len;
    }
    at += 46 + name_len + extra_len + comment_len;
    const std::string where = path + ": entry '" + name + "'";
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0)
      throw LoadError(where + " is not a .npy array");
    if (method != 0)
      throw LoadError(where +
                      " is compressed (np.savez_compressed); only stored arrays are read: re-save it with "
                      "np.savez(path, **np.load(path))");
    if (csize != usize) throw LoadError(where + ": stored sizes disagree");
    if (b.u(local, 4, "a zip entry's header") != kLocal) throw LoadError(where + ": bad local header");
    const uint64_t data =
        local + 30 + b.u(local + 26, 2, "a zip entry's header") + b.u(local + 28, 2, "a zip entry's header");
    // The .npy: magic, version, header length, the header dict, then the bytes.
    if (b.str(data, 6, "a .npy magic") != "\x93NUMPY") throw LoadError(where + " is not a .npy array (bad magic)");
    const uint64_t major = b.u(data + 6, 1, "a .npy version");
    const int len_width = major == 1 ? 2 : 4;
    if (major < 1 || major > 3)
      throw LoadError(where + ": .npy version " + std::to_string(major) + " is not supported");
    const uint64_t header_len = b.u(data + 8, len_width, "a .npy header");
    const std::string header = b.str(data + 8 + len_width, header_len, "a .npy header");
    NpyArrayInfo a;
    a.name = name.substr(0, name.size() - 4);
    a.descr = header_value(header, "descr", where);
    a.fortran_order = header_value(header, "fortran_order", where) == "True";
    a.shape = parse_shape(header_value(header, "shape", where), where);
    a.data_offset = data + 8 + len_width + header_len;
    const uint64_t header_total = 8 + len_width + header_len;
    if (header_total > usize) throw LoadError(where + ": the .npy header is longer than the entry");
    a.data_bytes = usize - header_total;
    if (element_size(a.descr) == 0)
      throw LoadError(where + ": dtype '" + a.descr + "' is not supported (little-endian float16, float32, float64)");
    uint64_t count = 1;
    for (int64_t d : a.shape) {
      if (d < 0 || (d > 0 && count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)))
        throw LoadError(where + ": bad shape");
      count *= static_cast<uint64_t>(d);
    }
    if (count > a.data_bytes / static_cast<uint64_t>(element_size(a.descr)) ||
        count * static_cast<uint64_t>(element_size(a.descr)) != a.data_bytes)
      throw LoadError(where + ": " + std::to_string(a.data_bytes) + " bytes of data do not hold its shape");
    if (a.data_offset > f.size() || a.data_bytes > f.size() - a.data_offset)
      throw LoadError(where + ": truncated data");
    if (!index_.emplace(a.name, arrays_.size()).second) throw LoadError(where + " appears twice");
    arrays_.push_back(std::move(a));
  }
}

const NpyArrayInfo* NpzFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &arrays_[it->second];
}

at::Tensor NpzFile::load_float(const std::string& name) const {
  const NpyArrayInfo* a = find(name);
  if (a == nullptr) throw LoadError(path() + ": no array '" + name + "'");
  const at::ScalarType t = a->descr == "<f2" ? at::kHalf : a->descr == "<f4" ? at::kFloat : at::kDouble;
  std::vector<int64_t> shape = a->shape;
  if (a->fortran_order) std::reverse(shape.begin(), shape.end());
  // Copied out first: an entry's bytes sit wherever the zip put them, not
  // aligned to their element size.
  at::Tensor raw = at::empty({static_cast<int64_t>(a->data_bytes)}, at::kByte);
  if (a->data_bytes > 0) std::memcpy(raw.data_ptr(), file_->data() + a->data_offset, a->data_bytes);
  at::Tensor out = raw.view(t).view(shape).to(at::kFloat);
  if (a->fortran_order && out.dim() > 1) {
    std::vector<int64_t> perm(static_cast<size_t>(out.dim()));
    for (int64_t i = 0; i < out.dim(); ++i) perm[static_cast<size_t>(i)] = out.dim() - 1 - i;
    out = out.permute(perm).contiguous();
  }
  return out;
}

}  // namespace nnsight
