// RingReader: the reading side of a capture segment, at the byte level
// (ActivationReader turns its records into tensors). Validates the segment's
// geometry when attaching and every record it copies, so a corrupt or
// hostile segment yields errors or skipped records, never reads out of
// bounds; a record the writer overwrote during the copy is reported as such.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "front/capture/ring_format.h"
#include "front/capture/shm_segment.h"

namespace nnsight::capture {

struct RawRecord {
  RecordHeader header{};
  const uint8_t* payload = nullptr;  // into the reader's buffer: valid until the next read
  uint64_t payload_bytes = 0;
};

class RingReader {
 public:
  // Maps segment `name`. Throws nnsight::Error naming the failed check.
  explicit RingReader(const std::string& name);

  const SegmentHeader& header() const { return *header_; }
  SegmentHeader& header() { return *header_; }
  const std::string& name() const { return segment_.name(); }
  uint64_t published() const { return header_->published.load(std::memory_order_acquire); }
  uint64_t index_entries() const { return geo_.index_entries; }
  // Oldest seq the index can still hold given `published`.
  uint64_t oldest_indexed(uint64_t published) const {
    return published >= geo_.index_entries ? published - geo_.index_entries + 1 : 1;
  }

  // The main index entry for `seq`; false when it holds another seq or is torn.
  bool entry(uint64_t seq, EntryCopy& out) const;
  uint64_t pin_count() const;
  bool pinned_entry(uint64_t j, EntryCopy& out) const;
  // Copies the record an entry points at; false when it was overwritten
  // (before or during the copy) or does not describe a valid record.
  bool read(const EntryCopy& e, bool pinned, RawRecord& out) const;

 private:
  bool valid_record(const EntryCopy& e, const RecordHeader& h) const;

  // The geometry as validated at attach time: the segment is writable by
  // other processes, so bounds are never re-read from it.
  struct Geometry {
    uint64_t index_offset = 0, index_entries = 0, data_offset = 0, data_bytes = 0;
    uint64_t pin_index_offset = 0, pin_index_entries = 0, pin_data_offset = 0, pin_data_bytes = 0;
    int64_t hidden = 0, k = 0;
    uint8_t dtype = 0;
  };
  Geometry geo_;
  ShmSegment segment_;
  uint8_t* base_ = nullptr;
  SegmentHeader* header_ = nullptr;
  uint64_t max_record_ = 0;
  mutable std::vector<uint8_t> buf_;
};

}  // namespace nnsight::capture
