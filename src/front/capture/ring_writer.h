// RingWriter: the engine side of a capture segment (layout: ring_format.h).
// Appends records without ever waiting for readers: the oldest records are
// overwritten, except those of requests a reader marked, which are first
// copied to the segment's pinned area (while it has room).
//
// Single-threaded: one writer per segment. No heap allocation per record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "front/capture/ring_format.h"
#include "front/capture/shm_segment.h"

namespace nnsight::capture {

struct RingOptions {
  std::string engine_id;  // [A-Za-z0-9._-], at most 64 characters
  int rank = 0;
  uint64_t buffer_bytes = 256ull << 20;  // whole segment, header and index included
  int64_t hidden_size = 0;
  DType dtype = DType::kFloat32;  // of dense rows
  int32_t compression_k = 0;      // 0 = dense rows only
  double sample_rate = 1.0;       // recorded in the header for readers
  std::vector<int32_t> layers;    // recorded in the header for readers

  RingOptions& with_engine_id(std::string v) {
    engine_id = std::move(v);
    return *this;
  }
  RingOptions& with_rank(int v) {
    rank = v;
    return *this;
  }
  RingOptions& with_buffer_bytes(uint64_t v) {
    buffer_bytes = v;
    return *this;
  }
  RingOptions& with_hidden_size(int64_t v) {
    hidden_size = v;
    return *this;
  }
  RingOptions& with_dtype(DType v) {
    dtype = v;
    return *this;
  }
  RingOptions& with_compression_k(int32_t v) {
    compression_k = v;
    return *this;
  }
  RingOptions& with_sample_rate(double v) {
    sample_rate = v;
    return *this;
  }
  RingOptions& with_layers(std::vector<int32_t> v) {
    layers = std::move(v);
    return *this;
  }
};

// What one record is about (the payload comes separately).
struct RecordMeta {
  uint64_t request_id = 0;
  int64_t step = 0;
  int64_t position = 0;
  int32_t layer = 0;
  RecordKind kind = RecordKind::kDense;
  DType dtype = DType::kFloat32;
  int64_t shape0 = 0;
  int64_t shape1 = 0;      // 0 = a 1-d payload
  uint64_t basis_seq = 0;  // kCoefficients only
};

class RingWriter {
 public:
  // Creates the segment capture_segment_name(engine_id, rank). A segment of
  // that name left by a process that is gone (crashed) is replaced, with a
  // warning; one whose writer is alive is an error (ConfigError). Throws
  // ConfigError when the buffer cannot hold a few records of this size.
  explicit RingWriter(const RingOptions& options);
  // Marks the segment closed and unlinks it (if it is still ours).
  ~RingWriter();
  RingWriter(const RingWriter&) = delete;
  RingWriter& operator=(const RingWriter&) = delete;

  // The seq the next append() will get.
  uint64_t next_seq() const { return seq_ + 1; }
  // Appends one record; readers see it after publish(). `payload_bytes` must
  // equal shape0 * max(shape1, 1) * dtype size. Returns its seq.
  uint64_t append(const RecordMeta& meta, const void* payload, uint64_t payload_bytes);
  // Makes every record appended so far visible to readers, and picks up
  // marks readers changed since the last call.
  void publish();

  const std::string& name() const { return segment_.name(); }
  const SegmentHeader& header() const { return *header_; }
  uint64_t max_payload_bytes() const { return max_payload_; }
  // Records copied to the pinned area so far.
  uint64_t pinned() const { return pin_entries_used_; }

 private:
  struct Live {  // the writer's own copy of a live index entry
    uint64_t seq = 0;
    uint64_t offset = 0;
    uint32_t bytes = 0;
    uint64_t request_id = 0;
    uint64_t basis_seq = 0;
    int64_t step = 0;
    int32_t layer = 0;
    uint8_t kind = 0;
  };
  void evict_until(uint64_t reclaim, uint64_t new_seq);
  void pin(const Live& live);
  void pin_copy(const Live& live);
  bool marked(uint64_t request_id) const;
  void refresh_marks();
  uint8_t* data() const { return base_ + header_->data_offset; }
  IndexEntry* index() const { return reinterpret_cast<IndexEntry*>(base_ + header_->index_offset); }
  IndexEntry* pin_index() const { return reinterpret_cast<IndexEntry*>(base_ + header_->pin_index_offset); }
  uint8_t* pin_data() const { return base_ + header_->pin_data_offset; }

  uint64_t data_bytes_ = 0;
  uint64_t index_mask_ = 0;
  ShmSegment segment_;
  uint8_t* base_ = nullptr;
  SegmentHeader* header_ = nullptr;
  uint64_t max_payload_ = 0;
  uint64_t seq_ = 0;          // last appended
  uint64_t head_ = 0;         // next free virtual offset
  uint64_t reclaim_ = 0;      // last value stored in header_->reclaim
  uint64_t oldest_live_ = 1;  // oldest seq not yet evicted
  std::vector<Live> live_;    // by seq % index_entries
  uint64_t pin_entries_used_ = 0;
  uint64_t pin_bytes_used_ = 0;
  uint64_t last_pinned_basis_ = 0;
  uint64_t mark_generation_ = 0;
  std::vector<uint64_t> marks_;  // sorted
};

// Writes an index entry seqlock-style (shared by the main and pinned index).
void write_entry(IndexEntry& e, const EntryCopy& c);
// Copies an entry; true when the copy is consistent (not torn, not empty).
// The caller still checks out.seq against the seq it wanted.
bool read_entry(const IndexEntry& e, EntryCopy& out);

}  // namespace nnsight::capture
