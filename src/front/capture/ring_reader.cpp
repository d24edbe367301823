#include "front/capture/ring_reader.h"

#include <algorithm>
#include <cstring>

#include <nnsight/error.hpp>

#include "front/capture/ring_writer.h"

namespace nnsight::capture {

namespace {

// a + b * c <= limit, without overflow.
bool region_fits(uint64_t offset, uint64_t count, uint64_t size, uint64_t limit) {
  if (size != 0 && count > limit / size) return false;
  const uint64_t bytes = count * size;
  return offset <= limit && bytes <= limit - offset;
}

}  // namespace

RingReader::RingReader(const std::string& name) : segment_(ShmSegment::open(name)) {
  auto bad = [&](const std::string& why) {
    throw Error("capture: '" + name + "' is not a readable capture segment: " + why);
  };
  const uint64_t size = segment_.size();
  if (size < kHeaderBytes) bad("only " + std::to_string(size) + " bytes");
  base_ = static_cast<uint8_t*>(segment_.data());
  header_ = reinterpret_cast<SegmentHeader*>(base_);
  if (header_->magic.load(std::memory_order_acquire) != kSegmentMagic) bad("no capture magic (still being created?)");
  const SegmentHeader& h = *header_;
  if (h.version != kSegmentVersion)
    bad("format version " + std::to_string(h.version) + ", this reader reads " + std::to_string(kSegmentVersion));
  if (h.header_bytes != kHeaderBytes) bad("header size " + std::to_string(h.header_bytes));
  if (h.total_bytes != size)
    bad("header says " + std::to_string(h.total_bytes) + " bytes, segment has " + std::to_string(size));
  if (h.index_entries == 0 || (h.index_entries & (h.index_entries - 1)) != 0) bad("index size is not a power of two");
  if (h.data_bytes == 0 || h.data_bytes % kAlign != 0) bad("data size is not a multiple of 64");
  if (h.pin_data_bytes % kAlign != 0) bad("pinned data size is not a multiple of 64");
  if (!region_fits(h.index_offset, h.index_entries, sizeof(IndexEntry), size) || h.index_offset < kHeaderBytes ||
      !region_fits(h.data_offset, h.data_bytes, 1, size) ||
      !region_fits(h.pin_index_offset, h.pin_index_entries, sizeof(IndexEntry), size) ||
      !region_fits(h.pin_data_offset, h.pin_data_bytes, 1, size))
    bad("a region lies outside the segment");
  if (h.index_offset % alignof(IndexEntry) != 0 || h.pin_index_offset % alignof(IndexEntry) != 0)
    bad("misaligned index");
  if (h.hidden_size <= 0 || h.hidden_size > (int64_t(1) << 24)) bad("hidden size " + std::to_string(h.hidden_size));
  if (!dtype_valid(h.dtype)) bad("dtype code " + std::to_string(h.dtype));
  if (h.compression_k < 0 || h.compression_k > h.hidden_size) bad("compression k " + std::to_string(h.compression_k));
  if (h.num_layers < 0 || h.num_layers > kMaxLayers) bad("layer count " + std::to_string(h.num_layers));
  if (std::memchr(h.engine_id, 0, sizeof(h.engine_id)) == nullptr) bad("engine id is not terminated");
  const uint64_t hid = static_cast<uint64_t>(h.hidden_size);
  const uint64_t k = static_cast<uint64_t>(h.compression_k);
  max_record_ = record_bytes(std::max(hid * dtype_size(static_cast<DType>(h.dtype)), k * hid * 4));
  geo_ = Geometry{h.index_offset,
                  h.index_entries,
                  h.data_offset,
                  h.data_bytes,
                  h.pin_index_offset,
                  h.pin_index_entries,
                  h.pin_data_offset,
                  h.pin_data_bytes,
                  h.hidden_size,
                  h.compression_k,
                  h.dtype};
  if (max_record_ > h.data_bytes) bad("records larger than the ring");
  buf_.resize(max_record_);
}

bool RingReader::entry(uint64_t seq, EntryCopy& out) const {
  const auto* idx = reinterpret_cast<const IndexEntry*>(base_ + geo_.index_offset);
  return read_entry(idx[seq & (geo_.index_entries - 1)], out) && out.seq == seq;
}

uint64_t RingReader::pin_count() const {
  return std::min(header_->pin_count.load(std::memory_order_acquire), geo_.pin_index_entries);
}

bool RingReader::pinned_entry(uint64_t j, EntryCopy& out) const {
  if (j >= pin_count()) return false;
  const auto* idx = reinterpret_cast<const IndexEntry*>(base_ + geo_.pin_index_offset);
  return read_entry(idx[j], out);
}

bool RingReader::valid_record(const EntryCopy& e, const RecordHeader& h) const {
  if (h.seq != e.seq || h.kind != e.kind || !dtype_valid(h.dtype)) return false;
  const int64_t hidden = geo_.hidden;
  const int64_t k = geo_.k;
  switch (static_cast<RecordKind>(h.kind)) {
    case RecordKind::kDense:
      return h.ndim == 1 && h.shape[0] == hidden && h.dtype == geo_.dtype;
    case RecordKind::kCoefficients:
      return h.ndim == 1 && k > 0 && h.shape[0] == k && h.dtype == static_cast<uint8_t>(DType::kFloat32);
    case RecordKind::kBasis:
      return h.ndim == 2 && k > 0 && h.shape[0] == k && h.shape[1] == hidden &&
             h.dtype == static_cast<uint8_t>(DType::kFloat32);
  }
  return false;
}

bool RingReader::read(const EntryCopy& e, bool pinned, RawRecord& out) const {
  if (e.bytes < sizeof(RecordHeader) || e.bytes > max_record_ || e.bytes % kAlign != 0) return false;
  const uint8_t* src;
  if (pinned) {
    if (e.offset > geo_.pin_data_bytes || e.bytes > geo_.pin_data_bytes - e.offset) return false;
    src = base_ + geo_.pin_data_offset + e.offset;
  } else {
    const uint64_t phys = e.offset % geo_.data_bytes;
    if (phys + e.bytes > geo_.data_bytes) return false;
    src = base_ + geo_.data_offset + phys;
  }
  std::memcpy(buf_.data(), src, e.bytes);
  if (!pinned) {
    // Pairs with the writer's fence after raising reclaim: if the copy saw
    // any byte of a newer record, this load sees the reclaim that allowed it.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.offset < header_->reclaim.load(std::memory_order_relaxed)) return false;
  }
  std::memcpy(&out.header, buf_.data(), sizeof(RecordHeader));
  if (!valid_record(e, out.header)) return false;
  const uint64_t elems = static_cast<uint64_t>(out.header.shape[0]) *
                         static_cast<uint64_t>(out.header.ndim == 2 ? out.header.shape[1] : 1);
  out.payload_bytes = elems * dtype_size(static_cast<DType>(out.header.dtype));
  if (sizeof(RecordHeader) + out.payload_bytes > e.bytes) return false;
  out.payload = buf_.data() + sizeof(RecordHeader);
  return true;
}

}  // namespace nnsight::capture
