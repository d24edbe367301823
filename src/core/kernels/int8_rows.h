// Which rows of the step's flat batch may run with 8-bit activations
// (EngineArgs::fast_untraced, issue 39): the rows of requests no trace reads.
//
// The model runner sets one list for the forward (token rows) and another for
// the logits (sample rows) on its thread while the model runs them; the packed
// linear layers (tp/parallel_linear, the LM head) read it through
// packed_linear_rows: the listed rows through packed_linear_q8, the others
// through packed_linear, into one output. packed_linear is batch invariant,
// so an exact row's values are bitwise what they are without the option,
// whatever rows share its step.
//
// A list is for the rows it was made for and nothing else: a module run on
// other rows during the step must run without one. Module::CallScope (a
// graph's `call`) suspends it, and so does an Int8RowsScope(nullptr) (the
// routed experts of sparse_moe). packed_linear_rows checks the row count and
// throws (an internal error) where a module got other rows with a list set.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "core/kernels/packed_matrix.h"

namespace nnsight::kernels {

struct Int8Rows {
  int64_t rows = 0;      // rows of x the list is for
  int64_t num_int8 = 0;  // how many of them may take 8-bit activations
  at::Tensor int8;       // [num_int8] int64 ascending; undefined unless the rows are mixed
  at::Tensor exact;      // [rows - num_int8] int64 ascending; undefined unless mixed

  // From one flag per row (true: may take 8-bit activations).
  static Int8Rows of(const std::vector<uint8_t>& is_int8);
  bool none() const { return num_int8 == 0; }
  bool all() const { return num_int8 == rows; }
};

// The list in force on this thread, or null (every row exact): null while a
// Module::CallScope lives on this thread.
const Int8Rows* current_int8_rows();

// Sets current_int8_rows() for its lifetime (nullptr: no list), restoring the
// previous one.
class Int8RowsScope {
 public:
  explicit Int8RowsScope(const Int8Rows* rows);
  ~Int8RowsScope();
  Int8RowsScope(const Int8RowsScope&) = delete;
  Int8RowsScope& operator=(const Int8RowsScope&) = delete;

 private:
  const Int8Rows* previous_;
};

namespace detail {
// Module::CallScope's: while one is open, current_int8_rows() is null.
void suspend_int8_rows();
void resume_int8_rows();
}  // namespace detail

// y = x w^T (+ bias) as packed_linear computes it, except the current list's
// rows where w's type runs with 8-bit activations here
// (packed_q8_available): x [rows, K].
at::Tensor packed_linear_rows(const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias);

// packed_linear_many with the current list: every row 8-bit ->
// packed_linear_q8_many, none -> packed_linear_many, mixed -> one
// packed_linear_rows per matrix.
std::vector<at::Tensor> packed_linear_many_rows(const at::Tensor& x, const std::vector<const PackedMatrix*>& ws,
                                                const std::vector<at::Tensor>& biases);

}  // namespace nnsight::kernels
