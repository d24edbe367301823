// ActivationReader (include/nnsight/capture.hpp): records of a capture ring
// as tensors, with compressed rows reconstructed from their basis.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <nnsight/capture.hpp>
#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_writer.h"
#include "front/capture/ring_reader.h"

namespace nnsight {

using capture::DType;
using capture::EntryCopy;
using capture::RawRecord;
using capture::RecordKind;

namespace {

at::ScalarType scalar_type(uint8_t d) {
  switch (static_cast<DType>(d)) {
    case DType::kFloat32:
      return at::kFloat;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kFloat16:
      return at::kHalf;
  }
  return at::kFloat;
}

at::Tensor payload_tensor(const RawRecord& r) {
  std::vector<int64_t> shape = {r.header.shape[0]};
  if (r.header.ndim == 2) shape.push_back(r.header.shape[1]);
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(scalar_type(r.header.dtype)));
  std::memcpy(t.data_ptr(), r.payload, r.payload_bytes);
  return t;
}

}  // namespace

struct ActivationReader::Impl {
  capture::RingReader ring;
  std::string engine_id;
  int rank;
  uint64_t overwritten = 0;

  Impl(const std::string& id, int r) : ring(capture_segment_name(id, r)), engine_id(id), rank(r) {}

  // Pinned records: seq -> pin slot (a snapshot; pins are append-only).
  std::map<uint64_t, uint64_t> pinned_slots() {
    std::map<uint64_t, uint64_t> out;
    const uint64_t n = ring.pin_count();
    EntryCopy e;
    for (uint64_t j = 0; j < n; ++j)
      if (ring.pinned_entry(j, e)) out.emplace(e.seq, j);
    return out;
  }

  // The basis [k, hidden] of seq `b`, from the pinned area or the ring.
  bool basis(uint64_t b, const std::map<uint64_t, uint64_t>& pins, std::map<uint64_t, at::Tensor>& cache) {
    auto c = cache.find(b);
    if (c != cache.end()) return c->second.defined();
    EntryCopy e;
    RawRecord r;
    bool ok = false;
    auto p = pins.find(b);
    if (p != pins.end())
      ok = ring.pinned_entry(p->second, e) && ring.read(e, true, r);
    else
      ok = ring.entry(b, e) && ring.read(e, false, r);
    ok = ok && r.header.kind == static_cast<uint8_t>(RecordKind::kBasis);
    cache[b] = ok ? payload_tensor(r) : at::Tensor();
    return ok;
  }

  // Turns a copied record into a CaptureRecord; false if its basis is gone.
  bool convert(const RawRecord& r, bool pinned, const std::map<uint64_t, uint64_t>& pins,
               std::map<uint64_t, at::Tensor>& cache, CaptureRecord& out) {
    out.seq = r.header.seq;
    out.request_id = r.header.request_id;
    out.step = r.header.step;
    out.layer = r.header.layer;
    out.position = r.header.position;
    out.pinned = pinned;
    if (r.header.kind == static_cast<uint8_t>(RecordKind::kDense)) {
      out.value = payload_tensor(r);
      out.reconstructed = false;
      return true;
    }
    // Copy the coefficients first: reading the basis reuses the ring's buffer.
    at::Tensor coefficients = payload_tensor(r);  // [k]
    if (!basis(r.header.basis_seq, pins, cache)) return false;
    out.value = at::matmul(coefficients, cache[r.header.basis_seq]);  // [k] @ [k, hidden] -> [hidden]
    out.reconstructed = true;
    return true;
  }

  // Reads the user-visible record behind `e`; counts it as overwritten if gone.
  void take(const EntryCopy& e, bool pinned, const std::map<uint64_t, uint64_t>& pins,
            std::map<uint64_t, at::Tensor>& cache, std::vector<CaptureRecord>& out) {
    if (e.kind == static_cast<uint8_t>(RecordKind::kBasis)) return;
    RawRecord r;
    CaptureRecord rec;
    if (ring.read(e, pinned, r) && convert(r, pinned, pins, cache, rec))
      out.push_back(std::move(rec));
    else
      ++overwritten;
  }

  template <class Keep>
  std::vector<CaptureRecord> collect(uint64_t lo, uint64_t hi, Keep&& keep, bool include_pins) {
    std::vector<CaptureRecord> out;
    std::map<uint64_t, at::Tensor> cache;
    const auto pins = pinned_slots();
    if (include_pins) {
      EntryCopy e;
      for (const auto& [seq, j] : pins)
        if (seq >= lo && seq <= hi && ring.pinned_entry(j, e) && keep(e)) take(e, true, pins, cache, out);
    }
    const uint64_t first = std::max(lo, ring.oldest_indexed(hi));
    EntryCopy e;
    for (uint64_t s = first; s <= hi && s != 0; ++s) {
      if (pins.count(s)) continue;
      if (!ring.entry(s, e)) {
        ++overwritten;
        continue;
      }
      if (keep(e)) take(e, false, pins, cache, out);
    }
    std::sort(out.begin(), out.end(), [](const CaptureRecord& a, const CaptureRecord& b) { return a.seq < b.seq; });
    return out;
  }
};

ActivationReader::ActivationReader(const std::string& engine_id, int rank)
    : impl_(std::make_unique<Impl>(engine_id, rank)) {}
ActivationReader::~ActivationReader() = default;
ActivationReader::ActivationReader(ActivationReader&&) noexcept = default;
ActivationReader& ActivationReader::operator=(ActivationReader&&) noexcept = default;

CaptureInfo ActivationReader::info() const {
  const capture::SegmentHeader& h = impl_->ring.header();
  CaptureInfo i;
  i.engine_id = impl_->engine_id;
  i.rank = impl_->rank;
  i.owner_pid = h.owner_pid;
  i.hidden_size = h.hidden_size;
  i.dtype = capture::dtype_name(static_cast<DType>(h.dtype));
  i.layers.assign(h.layers, h.layers + std::max(0, std::min(h.num_layers, capture::kMaxLayers)));
  i.compression_k = h.compression_k;
  i.sample_rate = h.sample_rate;
  i.ring_bytes = h.data_bytes;
  i.index_entries = h.index_entries;
  i.last_seq = impl_->ring.published();
  i.pinned_records = impl_->ring.pin_count();
  i.pins_dropped = h.pin_dropped.load(std::memory_order_relaxed);
  i.writer_closed = h.closed.load(std::memory_order_acquire) != 0;
  return i;
}

uint64_t ActivationReader::last_seq() const { return impl_->ring.published(); }

bool ActivationReader::writer_alive() const {
  const capture::SegmentHeader& h = impl_->ring.header();
  return !h.closed.load(std::memory_order_acquire) && capture::process_alive(h.owner_pid, h.owner_start_ticks);
}

std::vector<CaptureRecord> ActivationReader::latest(size_t n) const {
  std::vector<CaptureRecord> out;
  if (n == 0) return out;
  const uint64_t hi = impl_->ring.published();
  const uint64_t lo = impl_->ring.oldest_indexed(hi);
  // Walk back in windows until n records are found (windows bound the copies).
  uint64_t top = hi;
  while (top >= lo && top != 0 && out.size() < n) {
    const uint64_t window = std::max<uint64_t>(64, 2 * (n - out.size()));
    const uint64_t bottom = top - lo + 1 > window ? top - window + 1 : lo;
    auto part = impl_->collect(
        bottom, top, [](const EntryCopy&) { return true; }, false);
    out.insert(out.begin(), part.begin(), part.end());
    top = bottom - 1;
  }
  if (out.size() > n) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(n));
  return out;
}

std::vector<CaptureRecord> ActivationReader::request(uint64_t request_id) const {
  const uint64_t hi = impl_->ring.published();
  return impl_->collect(
      1, hi, [request_id](const EntryCopy& e) { return e.request_id == request_id; }, true);
}

std::vector<CaptureRecord> ActivationReader::since(uint64_t after_seq) const {
  const uint64_t hi = impl_->ring.published();
  if (after_seq >= hi) return {};
  const uint64_t lo = after_seq + 1;
  const uint64_t first = impl_->ring.oldest_indexed(hi);
  if (lo < first) impl_->overwritten += first - lo;  // fell out of the index before this call
  return impl_->collect(
      lo, hi, [](const EntryCopy&) { return true; }, true);
}

uint64_t ActivationReader::overwritten() const { return impl_->overwritten; }

bool ActivationReader::mark(uint64_t request_id) {
  if (request_id == 0) return false;
  capture::SegmentHeader& h = impl_->ring.header();
  for (auto& m : h.marks)
    if (m.load(std::memory_order_relaxed) == request_id) return true;
  for (auto& m : h.marks) {
    uint64_t expected = 0;
    if (m.compare_exchange_strong(expected, request_id, std::memory_order_acq_rel)) {
      h.mark_generation.fetch_add(1, std::memory_order_acq_rel);
      return true;
    }
  }
  return false;
}

void ActivationReader::unmark(uint64_t request_id) {
  if (request_id == 0) return;
  capture::SegmentHeader& h = impl_->ring.header();
  bool changed = false;
  for (auto& m : h.marks) {
    uint64_t expected = request_id;
    if (m.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) changed = true;
  }
  if (changed) h.mark_generation.fetch_add(1, std::memory_order_acq_rel);
}

size_t ActivationReader::save_request(uint64_t request_id, const std::string& path) const {
  const std::vector<CaptureRecord> records = request(request_id);
  if (records.empty())
    throw Error("capture: no records of request " + std::to_string(request_id) + " in " +
                capture_segment_name(impl_->engine_id, impl_->rank));
  std::map<int32_t, std::vector<const CaptureRecord*>> by_layer;
  for (const auto& r : records) by_layer[r.layer].push_back(&r);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (auto& [layer, rs] : by_layer) {
    std::stable_sort(rs.begin(), rs.end(), [](const CaptureRecord* a, const CaptureRecord* b) {
      return a->step != b->step ? a->step < b->step : a->position < b->position;
    });
    std::vector<at::Tensor> rows;
    std::vector<int64_t> steps, positions;
    for (const auto* r : rs) {
      rows.push_back(r->value.to(at::kFloat));
      steps.push_back(r->step);
      positions.push_back(r->position);
    }
    const std::string base = "layers." + std::to_string(layer);
    tensors.emplace_back(base, at::stack(rows));
    tensors.emplace_back(base + ".steps", at::tensor(steps, at::kLong));
    tensors.emplace_back(base + ".positions", at::tensor(positions, at::kLong));
  }
  write_safetensors(path, tensors,
                    {{"engine_id", impl_->engine_id},
                     {"rank", std::to_string(impl_->rank)},
                     {"request_id", std::to_string(request_id)}});
  return records.size();
}

}  // namespace nnsight

namespace nnsight {

void write_capture_records(const std::string& path, const std::vector<CaptureRecord>& records) {
  std::vector<at::Tensor> rows;
  std::vector<int64_t> seq, request, step, layer, position;
  rows.reserve(records.size());
  for (const auto& r : records) {
    if (!rows.empty() && r.value.numel() != rows.front().numel())
      throw Error("write_capture_records: record " + std::to_string(r.seq) + " has " + std::to_string(r.value.numel()) +
                  " values, the first has " + std::to_string(rows.front().numel()));
    rows.push_back(r.value.to(at::kFloat).reshape({-1}));
    seq.push_back(static_cast<int64_t>(r.seq));
    request.push_back(static_cast<int64_t>(r.request_id));
    step.push_back(r.step);
    layer.push_back(r.layer);
    position.push_back(r.position);
  }
  at::Tensor values = rows.empty() ? at::zeros({0, 0}, at::kFloat) : at::stack(rows);
  auto col = [](const std::vector<int64_t>& v) { return at::tensor(v, at::kLong); };
  write_safetensors(path, {{"values", values},
                           {"seq", col(seq)},
                           {"request_id", col(request)},
                           {"step", col(step)},
                           {"layer", col(layer)},
                           {"position", col(position)}});
}

}  // namespace nnsight
