#include "core/safetensors/safetensors_writer.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_file.h"

namespace nnsight {
namespace {

// Closes the FILE and removes the temporary unless released.
struct TempFile {
  std::string path;
  FILE* f = nullptr;
  bool keep = false;
  ~TempFile() {
    if (f != nullptr) std::fclose(f);
    if (!keep) std::remove(path.c_str());
  }
};

[[noreturn]] void io_error(const std::string& path, const char* op) {
  throw Error("write_safetensors: cannot " + std::string(op) + " '" + path + "': " + std::strerror(errno));
}

}  // namespace

namespace {

// The header text (padded) and contiguous CPU copies of the tensors, in file order.
std::pair<std::string, std::vector<at::Tensor>> layout(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                                       const std::map<std::string, std::string>& metadata) {
  std::vector<at::Tensor> data;
  data.reserve(tensors.size());
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__") {
      throw Error("write_safetensors: '__metadata__' is reserved and cannot name a tensor");
    }
    if (!seen.insert(name).second) {
      throw Error("write_safetensors: duplicate tensor name '" + name + "'");
    }
    if (!tensor.defined()) throw Error("write_safetensors: tensor '" + name + "' is undefined");
    const char* dtype = safetensors_dtype_name(tensor.scalar_type());
    if (dtype == nullptr) {
      throw Error("write_safetensors: tensor '" + name + "' has dtype " +
                  std::string(c10::toString(tensor.scalar_type())) +
                  ", which safetensors files written here cannot hold");
    }
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    data.push_back(std::move(t));
  }
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Pad with spaces so the data section starts 8-byte aligned, as the
  // reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  return {std::move(text), std::move(data)};
}

}  // namespace

std::string safetensors_bytes(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  auto [text, data] = layout(tensors, metadata);
  size_t total = 8 + text.size();
  for (const at::Tensor& t : data) total += static_cast<size_t>(t.numel()) * t.element_size();
  std::string out;
  out.reserve(total);
  const uint64_t header_len = text.size();
  out.append(reinterpret_cast<const char*>(&header_len), 8);
  out += text;
  for (const at::Tensor& t : data)
    out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * t.element_size());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  auto [text, data] = layout(tensors, metadata);
  const uint64_t header_len = text.size();

  TempFile tmp;
  tmp.path = path + ".tmp";
  tmp.f = std::fopen(tmp.path.c_str(), "wb");
  if (tmp.f == nullptr) io_error(tmp.path, "create");
  bool ok =
      std::fwrite(&header_len, 8, 1, tmp.f) == 1 && std::fwrite(text.data(), 1, text.size(), tmp.f) == text.size();
  for (const at::Tensor& t : data) {
    const size_t nbytes = static_cast<size_t>(t.numel()) * t.element_size();
    if (ok && nbytes > 0) ok = std::fwrite(t.data_ptr(), 1, nbytes, tmp.f) == nbytes;
  }
  if (!ok) io_error(tmp.path, "write");
  FILE* f = tmp.f;
  tmp.f = nullptr;
  if (std::fclose(f) != 0) io_error(tmp.path, "close");
  if (std::rename(tmp.path.c_str(), path.c_str()) != 0) io_error(path, "rename onto");
  tmp.keep = true;
}

}  // namespace nnsight
