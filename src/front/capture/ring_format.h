// The binary layout of a capture segment, shared by the writer (in the
// engine's worker) and ActivationReader (in any process). docs/capture.md
// describes it for readers in other languages.
//
//   [SegmentHeader: 4096 bytes]
//   [index: index_entries x IndexEntry]          main ring index, entry = seq % index_entries
//   [data: data_bytes]                           records, appended at a virtual byte offset
//   [pin index: pin_index_entries x IndexEntry]  records kept by marks (append-only)
//   [pin data: pin_data_bytes]
//
// Records: a RecordHeader then the payload (row-major values), padded to 64
// bytes. A record never straddles the end of the data area (the writer skips
// to the start instead). Virtual offsets grow without bound; the physical
// offset is virtual % data_bytes.
//
// Consistency without locks (the writer never waits):
//   - an index entry is written seqlock-style: seq_begin, fence, fields,
//     seq_end (release); a reader copies the entry, fences, re-reads
//     seq_begin and uses the copy only when both equal the seq it wanted;
//   - before overwriting data bytes below virtual offset V + data_bytes the
//     writer raises `reclaim` to V (then fences); a reader copies a record,
//     fences, and keeps the copy only if its offset is still >= reclaim;
//   - `published` (release) is the newest seq whose record, entry and (for
//     compressed rows) basis are complete; readers never look past it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace nnsight::capture {

constexpr uint64_t kSegmentMagic = 0x3130504143534e4eULL;  // "NNSCAP01" little-endian
constexpr uint32_t kSegmentVersion = 1;
constexpr uint64_t kHeaderBytes = 4096;
constexpr uint64_t kAlign = 64;
constexpr int kMaxLayers = 256;
constexpr int kMaxMarks = 64;
constexpr size_t kEngineIdMax = 64;

enum class RecordKind : uint8_t {
  kDense = 1,         // payload: the row, [hidden] in the engine dtype
  kCoefficients = 2,  // payload: float32 [k]; value = coefficients @ basis
  kBasis = 3,         // payload: float32 [k, hidden], shared by one step's rows of one layer
};

enum class DType : uint8_t { kFloat32 = 1, kBFloat16 = 2, kFloat16 = 3 };

inline size_t dtype_size(DType d) { return d == DType::kFloat32 ? 4 : 2; }
inline bool dtype_valid(uint8_t d) { return d >= 1 && d <= 3; }
inline const char* dtype_name(DType d) {
  return d == DType::kFloat32 ? "float32" : d == DType::kBFloat16 ? "bfloat16" : "float16";
}

struct RecordHeader {  // 64 bytes
  uint64_t seq;
  uint64_t request_id;  // 0 for a basis record
  int64_t step;         // generation step (0 = prefill)
  int64_t position;     // token position in the request's sequence
  uint64_t basis_seq;   // kCoefficients: seq of the basis record; else 0
  int32_t layer;
  uint8_t kind;   // RecordKind
  uint8_t dtype;  // DType of the payload
  uint8_t ndim;   // 1 or 2
  uint8_t reserved;
  int64_t shape[2];  // shape[1] unused when ndim == 1
};
static_assert(sizeof(RecordHeader) == 64, "RecordHeader must stay 64 bytes");

struct IndexEntry {  // 64 bytes
  std::atomic<uint64_t> seq_begin;
  uint64_t offset;  // virtual offset in the data area (pin area: offset from its start)
  uint64_t request_id;
  int64_t step;
  uint32_t bytes;  // the record's size, header and padding included
  int32_t layer;
  uint8_t kind;
  uint8_t reserved[7];
  std::atomic<uint64_t> seq_end;
  uint64_t reserved2;
};
static_assert(sizeof(IndexEntry) == 64, "IndexEntry must stay 64 bytes");

// A plain copy of an entry's fields (what a reader validated).
struct EntryCopy {
  uint64_t seq = 0, offset = 0, request_id = 0;
  int64_t step = 0;
  uint32_t bytes = 0;
  int32_t layer = 0;
  uint8_t kind = 0;
};

struct SegmentHeader {
  std::atomic<uint64_t> magic;  // stored last (release) when the segment is ready
  uint32_t version;
  uint32_t header_bytes;
  uint64_t total_bytes;
  int64_t owner_pid;
  uint64_t owner_start_ticks;  // /proc/<pid>/stat start time: tells a reused pid apart
  uint64_t index_offset, index_entries;
  uint64_t data_offset, data_bytes;
  uint64_t pin_index_offset, pin_index_entries;
  uint64_t pin_data_offset, pin_data_bytes;
  int64_t hidden_size;
  int32_t rank;
  uint8_t dtype;
  uint8_t reserved0[3];
  int32_t compression_k;
  int32_t num_layers;
  double sample_rate;
  int32_t layers[kMaxLayers];
  char engine_id[kEngineIdMax + 8];

  alignas(64) std::atomic<uint64_t> published;        // newest complete seq (0 = none)
  alignas(64) std::atomic<uint64_t> reclaim;          // data bytes below this virtual offset may be overwritten
  alignas(64) std::atomic<uint64_t> pin_count;        // pin entries written
  std::atomic<uint64_t> pin_dropped;                  // marked records not kept (pin area full)
  std::atomic<uint32_t> closed;                       // 1 after a clean shutdown
  alignas(64) std::atomic<uint64_t> mark_generation;  // bumped by readers on every mark change
  std::atomic<uint64_t> marks[kMaxMarks];             // marked request ids (0 = free)
};
static_assert(sizeof(SegmentHeader) <= kHeaderBytes, "SegmentHeader must fit its page");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "cross-process atomics need lock-free uint64");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "cross-process atomics need lock-free uint32");

inline uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Bytes a record with this payload occupies.
inline uint64_t record_bytes(uint64_t payload) { return align_up(sizeof(RecordHeader) + payload, kAlign); }

}  // namespace nnsight::capture
