// nnsight capture-read: prints the records of a running engine's capture
// ring (docs/capture.md), one line each:
//   seq=.. request=.. step=.. layer=.. pos=.. norm=.. values=[first few]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>

#include <nnsight/capture.hpp>

#include "front/cli/cli_args.h"
#include "front/cli/commands.h"

namespace nnsight::cli {

namespace {
const char* kHelp =
    "usage: nnsight capture-read --engine-id ID [--rank R] [--request ID] [--since SEQ | --latest N]\n"
    "                            [--follow] [--values N] [--info] [--mark] [--save FILE]\n"
    "  --engine-id ID   the engine's id (EngineArgs.engine_id; default: its process id)\n"
    "  --rank R         worker rank (default 0)\n"
    "  --request ID     only this request's records\n"
    "  --since SEQ      records with seq > SEQ (default 0: everything still in the ring)\n"
    "  --latest N       the newest N records\n"
    "  --follow         keep printing new records until the engine stops\n"
    "  --values N       values printed per record (default 4)\n"
    "  --info           print the segment's settings first\n"
    "  --mark           with --request: keep its records from being overwritten\n"
    "  --save FILE      with --request: write its records to a safetensors file\n";

void print_record(const CaptureRecord& r, int64_t values) {
  const at::Tensor v = r.value.to(at::kFloat).contiguous();
  const float* p = v.data_ptr<float>();
  double sq = 0;
  for (int64_t i = 0; i < v.numel(); ++i) sq += double(p[i]) * p[i];
  std::printf("seq=%llu request=%llu step=%lld layer=%d pos=%lld norm=%.6g%s values=[",
              static_cast<unsigned long long>(r.seq), static_cast<unsigned long long>(r.request_id),
              static_cast<long long>(r.step), r.layer, static_cast<long long>(r.position), std::sqrt(sq),
              r.reconstructed ? " reconstructed" : (r.pinned ? " pinned" : ""));
  for (int64_t i = 0; i < std::min<int64_t>(values, v.numel()); ++i) std::printf(i ? ", %.6g" : "%.6g", p[i]);
  std::printf("]\n");
}
}  // namespace

int capture_read_command(int argc, char** argv) {
  const std::vector<std::string> known = {"engine-id", "rank", "request", "since", "latest", "follow",
                                          "values",    "info", "mark",    "save",  "help"};
  CliArgs args(argc, argv, 2, {"follow", "info", "mark", "help"}, known);
  if (args.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (!args.has("engine-id")) throw std::invalid_argument("give --engine-id ID");
  if ((args.has("mark") || args.has("save")) && !args.has("request"))
    throw std::invalid_argument("--mark and --save need --request ID");
  if (args.has("since") && args.has("latest")) throw std::invalid_argument("give --since or --latest, not both");
  const int64_t values = args.get_int("values", 4);
  ActivationReader reader(args.get("engine-id"), static_cast<int>(args.get_int("rank", 0)));

  if (args.has("info")) {
    const CaptureInfo i = reader.info();
    std::string layers;
    for (int32_t l : i.layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    std::printf(
        "engine=%s rank=%d pid=%lld hidden=%lld dtype=%s layers=[%s] compression_k=%lld sample_rate=%g "
        "ring_bytes=%llu last_seq=%llu pinned=%llu%s\n",
        i.engine_id.c_str(), i.rank, static_cast<long long>(i.owner_pid), static_cast<long long>(i.hidden_size),
        i.dtype.c_str(), layers.c_str(), static_cast<long long>(i.compression_k), i.sample_rate,
        static_cast<unsigned long long>(i.ring_bytes), static_cast<unsigned long long>(i.last_seq),
        static_cast<unsigned long long>(i.pinned_records), i.writer_closed ? " closed" : "");
  }
  const bool one_request = args.has("request");
  const uint64_t request = one_request ? static_cast<uint64_t>(args.get_int("request", 0)) : 0;
  if (args.has("mark") && !reader.mark(request)) throw std::runtime_error("the segment's mark table is full");
  if (args.has("save")) {
    const size_t n = reader.save_request(request, args.get("save"));
    std::fprintf(stderr, "nnsight capture-read: wrote %zu records to %s\n", n, args.get("save").c_str());
  }

  uint64_t last = static_cast<uint64_t>(args.get_int("since", 0));
  auto show = [&](const std::vector<CaptureRecord>& records) {
    for (const auto& r : records) {
      last = std::max(last, r.seq);
      if (!one_request || r.request_id == request) print_record(r, values);
    }
    std::fflush(stdout);
  };
  if (args.has("latest")) {
    show(reader.latest(static_cast<size_t>(std::max<int64_t>(0, args.get_int("latest", 0)))));
  } else if (one_request && !args.has("since") && !args.has("follow")) {
    show(reader.request(request));
  } else {
    show(reader.since(last));
  }
  while (args.has("follow")) {
    auto records = reader.since(last);
    if (!records.empty()) {
      show(records);
      continue;
    }
    if (!reader.writer_alive()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (reader.overwritten() > 0)
    std::fprintf(stderr, "nnsight capture-read: %llu records were overwritten before they could be read\n",
                 static_cast<unsigned long long>(reader.overwritten()));
  return 0;
}

}  // namespace nnsight::cli
