// The capture ring on its own: records round-trip; old records are
// overwritten and reported, never returned torn, even when a writer laps a
// reader that is copying; marks keep records; stale segments are replaced;
// hostile segments are refused or skipped without crashing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include <nnsight/capture.hpp>
#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_file.h"
#include "front/capture/ring_reader.h"
#include "front/capture/ring_writer.h"
#include "support/log_capture.h"
#include "support/scratch_dir.h"

namespace nnsight::capture {
namespace {

std::string unique_id(const std::string& tag) {
  static int counter = 0;
  return "ringtest-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(counter++);
}

// Every value of a record encodes its seq, so a mix of two records shows.
float value_for(uint64_t seq, int64_t i) { return static_cast<float>(seq % 100000) + 0.001f * static_cast<float>(i); }

uint64_t append_dense(RingWriter& w, uint64_t request, int64_t step, int32_t layer, int64_t hidden) {
  std::vector<float> v(static_cast<size_t>(hidden));
  const uint64_t seq = w.next_seq();
  for (int64_t i = 0; i < hidden; ++i) v[static_cast<size_t>(i)] = value_for(seq, i);
  RecordMeta m;
  m.request_id = request;
  m.step = step;
  m.position = step + 10;
  m.layer = layer;
  m.shape0 = hidden;
  return w.append(m, v.data(), v.size() * 4);
}

void expect_consistent(const CaptureRecord& r, int64_t hidden) {
  ASSERT_EQ(r.value.numel(), hidden);
  const float* p = r.value.data_ptr<float>();
  for (int64_t i = 0; i < hidden; ++i) ASSERT_EQ(p[i], value_for(r.seq, i)) << "record " << r.seq << " is torn";
}

TEST(CaptureRing, RecordsRoundTripAfterPublish) {
  const std::string id = unique_id("rt");
  RingWriter w(RingOptions().with_engine_id(id).with_buffer_bytes(1 << 20).with_hidden_size(8).with_layers({1, 3}));
  ActivationReader reader(id);
  const CaptureInfo info = reader.info();
  EXPECT_EQ(info.hidden_size, 8);
  EXPECT_EQ(info.layers, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(info.owner_pid, ::getpid());
  EXPECT_TRUE(reader.writer_alive());
  for (int i = 0; i < 5; ++i) append_dense(w, 40 + i % 2, i, i % 2 ? 3 : 1, 8);
  EXPECT_TRUE(reader.since(0).empty()) << "nothing is visible before publish";
  w.publish();
  auto all = reader.since(0);
  ASSERT_EQ(all.size(), 5u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seq, i + 1);
    EXPECT_EQ(all[i].request_id, 40 + i % 2);
    EXPECT_EQ(all[i].step, static_cast<int64_t>(i));
    EXPECT_EQ(all[i].position, static_cast<int64_t>(i) + 10);
    EXPECT_EQ(all[i].layer, i % 2 ? 3 : 1);
    EXPECT_FALSE(all[i].reconstructed);
    expect_consistent(all[i], 8);
  }
  EXPECT_EQ(reader.since(3).size(), 2u);
  EXPECT_EQ(reader.request(41).size(), 2u);
  auto latest = reader.latest(2);
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].seq, 4u);
  EXPECT_EQ(latest[1].seq, 5u);
  EXPECT_EQ(reader.overwritten(), 0u);
}

TEST(CaptureRing, OldRecordsAreOverwrittenAndCounted) {
  const std::string id = unique_id("ow");
  RingWriter w(RingOptions().with_engine_id(id).with_buffer_bytes(64 << 10).with_hidden_size(16));
  ActivationReader reader(id);
  const uint64_t n = 5000;
  for (uint64_t i = 0; i < n; ++i) append_dense(w, i, 0, 0, 16);
  w.publish();
  auto all = reader.since(0);
  ASSERT_FALSE(all.empty());
  EXPECT_LT(all.size(), n);
  EXPECT_EQ(all.back().seq, n);
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_EQ(all[i].seq, all[i - 1].seq + 1) << "the survivors are the newest, contiguous";
  for (const auto& r : all) expect_consistent(r, 16);
  EXPECT_EQ(reader.overwritten(), n - all.size());
}

TEST(CaptureRing, ReaderRacingALappingWriterNeverReturnsTornRecords) {
  const std::string id = unique_id("race");
  const int64_t hidden = 64;
  // A tiny ring (about 150 records) that the writer laps many times over.
  RingWriter w(RingOptions().with_engine_id(id).with_buffer_bytes(64 << 10).with_hidden_size(hidden));
  ActivationReader reader(id);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    uint64_t i = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      append_dense(w, i, static_cast<int64_t>(i), 0, hidden);
      if (++i % 8 == 0) w.publish();
    }
  });
  uint64_t returned = 0, last = 0;
  std::mt19937 rng(3);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < end) {
    auto records = (rng() % 3 == 0) ? reader.latest(50) : reader.since(last);
    for (const auto& r : records) {
      expect_consistent(r, hidden);
      ASSERT_EQ(r.request_id + 1, r.seq) << "header fields belong to the same record as the values";
      ASSERT_EQ(r.step + 1, static_cast<int64_t>(r.seq));
      last = std::max(last, r.seq);
    }
    returned += records.size();
    if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
  }
  stop = true;
  writer.join();
  EXPECT_GT(returned, 100u);
  EXPECT_GT(reader.overwritten(), 0u) << "the writer must have lapped the reader for the test to mean anything";
}

// The same race at the byte level, with records of three sizes so a new
// record's header can land anywhere inside an old one.
TEST(CaptureRing, MixedSizeRecordsNeverTornAtTheByteLevel) {
  const std::string id = unique_id("bytes");
  const int64_t hidden = 24, k = 4;
  RingWriter w(
      RingOptions().with_engine_id(id).with_buffer_bytes(48 << 10).with_hidden_size(hidden).with_compression_k(k));
  RingReader ring(capture_segment_name(id, 0));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::vector<float> buf(static_cast<size_t>(k * hidden));
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      RecordMeta m;
      m.request_id = i;
      const uint64_t seq = w.next_seq();
      switch (i % 3) {
        case 0:
          m.kind = RecordKind::kDense;
          m.shape0 = hidden;
          break;
        case 1:
          m.kind = RecordKind::kCoefficients;
          m.shape0 = k;
          m.basis_seq = seq + 1;
          break;
        default:
          m.kind = RecordKind::kBasis;
          m.shape0 = k;
          m.shape1 = hidden;
          break;
      }
      const int64_t n = m.shape0 * std::max<int64_t>(m.shape1, 1);
      for (int64_t j = 0; j < n; ++j) buf[static_cast<size_t>(j)] = value_for(seq, j);
      w.append(m, buf.data(), static_cast<uint64_t>(n) * 4);
      if (i % 5 == 0) w.publish();
    }
  });
  uint64_t good = 0, lost = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
  while (std::chrono::steady_clock::now() < end) {
    const uint64_t hi = ring.published();
    for (uint64_t s = ring.oldest_indexed(hi); s <= hi && s != 0; ++s) {
      EntryCopy e;
      RawRecord r;
      if (!ring.entry(s, e) || !ring.read(e, false, r)) {
        ++lost;
        continue;
      }
      ASSERT_EQ(r.header.seq, s);
      ASSERT_EQ(r.header.request_id % 3, static_cast<uint64_t>(r.header.kind == 1 ? 0 : r.header.kind == 2 ? 1 : 2));
      const auto* p = reinterpret_cast<const float*>(r.payload);
      for (uint64_t j = 0; j < r.payload_bytes / 4; ++j)
        ASSERT_EQ(p[j], value_for(s, static_cast<int64_t>(j))) << "record " << s << " torn at value " << j;
      ++good;
    }
  }
  stop = true;
  writer.join();
  EXPECT_GT(good, 100u);
  EXPECT_GT(lost, 0u);
}

TEST(CaptureRing, MarkedRequestsSurviveOverwritesAndSave) {
  const std::string id = unique_id("mark");
  RingWriter w(RingOptions().with_engine_id(id).with_buffer_bytes(64 << 10).with_hidden_size(16).with_layers({0, 1}));
  ActivationReader reader(id);
  ASSERT_TRUE(reader.mark(7));
  ASSERT_TRUE(reader.mark(8));
  reader.unmark(8);
  EXPECT_FALSE(reader.mark(0));
  w.publish();                          // the writer picks marks up at its step boundary
  std::map<uint64_t, uint64_t> seq_of;  // request 7's and 8's records: seq -> step
  for (uint64_t i = 0; i < 4000; ++i) {
    const uint64_t request = (i % 500 == 3) ? 7 : (i % 500 == 4) ? 8 : 100 + i;
    const int64_t step = static_cast<int64_t>(i / 500);
    const uint64_t seq = append_dense(w, request, step, static_cast<int32_t>(step % 2), 16);
    if (request == 7) seq_of[seq] = static_cast<uint64_t>(step);
    if (i % 50 == 0) w.publish();
  }
  w.publish();
  auto kept = reader.request(7);
  ASSERT_EQ(kept.size(), 8u);
  for (const auto& r : kept) {
    EXPECT_TRUE(r.pinned);
    EXPECT_EQ(seq_of.at(r.seq), static_cast<uint64_t>(r.step));
    expect_consistent(r, 16);
  }
  EXPECT_TRUE(reader.request(8).empty()) << "an unmarked request is not kept";
  EXPECT_EQ(reader.info().pinned_records, 8u);

  testing::ScratchDir dir;
  EXPECT_EQ(reader.save_request(7, dir.file("r7.safetensors")), 8u);
  SafetensorsFile f(dir.file("r7.safetensors"));
  EXPECT_EQ(f.metadata().at("request_id"), "7");
  for (int layer : {0, 1}) {
    at::Tensor values = f.load("layers." + std::to_string(layer));  // [4, 16]
    at::Tensor steps = f.load("layers." + std::to_string(layer) + ".steps");
    ASSERT_EQ(values.size(0), 4);
    size_t row = 0;
    for (const auto& r : kept) {
      if (r.layer != layer) continue;
      EXPECT_TRUE(at::equal(values[static_cast<int64_t>(row)], r.value));
      EXPECT_EQ(steps[static_cast<int64_t>(row)].item<int64_t>(), r.step);
      ++row;
    }
  }
  EXPECT_THROW(reader.save_request(12345, dir.file("none.safetensors")), Error);
}

TEST(CaptureRing, CompressedRowsReconstructFromTheirBasis) {
  const std::string id = unique_id("basis");
  const int64_t hidden = 6, k = 2, n = 3;
  RingWriter w(
      RingOptions().with_engine_id(id).with_buffer_bytes(1 << 20).with_hidden_size(hidden).with_compression_k(k));
  ActivationReader reader(id);
  const float coeff[n][k] = {{1, 2}, {0, -1}, {3, 0.5f}};
  const float basis[k][hidden] = {{1, 0, 0, 1, 0, 2}, {0, 1, 1, 0, -1, 0}};
  const uint64_t basis_seq = w.next_seq() + n;
  for (int64_t i = 0; i < n; ++i) {
    RecordMeta m;
    m.request_id = static_cast<uint64_t>(i + 1);
    m.kind = RecordKind::kCoefficients;
    m.shape0 = k;
    m.basis_seq = basis_seq;
    w.append(m, coeff[i], k * 4);
  }
  RecordMeta b;
  b.kind = RecordKind::kBasis;
  b.shape0 = k;
  b.shape1 = hidden;
  w.append(b, basis, k * hidden * 4);
  w.publish();
  auto all = reader.since(0);
  ASSERT_EQ(all.size(), 3u) << "basis records are internal";
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE(all[static_cast<size_t>(i)].reconstructed);
    for (int64_t j = 0; j < hidden; ++j) {
      const float expected = coeff[i][0] * basis[0][j] + coeff[i][1] * basis[1][j];
      EXPECT_FLOAT_EQ(all[static_cast<size_t>(i)].value[j].item<float>(), expected);
    }
  }
}

TEST(CaptureRing, SegmentIsUnlinkedOnCleanShutdown) {
  const std::string id = unique_id("unlink");
  auto w =
      std::make_unique<RingWriter>(RingOptions().with_engine_id(id).with_buffer_bytes(1 << 20).with_hidden_size(4));
  ActivationReader attached(id);
  append_dense(*w, 1, 0, 0, 4);
  w->publish();
  w.reset();
  EXPECT_FALSE(attached.writer_alive());
  EXPECT_TRUE(attached.info().writer_closed);
  EXPECT_EQ(attached.since(0).size(), 1u) << "a reader still attached keeps its mapping";
  try {
    ActivationReader late(id);
    FAIL() << "the segment must be gone";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "capture: no shared-memory segment '/nnsight-capture-" + id +
                                         "-r0' (is the engine running with capture on?)");
  }
}

TEST(CaptureRing, LiveWriterOwnsItsName) {
  const std::string id = unique_id("busy");
  RingWriter w(RingOptions().with_engine_id(id).with_buffer_bytes(1 << 20).with_hidden_size(4));
  try {
    RingWriter second(RingOptions().with_engine_id(id).with_buffer_bytes(1 << 20).with_hidden_size(4));
    FAIL() << "two writers must not share a segment";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "capture: shared memory '/nnsight-capture-" + id +
                                         "-r0' belongs to the running process " + std::to_string(::getpid()) +
                                         " (another engine with engine id '" + id +
                                         "'); give this engine another EngineArgs.engine_id");
  }
  // Another rank is another segment.
  RingWriter rank1(RingOptions().with_engine_id(id).with_rank(1).with_buffer_bytes(1 << 20).with_hidden_size(4));
  EXPECT_EQ(rank1.name(), "/nnsight-capture-" + id + "-r1");
}

int64_t dead_pid() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  int64_t max = 4194304;
  in >> max;
  return max + 1;  // no process can have it
}

TEST(CaptureRing, StaleSegmentOfACrashedEngineIsReplaced) {
  const std::string id = unique_id("stale");
  const std::string name = capture_segment_name(id, 0);
  {
    ShmSegment seg;
    ASSERT_TRUE(ShmSegment::create(name, 8192, seg));
    auto* h = static_cast<SegmentHeader*>(seg.data());
    h->owner_pid = dead_pid();
    h->magic.store(kSegmentMagic);
  }
  testing::LogCapture log;
  RingWriter w(RingOptions().with_engine_id(id).with_buffer_bytes(1 << 20).with_hidden_size(4));
  EXPECT_TRUE(log.has(LogLevel::kWarning, "capture: replacing the stale segment '" + name + "' left by process " +
                                              std::to_string(dead_pid()) + ", which is gone"));
  append_dense(w, 1, 0, 0, 4);
  w.publish();
  EXPECT_EQ(ActivationReader(id).since(0).size(), 1u);
}

TEST(CaptureRing, HostileSegmentsAreRefusedNotTrusted) {
  const std::string id = unique_id("hostile");
  const std::string name = capture_segment_name(id, 0);
  auto attach_error = [&] {
    try {
      ActivationReader r(id);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(attached)");
  };
  {
    ShmSegment seg;
    ASSERT_TRUE(ShmSegment::create(name, 100, seg));
  }
  EXPECT_EQ(attach_error(), "capture: '" + name + "' is not a readable capture segment: only 100 bytes");
  ShmSegment::unlink(name);
  {
    ShmSegment seg;
    ASSERT_TRUE(ShmSegment::create(name, 1 << 16, seg));
    auto* h = static_cast<SegmentHeader*>(seg.data());
    h->version = kSegmentVersion;
    h->header_bytes = kHeaderBytes;
    h->total_bytes = 1 << 16;
    h->index_offset = kHeaderBytes;
    h->index_entries = 1ull << 40;  // far outside the segment
    h->data_offset = kHeaderBytes;
    h->data_bytes = 1024;
    h->magic.store(kSegmentMagic);
  }
  EXPECT_EQ(attach_error(),
            "capture: '" + name + "' is not a readable capture segment: a region lies outside the segment");
  ShmSegment::unlink(name);

  // A valid geometry whose index and data are garbage, with a huge published
  // counter: reading must skip everything without crashing.
  {
    RingWriter w(RingOptions().with_engine_id(id).with_buffer_bytes(64 << 10).with_hidden_size(8));
    ActivationReader reader(id);
    auto* base = static_cast<uint8_t*>(const_cast<void*>(static_cast<const void*>(&w.header())));
    std::mt19937_64 rng(11);
    for (uint64_t off = kHeaderBytes; off < w.header().pin_data_offset + w.header().pin_data_bytes; off += 8) {
      const uint64_t x = rng();
      std::memcpy(base + off, &x, 8);
    }
    auto& hh = const_cast<SegmentHeader&>(w.header());
    hh.published.store(1u << 20);
    hh.pin_count.store(1u << 30);
    EXPECT_TRUE(reader.since(0).empty());
    EXPECT_TRUE(reader.request(3).empty());
    EXPECT_TRUE(reader.latest(10).empty());
    EXPECT_GT(reader.overwritten(), 0u);
  }
}

TEST(CaptureRing, EngineIdsAreChecked) {
  EXPECT_THROW(capture_segment_name("bad/id", 0), ConfigError);
  EXPECT_THROW(capture_segment_name("", 0), ConfigError);
  EXPECT_THROW(capture_segment_name(std::string(65, 'a'), 0), ConfigError);
  EXPECT_EQ(capture_segment_name("my-engine_1.a", 2), "/nnsight-capture-my-engine_1.a-r2");
}

}  // namespace
}  // namespace nnsight::capture
