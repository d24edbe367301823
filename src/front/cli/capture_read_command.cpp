// nnsight capture-read: prints the records of a running engine's capture
// ring (docs/capture.md), one line each:
//   seq=.. request=.. step=.. layer=.. pos=.. norm=.. values=[first few]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>

#include <nnsight/capture.hpp>

#include "front/cli/cli_options.h"
#include "front/cli/commands.h"

namespace nnsight::cli {

namespace {
struct CaptureReadOptions {
  std::string engine_id, save;
  int64_t rank = 0, request = 0, since = 0, latest = 0, values = 4;
  bool follow = false, info = false, mark = false;
};

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
int run(const CLI::App& cmd, const CaptureReadOptions& o) {
  const int64_t values = o.values;
  ActivationReader reader(o.engine_id, static_cast<int>(o.rank));

  if (o.info) {
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
  const bool one_request = cmd.count("--request") > 0;
  const uint64_t request = static_cast<uint64_t>(o.request);
  if (o.mark && !reader.mark(request)) throw std::runtime_error("the segment's mark table is full");
  if (!o.save.empty()) {
    const size_t n = reader.save_request(request, o.save);
    std::fprintf(stderr, "nnsight capture-read: wrote %zu records to %s\n", n, o.save.c_str());
  }

  uint64_t last = static_cast<uint64_t>(o.since);
  auto show = [&](const std::vector<CaptureRecord>& records) {
    for (const auto& r : records) {
      last = std::max(last, r.seq);
      if (!one_request || r.request_id == request) print_record(r, values);
    }
    std::fflush(stdout);
  };
  if (cmd.count("--latest")) {
    show(reader.latest(static_cast<size_t>(o.latest)));
  } else if (one_request && !cmd.count("--since") && !o.follow) {
    show(reader.request(request));
  } else {
    show(reader.since(last));
  }
  while (o.follow) {
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

}  // namespace

RunCommand add_capture_read_command(CLI::App& root) {
  auto o = std::make_shared<CaptureReadOptions>();
  CLI::App& cmd = *root.add_subcommand("capture-read", "print activations a running engine captures (docs/capture.md)");
  cmd.add_option("--engine-id", o->engine_id, "the engine's id (EngineArgs.engine_id; default: its process id)")
      ->required();
  add_integer(cmd, "--rank", o->rank, "worker rank", 0, 1023);
  CLI::Option* request = add_integer(cmd, "--request", o->request, "only this request's records", 0);
  CLI::Option* since =
      add_integer(cmd, "--since", o->since, "records with seq > SEQ (0: everything still in the ring)", 0);
  add_integer(cmd, "--latest", o->latest, "the newest N records", 0)->excludes(since);
  cmd.add_flag("--follow", o->follow, "keep printing new records until the engine stops");
  add_integer(cmd, "--values", o->values, "values printed per record", 0);
  cmd.add_flag("--info", o->info, "print the segment's settings first");
  cmd.add_flag("--mark", o->mark, "keep the request's records from being overwritten")->needs(request);
  cmd.add_option("--save", o->save, "FILE: write the request's records to a safetensors file")->needs(request);
  return [&cmd, o] { return run(cmd, *o); };
}

}  // namespace nnsight::cli
