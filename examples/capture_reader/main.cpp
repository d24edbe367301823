// capture_reader: follows the activation capture of a running engine from
// another process, prints one line per engine step it sees, and can save
// everything it received to a safetensors file when the engine stops.
//
//   nnsight generate --capture --engine-id demo --prompt "..." &
//   capture_reader --engine-id demo --out acts.safetensors
//
// Options: --engine-id ID (required)  --rank R  --out FILE
//          --wait-s S (wait this long for the engine to appear, default 30)
//          --quiet (no per-step lines)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nnsight/capture.hpp>
#include <nnsight/error.hpp>

int main(int argc, char** argv) {
  std::string engine_id, out;
  int rank = 0;
  double wait_s = 30;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "capture_reader: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--engine-id")
      engine_id = value();
    else if (a == "--rank")
      rank = std::atoi(value().c_str());
    else if (a == "--out")
      out = value();
    else if (a == "--wait-s")
      wait_s = std::atof(value().c_str());
    else if (a == "--quiet")
      quiet = true;
    else {
      std::fprintf(stderr, "usage: capture_reader --engine-id ID [--rank R] [--out FILE] [--wait-s S] [--quiet]\n");
      return 2;
    }
  }
  if (engine_id.empty()) {
    std::fprintf(stderr, "capture_reader: give --engine-id ID\n");
    return 2;
  }

  // The engine creates its segment while it starts: wait for it.
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(wait_s);
  std::unique_ptr<nnsight::ActivationReader> reader;
  while (!reader) {
    try {
      reader = std::make_unique<nnsight::ActivationReader>(engine_id, rank);
    } catch (const nnsight::Error& e) {
      if (clock::now() > deadline) {
        std::fprintf(stderr, "capture_reader: %s\n", e.what());
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const nnsight::CaptureInfo info = reader->info();
  std::fprintf(stderr, "capture_reader: attached to engine '%s' rank %d (pid %lld, hidden %lld, %zu layers)\n",
               info.engine_id.c_str(), rank, static_cast<long long>(info.owner_pid),
               static_cast<long long>(info.hidden_size), info.layers.size());

  std::vector<nnsight::CaptureRecord> kept;
  uint64_t last = 0;
  for (;;) {
    // Check liveness before reading, so the records of the last step are
    // read after the writer closed, not lost.
    const bool alive = reader->writer_alive();
    std::vector<nnsight::CaptureRecord> records = reader->since(last);
    if (!records.empty()) {
      last = records.back().seq;
      if (!quiet) {
        std::map<uint64_t, int> per_request;
        for (const auto& r : records) per_request[r.request_id]++;
        std::printf("%zu records (%zu requests), last seq %llu\n", records.size(), per_request.size(),
                    static_cast<unsigned long long>(last));
        std::fflush(stdout);
      }
      if (!out.empty()) kept.insert(kept.end(), records.begin(), records.end());
      continue;
    }
    if (!alive) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (reader->overwritten() > 0)
    std::fprintf(stderr, "capture_reader: %llu records were overwritten before they were read\n",
                 static_cast<unsigned long long>(reader->overwritten()));
  if (!out.empty()) {
    nnsight::write_capture_records(out, kept);
    std::fprintf(stderr, "capture_reader: wrote %zu records to %s\n", kept.size(), out.c_str());
  }
  return 0;
}
