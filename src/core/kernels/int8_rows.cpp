#include "core/kernels/int8_rows.h"

#include <ATen/ATen.h>

#include "core/kernels/kernel_gradients.h"
#include "core/kernels/packed_linear.h"
#include "core/kernels/packed_linear_q8.h"
#include "core/kernels/undispatched.h"

namespace nnsight::kernels {

namespace {
thread_local const Int8Rows* t_rows = nullptr;
thread_local int t_suspended = 0;  // Module::CallScopes open on this thread

// The list for x, or null where every row of x is exact.
const Int8Rows* rows_for(const at::Tensor& x) {
  const Int8Rows* r = current_int8_rows();
  if (r == nullptr || r->none() || records_grad(x)) return nullptr;
  TORCH_CHECK(x.dim() == 2 && x.size(0) == r->rows, "8-bit activation rows were set for ", r->rows,
              " rows, but a packed linear layer got x of shape ", x.sizes(),
              ": a module run on other rows must run under Int8RowsScope(nullptr)");
  return r;
}
}  // namespace

Int8Rows Int8Rows::of(const std::vector<uint8_t>& is_int8) {
  Int8Rows r;
  r.rows = static_cast<int64_t>(is_int8.size());
  for (uint8_t f : is_int8) r.num_int8 += f != 0;
  if (r.none() || r.all()) return r;
  const auto opts = at::TensorOptions().dtype(at::kLong);
  r.int8 = at::empty({r.num_int8}, opts);
  r.exact = at::empty({r.rows - r.num_int8}, opts);
  int64_t* q = r.int8.data_ptr<int64_t>();
  int64_t* e = r.exact.data_ptr<int64_t>();
  for (int64_t i = 0; i < r.rows; ++i) *(is_int8[static_cast<size_t>(i)] ? q++ : e++) = i;
  return r;
}

const Int8Rows* current_int8_rows() { return t_suspended > 0 ? nullptr : t_rows; }

Int8RowsScope::Int8RowsScope(const Int8Rows* rows) : previous_(t_rows) { t_rows = rows; }
Int8RowsScope::~Int8RowsScope() { t_rows = previous_; }

void detail::suspend_int8_rows() { ++t_suspended; }
void detail::resume_int8_rows() { --t_suspended; }

at::Tensor packed_linear_rows(const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias) {
  const Int8Rows* r = packed_q8_available(w.type) ? rows_for(x) : nullptr;
  if (r == nullptr) return packed_linear(x, w, bias);
  if (r->all()) return packed_linear_q8(x, w, bias);
  at::Tensor y = new_output({x.size(0), w.rows}, x.options());  // [rows, N]
  y.index_copy_(0, r->exact, packed_linear(x.index_select(0, r->exact), w, bias));
  y.index_copy_(0, r->int8, packed_linear_q8(x.index_select(0, r->int8), w, bias));
  return y;
}

std::vector<at::Tensor> packed_linear_many_rows(const at::Tensor& x, const std::vector<const PackedMatrix*>& ws,
                                                const std::vector<at::Tensor>& biases) {
  const Int8Rows* r = rows_for(x);
  bool q8 = r != nullptr;
  for (const PackedMatrix* w : ws) q8 = q8 && packed_q8_available(w->type);
  if (!q8) {
    if (r == nullptr) return packed_linear_many(x, ws, biases);
    std::vector<at::Tensor> outs;  // some matrix keeps float32 rows: each on its own
    for (size_t i = 0; i < ws.size(); ++i)
      outs.push_back(packed_linear_rows(x, *ws[i], biases.empty() ? at::Tensor() : biases[i]));
    return outs;
  }
  if (r->all()) return packed_linear_q8_many(x, ws, biases);
  // Mixed: the exact rows together, the 8-bit rows together, then each output put back together.
  std::vector<at::Tensor> exact = packed_linear_many(x.index_select(0, r->exact), ws, biases);
  std::vector<at::Tensor> fast = packed_linear_q8_many(x.index_select(0, r->int8).contiguous(), ws, biases);
  std::vector<at::Tensor> outs;
  outs.reserve(ws.size());
  for (size_t i = 0; i < ws.size(); ++i) {
    at::Tensor y = new_output({x.size(0), ws[i]->rows}, x.options());  // [rows, N_i]
    y.index_copy_(0, r->exact, exact[i]);
    y.index_copy_(0, r->int8, fast[i]);
    outs.push_back(std::move(y));
  }
  return outs;
}

}  // namespace nnsight::kernels
