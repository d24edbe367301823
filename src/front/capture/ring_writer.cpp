#include "front/capture/ring_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <c10/util/Exception.h>

#include <nnsight/capture.hpp>
#include <nnsight/error.hpp>

#include "core/log.h"

namespace nnsight::capture {

void write_entry(IndexEntry& e, const EntryCopy& c) {
  e.seq_begin.store(c.seq, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.offset = c.offset;
  e.request_id = c.request_id;
  e.step = c.step;
  e.bytes = c.bytes;
  e.layer = c.layer;
  e.kind = c.kind;
  e.seq_end.store(c.seq, std::memory_order_release);
}

bool read_entry(const IndexEntry& e, EntryCopy& out) {
  const uint64_t end = e.seq_end.load(std::memory_order_acquire);
  out.offset = e.offset;
  out.request_id = e.request_id;
  out.step = e.step;
  out.bytes = e.bytes;
  out.layer = e.layer;
  out.kind = e.kind;
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t begin = e.seq_begin.load(std::memory_order_relaxed);
  out.seq = end;
  return end != 0 && begin == end;
}

namespace {

uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Whether an existing segment of this name still has a live writer.
bool segment_in_use(const std::string& name, int64_t& owner) {
  ShmSegment existing;
  try {
    existing = ShmSegment::open(name);
  } catch (const Error&) {
    return false;  // vanished meanwhile, or empty (a creator that crashed at once)
  }
  if (existing.size() < sizeof(SegmentHeader)) return false;
  const auto* h = static_cast<const SegmentHeader*>(existing.data());
  owner = h->owner_pid;
  if (h->closed.load(std::memory_order_acquire)) return false;
  return process_alive(h->owner_pid, h->owner_start_ticks);
}

}  // namespace

RingWriter::RingWriter(const RingOptions& o) {
  const std::string name = capture_segment_name(o.engine_id, o.rank);
  TORCH_CHECK(o.hidden_size > 0, "RingWriter: hidden_size must be positive");
  if (o.layers.size() > static_cast<size_t>(kMaxLayers))
    throw ConfigError("capture: at most " + std::to_string(kMaxLayers) + " layers can be captured");
  if (o.compression_k < 0 || o.compression_k > o.hidden_size)
    throw ConfigError("capture compression k must be in [0, hidden size " + std::to_string(o.hidden_size) + "], got " +
                      std::to_string(o.compression_k));

  // Geometry: an eighth of the segment keeps marked records; the rest is
  // the ring and an index big enough that the ring, not the index, limits
  // how many records stay readable (unless that would take over half).
  const uint64_t k = static_cast<uint64_t>(o.compression_k);
  const uint64_t h = static_cast<uint64_t>(o.hidden_size);
  const uint64_t dense = h * dtype_size(o.dtype);
  max_payload_ = std::max(dense, k * h * 4);
  const uint64_t min_record = record_bytes(k > 0 ? std::min(dense, k * 4) : dense);
  const uint64_t max_record = record_bytes(max_payload_);
  const uint64_t too_small = kHeaderBytes + 16 * max_record;
  if (o.buffer_bytes < too_small)
    throw ConfigError("capture buffer of " + std::to_string(o.buffer_bytes) + " bytes is too small for records of " +
                      std::to_string(max_record) + " bytes; give at least " + std::to_string(too_small));
  const uint64_t avail = o.buffer_bytes - kHeaderBytes;
  const uint64_t pin_data = avail / 8 / kAlign * kAlign;
  const uint64_t pin_entries = std::max<uint64_t>(16, pin_data / min_record);
  const uint64_t rest = avail - pin_data - pin_entries * sizeof(IndexEntry);
  uint64_t entries = pow2_at_least(std::max<uint64_t>(16, rest / (min_record + sizeof(IndexEntry))));
  while (entries > 16 && entries * sizeof(IndexEntry) > rest / 2) entries >>= 1;
  const uint64_t data = (rest - entries * sizeof(IndexEntry)) / kAlign * kAlign;
  if (data < 4 * max_record)
    throw ConfigError("capture buffer of " + std::to_string(o.buffer_bytes) + " bytes leaves " + std::to_string(data) +
                      " bytes of ring for records of " + std::to_string(max_record) + " bytes");

  for (int attempt = 0;; ++attempt) {
    if (ShmSegment::create(name, o.buffer_bytes, segment_)) break;
    int64_t owner = 0;
    if (segment_in_use(name, owner))
      throw ConfigError("capture: shared memory '" + name + "' belongs to the running process " +
                        std::to_string(owner) + " (another engine with engine id '" + o.engine_id +
                        "'); give this engine another EngineArgs.engine_id");
    if (attempt >= 2) throw Error("capture: cannot replace the stale shared memory '" + name + "'");
    log_warning("capture: replacing the stale segment '" + name + "' left by process " + std::to_string(owner) +
                ", which is gone");
    ShmSegment::unlink(name);
  }

  base_ = static_cast<uint8_t*>(segment_.data());
  header_ = reinterpret_cast<SegmentHeader*>(base_);
  header_->owner_pid = ::getpid();
  header_->owner_start_ticks = process_start_ticks(::getpid());
  header_->version = kSegmentVersion;
  header_->header_bytes = kHeaderBytes;
  header_->total_bytes = o.buffer_bytes;
  header_->index_offset = kHeaderBytes;
  header_->index_entries = entries;
  header_->data_offset = header_->index_offset + entries * sizeof(IndexEntry);
  header_->data_bytes = data;
  header_->pin_index_offset = header_->data_offset + data;
  header_->pin_index_entries = pin_entries;
  header_->pin_data_offset = header_->pin_index_offset + pin_entries * sizeof(IndexEntry);
  header_->pin_data_bytes = pin_data;
  TORCH_CHECK(header_->pin_data_offset + pin_data <= o.buffer_bytes, "RingWriter: geometry exceeds the segment");
  header_->hidden_size = o.hidden_size;
  header_->rank = o.rank;
  header_->dtype = static_cast<uint8_t>(o.dtype);
  header_->compression_k = o.compression_k;
  header_->num_layers = static_cast<int32_t>(o.layers.size());
  header_->sample_rate = o.sample_rate;
  std::copy(o.layers.begin(), o.layers.end(), header_->layers);
  std::memcpy(header_->engine_id, o.engine_id.data(), o.engine_id.size());

  data_bytes_ = data;
  index_mask_ = entries - 1;
  live_.assign(entries, Live{});
  marks_.reserve(kMaxMarks);
  header_->magic.store(kSegmentMagic, std::memory_order_release);
}

RingWriter::~RingWriter() {
  if (!header_) return;
  header_->closed.store(1, std::memory_order_release);
  if (segment_.still_named()) ShmSegment::unlink(segment_.name());
}

bool RingWriter::marked(uint64_t request_id) const {
  return !marks_.empty() && std::binary_search(marks_.begin(), marks_.end(), request_id);
}

void RingWriter::refresh_marks() {
  const uint64_t g = header_->mark_generation.load(std::memory_order_acquire);
  if (g == mark_generation_) return;
  mark_generation_ = g;
  marks_.clear();
  for (int i = 0; i < kMaxMarks; ++i) {
    const uint64_t id = header_->marks[i].load(std::memory_order_relaxed);
    if (id != 0) marks_.push_back(id);
  }
  std::sort(marks_.begin(), marks_.end());
}

void RingWriter::pin_copy(const Live& l) {
  if (pin_entries_used_ >= header_->pin_index_entries || pin_bytes_used_ + l.bytes > header_->pin_data_bytes) {
    header_->pin_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::memcpy(pin_data() + pin_bytes_used_, data() + l.offset % data_bytes_, l.bytes);
  EntryCopy c;
  c.seq = l.seq;
  c.offset = pin_bytes_used_;
  c.request_id = l.request_id;
  c.step = l.step;
  c.bytes = l.bytes;
  c.layer = l.layer;
  c.kind = l.kind;
  write_entry(pin_index()[pin_entries_used_], c);
  pin_bytes_used_ += l.bytes;
  ++pin_entries_used_;
  header_->pin_count.store(pin_entries_used_, std::memory_order_release);
}

void RingWriter::pin(const Live& l) {
  // A basis is written after its rows, so it is still live when they go.
  if (l.kind == static_cast<uint8_t>(RecordKind::kCoefficients) && l.basis_seq != last_pinned_basis_) {
    const Live& b = live_[l.basis_seq & index_mask_];
    if (b.seq == l.basis_seq) pin_copy(b);
    last_pinned_basis_ = l.basis_seq;
  }
  pin_copy(l);
}

void RingWriter::evict_until(uint64_t reclaim, uint64_t new_seq) {
  while (oldest_live_ <= seq_) {
    const Live& l = live_[oldest_live_ & index_mask_];
    const bool bytes_go = l.offset < reclaim;
    const bool entry_goes = oldest_live_ + index_mask_ + 1 <= new_seq;
    if (!bytes_go && !entry_goes) break;
    if (l.kind != static_cast<uint8_t>(RecordKind::kBasis) && marked(l.request_id)) pin(l);
    ++oldest_live_;
  }
}

uint64_t RingWriter::append(const RecordMeta& m, const void* payload, uint64_t payload_bytes) {
  const uint64_t elems = static_cast<uint64_t>(m.shape0) * static_cast<uint64_t>(std::max<int64_t>(m.shape1, 1));
  TORCH_CHECK(payload_bytes == elems * dtype_size(m.dtype), "RingWriter: payload size does not match its shape");
  TORCH_CHECK(payload_bytes <= max_payload_, "RingWriter: payload larger than the segment was sized for");
  const uint64_t len = record_bytes(payload_bytes);
  const uint64_t seq = seq_ + 1;
  uint64_t pos = head_;
  const uint64_t phys_start = pos % data_bytes_;
  if (phys_start + len > data_bytes_) pos += data_bytes_ - phys_start;  // never straddle the end
  const uint64_t reclaim = pos + len > data_bytes_ ? pos + len - data_bytes_ : 0;

  evict_until(reclaim, seq);
  if (reclaim > reclaim_) {
    reclaim_ = reclaim;
    header_->reclaim.store(reclaim, std::memory_order_relaxed);
    // Readers that see any byte written below must also see the new reclaim.
    std::atomic_thread_fence(std::memory_order_release);
  }

  uint8_t* dst = data() + pos % data_bytes_;
  RecordHeader h{};
  h.seq = seq;
  h.request_id = m.request_id;
  h.step = m.step;
  h.position = m.position;
  h.basis_seq = m.basis_seq;
  h.layer = m.layer;
  h.kind = static_cast<uint8_t>(m.kind);
  h.dtype = static_cast<uint8_t>(m.dtype);
  h.ndim = m.shape1 > 0 ? 2 : 1;
  h.shape[0] = m.shape0;
  h.shape[1] = m.shape1;
  std::memcpy(dst, &h, sizeof(h));
  std::memcpy(dst + sizeof(h), payload, payload_bytes);

  EntryCopy c;
  c.seq = seq;
  c.offset = pos;
  c.request_id = m.request_id;
  c.step = m.step;
  c.bytes = static_cast<uint32_t>(len);
  c.layer = m.layer;
  c.kind = h.kind;
  write_entry(index()[seq & index_mask_], c);
  Live& l = live_[seq & index_mask_];
  l.seq = seq;
  l.offset = pos;
  l.bytes = static_cast<uint32_t>(len);
  l.request_id = m.request_id;
  l.basis_seq = m.basis_seq;
  l.step = m.step;
  l.layer = m.layer;
  l.kind = h.kind;
  seq_ = seq;
  head_ = pos + len;
  return seq;
}

void RingWriter::publish() {
  header_->published.store(seq_, std::memory_order_release);
  refresh_marks();
}

}  // namespace nnsight::capture
