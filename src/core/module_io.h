// ModuleIO: a module's inputs or output as hooks see them: one tensor, or a
// tuple of tensors (an undefined tensor stands for Python's None).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace nnsight {

class ModuleIO {
 public:
  ModuleIO() = default;
  /*implicit*/ ModuleIO(at::Tensor t) : items_{std::move(t)} {}
  static ModuleIO tuple(std::vector<at::Tensor> items) {
    ModuleIO io;
    io.items_ = std::move(items);
    io.tuple_ = true;
    return io;
  }

  bool is_tuple() const { return tuple_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // Element i of a tuple (or 0 of a plain tensor). Throws on a bad index.
  const at::Tensor& at(size_t i) const;
  at::Tensor& at(size_t i);
  // The tensor a plain value holds, or element 0 of a tuple.
  const at::Tensor& tensor() const { return at(0); }
  const std::vector<at::Tensor>& items() const { return items_; }

 private:
  std::vector<at::Tensor> items_;
  bool tuple_ = false;
};

}  // namespace nnsight
