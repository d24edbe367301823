// Single-pass activation capture in engines. The values a reader gets are
// compared with a reference recorded independently: a plain Module forward
// hook on the same decoder layers that copies, during the same forward, each
// scheduled request's last row (the points a trace would save; a comparison
// with traces proper can join once tracing lands).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include <nnsight/capture.hpp>
#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_file.h"
#include "core/kernels/kernel_path.h"
#include "front/capture/capture_config.h"
#include "front/capture/capture_observer.h"
#include "runner/model_runner/current_step.h"
#include "runner/engine/engine.h"
#include "runner/executor/mp_executor.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

extern char** environ;

namespace nnsight {
namespace {

std::string engine_id(const std::string& tag) { return "cap-" + std::to_string(::getpid()) + "-" + tag; }

// A tiny Llama with four decoder layers.
std::shared_ptr<CausalLM> model4(uint64_t seed = 21) {
  ModelConfig cfg = testing::tiny_llama_config(false);
  cfg.num_layers = 4;
  cfg.max_position = 256;
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  testing::randomize(*model, seed);
  return model;
}

struct Key {
  uint64_t request;
  int64_t step;
  int32_t layer;
  int64_t position;
  bool operator<(const Key& o) const {
    return std::tie(request, step, layer, position) < std::tie(o.request, o.step, o.layer, o.position);
  }
};
Key key_of(const CaptureRecord& r) { return Key{r.request_id, r.step, r.layer, r.position}; }

// The reference: each decoder layer's output row at every scheduled
// request's last token, copied by a plain forward hook.
class Reference {
 public:
  Reference(CausalLM& model, const std::vector<int32_t>& layers) {
    for (int32_t layer : layers) {
      const std::string path = capture::decoder_layer_path(model.config(), layer);
      for (auto& [p, m] : model.named_hookable_modules()) {
        if (p != path) continue;
        handles_.push_back(m->register_forward_hook(
            [this, layer](Module&, const ModuleIO&, const ModuleIO& out) -> std::optional<ModuleIO> {
              const runner::StepContext* ctx = runner::current_step();
              if (!ctx) return std::nullopt;
              for (const auto& r : *ctx->groups) {
                const Key k{r.id, r.num_generated, layer, r.num_computed + r.num_tokens - 1};
                values[k] = out.tensor()[r.token_start + r.num_tokens - 1].clone();
                engine_step[k] = ctx->step;
              }
              return std::nullopt;
            }));
      }
    }
    EXPECT_EQ(handles_.size(), layers.size());
  }
  ~Reference() {
    for (auto& h : handles_) h.remove();
  }
  std::map<Key, at::Tensor> values;
  std::map<Key, uint64_t> engine_step;

 private:
  std::vector<HookHandle> handles_;
};

std::vector<runner::RequestInput> requests(int n, int64_t max_tokens, int seed = 0) {
  std::vector<runner::RequestInput> out;
  for (int i = 0; i < n; ++i) {
    runner::RequestInput in;
    const int len = 3 + (i * 7 + seed) % 29;
    for (int j = 0; j < len; ++j) in.prompt_token_ids.push_back(4 + (i * 13 + j * 5 + seed) % 90);
    in.params = SamplingParams().temperature(0).max_tokens(max_tokens).ignore_eos(true);
    out.push_back(in);
  }
  return out;
}

std::vector<std::vector<int32_t>> run(runner::Engine& engine, std::vector<runner::RequestInput> reqs) {
  auto ids = engine.add_requests(std::move(reqs));
  auto done = testing::run_to_completion(engine);
  std::vector<std::vector<int32_t>> out;
  for (auto id : ids) {
    EXPECT_EQ(done.at(id).error, "");
    out.push_back(done.at(id).token_ids);
  }
  return out;
}

EngineArgs base_args() { return EngineArgs().kv_cache_memory_mb(8).show_progress(false).max_num_batched_tokens(64); }

EngineArgs capture_args(const std::string& id, const std::string& layers) {
  return base_args().engine_id(id).capture_enabled(true).capture_layers(layers).capture_buffer_size_gb(0.02);
}

// Every reader record equals its reference, and every reference point was captured.
void expect_matches(const std::vector<CaptureRecord>& records, const Reference& ref, double tol) {
  std::set<Key> seen;
  double worst = 0;
  for (const auto& r : records) {
    const Key k = key_of(r);
    ASSERT_TRUE(ref.values.count(k)) << "record for request " << r.request_id << " step " << r.step << " layer "
                                     << r.layer << " position " << r.position << " has no reference";
    EXPECT_TRUE(seen.insert(k).second) << "duplicate record";
    worst = std::max(worst, (r.value.to(at::kFloat) - ref.values.at(k)).abs().max().item<double>());
  }
  EXPECT_LE(worst, tol);
  EXPECT_EQ(seen.size(), ref.values.size()) << "every step of every request at every chosen layer";
}

TEST(Capture, GreedyOutputsEqualWithCaptureOnAndOff) {
  auto model = model4();
  auto off = run(*testing::tiny_engine(base_args(), model), requests(16, 8));
  auto on = run(*testing::tiny_engine(capture_args(engine_id("onoff"), ""), model), requests(16, 8));
  EXPECT_EQ(on, off);
  auto compressed = run(*testing::tiny_engine(capture_args(engine_id("onoffk"), "1").capture_compression_k(2), model),
                        requests(16, 8));
  EXPECT_EQ(compressed, off);
}

// Capture's hooks only read, so decode steps keep their graphs with capture
// on, its hooks running after each replay: with the device path forced on
// the CPU (the graph buckets run eagerly), the records equal an eager run's
// (bitwise for prefill chunks, which run eager either way; decode rows within
// float rounding of the buckets' other summation order: measured about 1e-6
// of the row's largest value, asserted 1e-5) and the decode steps went
// through the buckets.
TEST(Capture, DecodeStepsKeepTheirGraphsWithCaptureOn) {
  kernels::ForceDevicePath device;
  auto model = model4();
  auto records_of = [&](bool graphs, int64_t& hooked) {
    const std::string id = engine_id(graphs ? "graphs" : "eager");
    auto [engine, runner] =
        testing::tiny_engine_with_runner(capture_args(id, "1,3").cuda_graphs(graphs).max_num_seqs(8), model);
    ActivationReader reader(id);
    run(*engine, requests(5, 6));
    hooked = runner->decode_graphs() ? runner->decode_graphs()->hooked_replays() : 0;
    return reader.since(0);
  };
  int64_t hooked = 0, hooked_eager = 0;
  const std::vector<CaptureRecord> graphs = records_of(true, hooked), eager = records_of(false, hooked_eager);
  EXPECT_GE(hooked, 3) << "decode steps replayed with capture's hooks deferred";
  EXPECT_EQ(hooked_eager, 0);
  ASSERT_EQ(graphs.size(), eager.size());
  ASSERT_FALSE(graphs.empty());
  for (size_t i = 0; i < graphs.size(); ++i) {
    EXPECT_EQ(graphs[i].step, eager[i].step);
    EXPECT_EQ(graphs[i].layer, eager[i].layer);
    EXPECT_EQ(graphs[i].position, eager[i].position);
    if (graphs[i].step == 0)
      EXPECT_TRUE(at::equal(graphs[i].value, eager[i].value)) << "record " << i;
    else
      EXPECT_LE((graphs[i].value - eager[i].value).abs().max().item<float>(),
                1e-5f * eager[i].value.abs().max().item<float>())
          << "record " << i;
  }
}

TEST(Capture, InProcessReaderEqualsReferenceAcrossChunkedPrefill) {
  auto model = model4();
  const std::string id = engine_id("inproc");
  Reference ref(*model, {0, 2, 3});
  auto engine = testing::tiny_engine(capture_args(id, "0,2-3").max_num_batched_tokens(16), model);
  ActivationReader reader(id);
  EXPECT_EQ(reader.info().layers, (std::vector<int32_t>{0, 2, 3}));
  run(*engine, requests(8, 5));
  auto records = reader.since(0);
  expect_matches(records, ref, 0.0);
  EXPECT_EQ(reader.overwritten(), 0u);
  // Chunked prefill: some requests have several step-0 records (one per chunk).
  std::map<uint64_t, int> prefill_records;
  for (const auto& r : records)
    if (r.step == 0 && r.layer == 0) prefill_records[r.request_id]++;
  int chunked = 0;
  for (auto& [id_, n] : prefill_records) chunked += n > 1;
  EXPECT_GT(chunked, 0);
}

// The records written by the observer's own thread (what a GPU does, forced
// here with NNSIGHT_CAPTURE_ASYNC=1) are the reference's, and all of them are
// in the ring once the requests finished.
TEST(Capture, RecordsWrittenOffTheLoopThreadEqualTheReference) {
  ::setenv("NNSIGHT_CAPTURE_ASYNC", "1", 1);
  EXPECT_EQ(capture::resolve_capture_config(EngineArgs()).asynchronous, 1);
  auto model = model4();
  const std::string id = engine_id("async");
  {
    Reference ref(*model, {0, 3});
    auto engine = testing::tiny_engine(capture_args(id, "0,3").max_num_batched_tokens(16), model);
    ActivationReader reader(id);
    run(*engine, requests(8, 5));
    expect_matches(reader.since(0), ref, 0.0);
    EXPECT_EQ(reader.overwritten(), 0u);
  }
  ::unsetenv("NNSIGHT_CAPTURE_ASYNC");
}

// Spawns a program with its stderr on a pipe; returns the pid and the pipe.
pid_t spawn(const std::vector<std::string>& args, int& stderr_fd) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  EXPECT_EQ(rc, 0) << "cannot start " << args[0];
  stderr_fd = fds[0];
  return pid;
}

// Reads the child's stderr until `needle` shows up (or the timeout passes).
std::string wait_for(int fd, const std::string& needle, double timeout_s) {
  std::string text;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (text.find(needle) == std::string::npos && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

int wait_exit(pid_t pid, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

std::vector<CaptureRecord> load_records(const std::string& path) {
  SafetensorsFile f(path);
  at::Tensor values = f.load("values"), request = f.load("request_id"), step = f.load("step"), layer = f.load("layer"),
             position = f.load("position"), seq = f.load("seq");
  std::vector<CaptureRecord> out;
  for (int64_t i = 0; i < values.size(0); ++i) {
    CaptureRecord r;
    r.seq = static_cast<uint64_t>(seq[i].item<int64_t>());
    r.request_id = static_cast<uint64_t>(request[i].item<int64_t>());
    r.step = step[i].item<int64_t>();
    r.layer = static_cast<int32_t>(layer[i].item<int64_t>());
    r.position = position[i].item<int64_t>();
    r.value = values[i];
    out.push_back(r);
  }
  return out;
}

TEST(Capture, ReaderInAnotherProcessGetsEveryStepOf32ConcurrentRequests) {
#ifndef NNSIGHT_EXAMPLE_CAPTURE_READER
  FAIL() << "examples were not built (NNSIGHT_BUILD_EXAMPLES=OFF): the cross-process reader is examples/capture_reader";
#else
  auto model = model4();
  const std::string id = engine_id("xproc");
  testing::ScratchDir dir;
  Reference ref(*model, {1, 3});
  auto engine = testing::tiny_engine(capture_args(id, "1,3").max_num_seqs(32).max_num_batched_tokens(256), model);
  int err_fd = -1;
  const pid_t child = spawn({NNSIGHT_EXAMPLE_CAPTURE_READER, "--engine-id", id, "--out", dir.file("got.safetensors"),
                             "--quiet", "--wait-s", "60"},
                            err_fd);
  const std::string attached = wait_for(err_fd, "attached", 60);
  ASSERT_NE(attached.find("attached to engine '" + id + "'"), std::string::npos) << attached;
  auto outputs = run(*engine, requests(32, 12));
  std::set<uint64_t> concurrent;
  for (const auto& [k, step] : ref.engine_step) concurrent.insert(k.request);
  EXPECT_EQ(concurrent.size(), 32u);
  engine.reset();  // clean shutdown: the reader drains and exits
  EXPECT_EQ(wait_exit(child, 60), 0) << wait_for(err_fd, "\n", 1);
  ::close(err_fd);
  auto records = load_records(dir.file("got.safetensors"));
  // 32 requests x 12 steps x 2 layers, plus extra step-0 records of chunked prompts.
  EXPECT_GE(records.size(), 32u * 12u * 2u);
  expect_matches(records, ref, 1e-5);
#endif
}

TEST(Capture, CompressedRecordsHaveTheTruncatedSvdError) {
  auto model = model4();
  const std::string id = engine_id("svd");
  const int64_t k = 2;
  Reference ref(*model, {2});
  auto engine = testing::tiny_engine(capture_args(id, "2").capture_compression_k(k), model);
  ActivationReader reader(id);
  EXPECT_EQ(reader.info().compression_k, k);
  run(*engine, requests(8, 6));
  auto records = reader.since(0);
  ASSERT_EQ(records.size(), ref.values.size());
  // Group rows into the blocks the writer factorized (one per engine step).
  std::map<uint64_t, std::vector<std::pair<at::Tensor, at::Tensor>>> blocks;  // step -> (reference, reconstructed)
  for (const auto& r : records) {
    const Key key = key_of(r);
    ASSERT_TRUE(ref.values.count(key));
    blocks[ref.engine_step.at(key)].emplace_back(ref.values.at(key), r.value);
  }
  int lossy = 0;
  for (auto& [step, rows] : blocks) {
    std::vector<at::Tensor> xs, ys;
    for (auto& [x, y] : rows) xs.push_back(x.to(at::kDouble)), ys.push_back(y.to(at::kDouble));
    at::Tensor x = at::stack(xs), y = at::stack(ys);  // [n, hidden]
    const double err2 = (x - y).pow(2).sum().item<double>();
    // Eckart-Young, computed independently of the SVD: the rank-k error is
    // the sum of the n - k smallest eigenvalues of the Gram matrix x x^T.
    at::Tensor eig = at::linalg_eigvalsh(at::matmul(x, x.t()));  // ascending
    const int64_t n = x.size(0);
    const double tail = n > k ? eig.narrow(0, 0, n - k).clamp_min(0).sum().item<double>() : 0.0;
    const double total = x.pow(2).sum().item<double>();
    EXPECT_NEAR(err2, tail, 1e-4 * total + 1e-8) << "step " << step << " with " << n << " rows";
    for (const auto& r : records)
      if (ref.engine_step.at(key_of(r)) == step) {
        EXPECT_EQ(r.reconstructed, n > k);
      }
    if (tail > 1e-6 * total) ++lossy;
  }
  EXPECT_GT(lossy, 0) << "some blocks must have had more than rank " << k;
}

TEST(Capture, SampleRateQuarterOf400RequestsCapturesAboutAQuarter) {
  auto model = testing::tiny_llama();
  const std::string id = engine_id("rate");
  auto engine = testing::tiny_engine(
      capture_args(id, "0").capture_sample_rate(0.25).max_num_seqs(64).max_num_batched_tokens(512).seed(3), model);
  ActivationReader reader(id);
  auto reqs = requests(400, 2);
  for (auto& r : reqs) r.prompt_token_ids.resize(4);
  run(*engine, reqs);
  std::map<uint64_t, std::set<int64_t>> steps_of;
  for (const auto& r : reader.since(0)) steps_of[r.request_id].insert(r.step);
  EXPECT_GE(steps_of.size(), 70u);
  EXPECT_LE(steps_of.size(), 130u);
  for (auto& [rid, steps] : steps_of) {
    EXPECT_EQ(steps, (std::set<int64_t>{0, 1})) << "a captured request is captured at every step";
    EXPECT_TRUE(capture::request_sampled(rid, 0.25, 3)) << "the engine seed picks the subset";
  }
  EXPECT_EQ(reader.overwritten(), 0u);
}

TEST(Capture, RecordsWhatForwardHooksLeave) {
  auto model = model4();
  const std::string id = engine_id("hooked");
  const std::string zero = R"([{"target_modules": ["model.layers.1"], "hook_factory": "nnsight.hooks:zero"}])";
  auto engine = testing::tiny_engine(capture_args(id, "1").forward_hooks(zero), model);
  ActivationReader reader(id);
  run(*engine, requests(3, 3));
  auto records = reader.since(0);
  ASSERT_FALSE(records.empty());
  for (const auto& r : records) EXPECT_EQ(r.value.abs().max().item<float>(), 0.0f);
}

TEST(Capture, MarkKeepsARequestThroughManyOverwrites) {
  auto model = testing::tiny_llama();
  const std::string id = engine_id("mark");
  Reference ref(*model, {1});
  // A 64 KB segment of 192-byte records: under 200 records stay in the ring.
  auto engine = testing::tiny_engine(capture_args(id, "1").capture_buffer_size_gb(64.0 / (1 << 20)), model);
  ActivationReader reader(id);
  ASSERT_TRUE(reader.mark(1));
  run(*engine, requests(60, 20));
  auto kept = reader.request(1);
  ASSERT_EQ(kept.size(), 20u) << "20 steps of request 1";
  int pinned = 0;
  for (const auto& r : kept) {
    pinned += r.pinned;
    EXPECT_TRUE(at::equal(r.value, ref.values.at(key_of(r))));
  }
  EXPECT_GT(pinned, 0) << "the ring must have overwritten request 1's records";
  EXPECT_TRUE(reader.request(2).size() < 20u) << "unmarked requests are overwritten";
  testing::ScratchDir dir;
  EXPECT_EQ(reader.save_request(1, dir.file("r1.safetensors")), 20u);
  SafetensorsFile f(dir.file("r1.safetensors"));
  EXPECT_EQ(f.load("layers.1").sizes(), (std::vector<int64_t>{20, 32}));
}

TEST(Capture, WorkerProcessesWriteTheirRingAndCrashedOnesAreReplaced) {
  auto model = model4();
  testing::ScratchDir dir;
  testing::write_hf_checkpoint(dir.path(), *model);
  const std::string id = engine_id("mp");
  // Reference: the same model in process.
  Reference ref(*model, {0, 3});
  run(*testing::tiny_engine(base_args(), model), requests(6, 4));
  EngineArgs mp_args = capture_args(id, "0,3").model(dir.path()).executor("mp").worker_timeout_s(60);
  {
    runner::Engine mp(mp_args);
    ActivationReader reader(id);
    EXPECT_NE(reader.info().owner_pid, ::getpid()) << "the worker process writes";
    run(mp, requests(6, 4));
    expect_matches(reader.since(0), ref, 1e-5);
    // Kill the worker: its segment stays behind, its writer dead.
    ::kill(static_cast<pid_t>(reader.info().owner_pid), SIGKILL);
    mp.add_requests(requests(1, 2));
    testing::run_to_completion(mp);
    EXPECT_FALSE(reader.writer_alive());
    EXPECT_NO_THROW(ActivationReader(id).info()) << "a crashed writer leaves its segment";
  }
  // A new engine with the same id replaces the stale segment.
  runner::Engine again(mp_args);
  ActivationReader fresh(id);
  EXPECT_TRUE(fresh.writer_alive());
  EXPECT_EQ(fresh.last_seq(), 0u);
  run(again, requests(2, 2));
  EXPECT_EQ(fresh.since(0).size(), 2u * 2u * 2u) << "2 requests x 2 steps x 2 layers";
}

// Under tensor parallelism every rank writes its own segment, and each holds
// whole decoder-layer outputs equal to one process's (docs/capture.md).
TEST(Capture, EachTensorParallelRankWritesWholeLayerOutputs) {
  ModelConfig cfg = testing::tiny_tp_llama_config();  // divides over 2 ranks
  cfg.num_layers = 4;
  auto model = testing::tiny_random_model(cfg, 21);
  testing::ScratchDir dir;
  testing::write_hf_checkpoint(dir.path(), *model);
  Reference ref(*model, {0, 3});
  run(*testing::tiny_engine(base_args(), model), requests(6, 4));
  const std::string id = engine_id("tp");
  runner::Engine tp(capture_args(id, "0,3").model(dir.path()).tensor_parallel_size(2).worker_timeout_s(60));
  run(tp, requests(6, 4));
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ActivationReader reader(id, rank);
    const auto records = reader.since(0);
    ASSERT_FALSE(records.empty());
    EXPECT_EQ(records[0].value.numel(), cfg.hidden_size) << "a whole [hidden] row, not a shard";
    expect_matches(records, ref, 1e-4);
  }
}

TEST(Capture, CliCaptureReadPrintsARunningEnginesRecords) {
  auto model = model4();
  const std::string id = engine_id("cli");
  Reference ref(*model, {0, 2});
  testing::ScratchDir dir;
  auto engine = testing::tiny_engine(capture_args(id, "0,2"), model);
  run(*engine, requests(3, 4));
  const std::string cmd = std::string(NNSIGHT_CLI) + " capture-read --engine-id " + id +
                          " --request 2 --values 3 --info --save " + dir.file("r2.safetensors") + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << out;
  std::vector<std::string> lines;
  for (size_t s = 0, e; (e = out.find('\n', s)) != std::string::npos; s = e + 1) lines.push_back(out.substr(s, e - s));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].rfind("engine=" + id + " rank=0 ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("layers=[0,2]"), std::string::npos);
  std::map<Key, at::Tensor> expected;
  for (auto& [k, v] : ref.values)
    if (k.request == 2) expected[k] = v;
  ASSERT_EQ(lines.size() - 1, expected.size());
  for (size_t i = 1; i < lines.size(); ++i) {
    unsigned long long seq, request;
    long long step, pos;
    int layer;
    double norm;
    ASSERT_EQ(std::sscanf(lines[i].c_str(), "seq=%llu request=%llu step=%lld layer=%d pos=%lld norm=%lf", &seq,
                          &request, &step, &layer, &pos, &norm),
              6)
        << lines[i];
    const Key k{request, step, layer, pos};
    ASSERT_TRUE(expected.count(k)) << lines[i];
    EXPECT_NEAR(norm, expected[k].norm().item<double>(), 1e-5 * norm) << lines[i];
  }
  SafetensorsFile f(dir.file("r2.safetensors"));
  EXPECT_EQ(f.load("layers.2").size(0), 4);
}

TEST(Capture, Gpt2BlocksAreCapturedToo) {
  ModelConfig cfg = testing::tiny_gpt2_config();
  auto model = create_causal_lm(cfg, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  testing::randomize(*model, 8);
  const std::string id = engine_id("gpt2");
  Reference ref(*model, {1});
  auto engine = testing::tiny_engine(capture_args(id, "1"), model);
  ActivationReader reader(id);
  auto reqs = requests(4, 3);
  for (auto& r : reqs)
    for (auto& t : r.prompt_token_ids) t = t % static_cast<int32_t>(cfg.vocab_size);
  run(*engine, reqs);
  expect_matches(reader.since(0), ref, 0.0);
}

TEST(Capture, BadSettingsFailStartUp) {
  auto model = model4();
  auto error = [&](const EngineArgs& args) {
    try {
      testing::tiny_engine(args, model);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(started)");
  };
  EXPECT_EQ(error(capture_args(engine_id("bad1"), "0,4")),
            "capture layers '0,4': layer 4 in '0,4' is out of range; the model has 4 layers (0-3)");
  EXPECT_EQ(error(capture_args("bad id", "0")),
            "engine_id 'bad id' has the character ' '; use only letters, digits, '.', '_' and '-'");
  EXPECT_EQ(error(capture_args(engine_id("bad2"), "0").capture_buffer_size_gb(1e-6))
                .rfind("capture buffer of 1074 bytes is too small", 0),
            0u);
}

}  // namespace
}  // namespace nnsight
