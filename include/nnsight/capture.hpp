// Reading single-pass activation capture from another process (docs/capture.md).
//
// An engine started with capture on writes, during the forward pass that
// generates the text, the output of the chosen decoder layers at each
// request's last scheduled token into a POSIX shared-memory ring per worker
// rank ("/nnsight-capture-<engine_id>-r<rank>"). The writer never waits:
// old records are overwritten. ActivationReader attaches to that ring,
// copies records out and checks, record by record, that the writer did not
// overwrite them during the copy; a record that was overwritten is skipped
// (and counted), never returned torn.
//
//   nnsight::ActivationReader reader("my-engine");          // rank 0
//   uint64_t last = 0;
//   for (;;) {
//     for (auto& r : reader.since(last)) { last = r.seq; use(r.request_id, r.layer, r.value); }
//     std::this_thread::sleep_for(std::chrono::milliseconds(10));
//   }
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nnsight {

// One captured activation: a decoder layer's output row for one request at
// one step.
struct CaptureRecord {
  uint64_t seq = 0;  // sequence number in its ring: increasing, unique (not contiguous)
  uint64_t request_id = 0;
  int64_t step = 0;            // generation step: 0 = prefill (every chunk), n = the forward after n output tokens
  int32_t layer = 0;           // decoder layer index
  int64_t position = 0;        // position of the token in the request's sequence
  at::Tensor value;            // [hidden]; the engine's dtype, or float32 when reconstructed
  bool reconstructed = false;  // rebuilt from a rank-k factorization (compression on)
  bool pinned = false;         // kept by mark() after the ring overwrote it
};

// What the writer put in the segment header.
struct CaptureInfo {
  std::string engine_id;
  int rank = 0;
  int64_t owner_pid = 0;  // the process writing the ring
  int64_t hidden_size = 0;
  std::string dtype;            // "float32", "bfloat16" or "float16"
  std::vector<int32_t> layers;  // captured decoder layers
  int64_t compression_k = 0;    // 0 = records hold the values themselves
  double sample_rate = 1.0;
  uint64_t ring_bytes = 0;      // data ring capacity
  uint64_t index_entries = 0;   // records findable at once (at most)
  uint64_t last_seq = 0;        // newest published record
  uint64_t pinned_records = 0;  // records kept by marks
  uint64_t pins_dropped = 0;    // marked records lost because the pinned area was full
  bool writer_closed = false;   // the engine shut down cleanly
};

class ActivationReader {
 public:
  // Attaches to the ring of engine `engine_id`, worker rank `rank`. Throws
  // nnsight::Error when there is no such segment, or it is not a capture
  // segment this version can read (the message says which check failed).
  explicit ActivationReader(const std::string& engine_id, int rank = 0);
  ~ActivationReader();
  ActivationReader(ActivationReader&&) noexcept;
  ActivationReader& operator=(ActivationReader&&) noexcept;
  ActivationReader(const ActivationReader&) = delete;
  ActivationReader& operator=(const ActivationReader&) = delete;

  CaptureInfo info() const;
  // The newest published sequence number (0 = nothing written yet).
  uint64_t last_seq() const;
  // Whether the writing process is alive and has not closed the ring.
  bool writer_alive() const;

  // The newest `n` records still in the ring, oldest first.
  std::vector<CaptureRecord> latest(size_t n) const;
  // Every record of one request still in the ring or pinned, oldest first.
  std::vector<CaptureRecord> request(uint64_t request_id) const;
  // Every record with seq > `after_seq` still in the ring or pinned, oldest
  // first: since(0) is everything; since(last returned seq) follows the ring.
  std::vector<CaptureRecord> since(uint64_t after_seq) const;

  // Records skipped because the writer overwrote them before or while this
  // reader copied them (cumulative for this reader).
  uint64_t overwritten() const;

  // Post-hoc marking: asks the writer to keep this request's records when
  // the ring would overwrite them (they move to a pinned area of the
  // segment, of bounded size). Takes effect from the writer's next step;
  // records already overwritten are gone. Returns false when the mark table
  // is full.
  bool mark(uint64_t request_id);
  void unmark(uint64_t request_id);
  // Writes every record of the request to a safetensors file: per layer L,
  // "layers.L" [n, hidden] (float32), "layers.L.steps" [n] and
  // "layers.L.positions" [n] (int64), in step order. Returns the number of
  // records written; throws nnsight::Error when there is none or on I/O errors.
  size_t save_request(uint64_t request_id, const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The shared-memory name of an engine's ring ("/nnsight-capture-<id>-r<rank>").
// Throws ConfigError for an engine id outside [A-Za-z0-9._-]{1,64}.
std::string capture_segment_name(const std::string& engine_id, int rank);

// Writes records to a safetensors file, one row each, in the given order:
// "values" [n, hidden] float32, and int64 [n] "seq", "request_id", "step",
// "layer", "position". Throws nnsight::Error on I/O errors or if the
// records' sizes differ.
void write_capture_records(const std::string& path, const std::vector<CaptureRecord>& records);

}  // namespace nnsight
