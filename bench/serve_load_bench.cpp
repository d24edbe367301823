// serve_load_bench: `nnsight serve` under load on 127.0.0.1, bounded (it stops
// by itself), against the in-process engine on the same traces.
//
//   serve_load_bench [--model PATH] [--traces 2000] [--clients 64] [--keys 4] [--only 0|1|2]
//
// Each client thread takes the next trace from a shared list and posts it
// (POST /v1/traces?wait=1). The list mixes sizes (a logits save, an ablation
// with a layer save over 4 tokens, a three-layer logit lens) over eight
// prompts; one trace in ten is hostile: malformed JSON, an unknown module, a
// runtime shape error, saves over the limit, a wrong key, another tenant's id.
// Checked: every trace gets its result (equal, tensor for tensor, to the same
// trace run alone first) or the error its kind must get; none is lost or
// answered twice; the server's resident memory stays bounded. Reported:
// throughput and p50/p99 latency, beside the same accepted traces submitted
// from the same number of threads to an in-process engine (run_graph_trace).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <random>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "front/remote/http_client.h"
#include "front/trace_client/graph_file.h"
#include "front/trace_client/graph_trace.h"
#include "front/trace_client/trace_result_file.h"
#include "server/model_server.h"
#include "support/bench_support.h"

using namespace nnsight;
using nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

const char* kPrompts[] = {"The Eiffel Tower is located in the city of",
                          "The capital of Italy is",
                          "Water boils at a temperature of",
                          "The first man on the moon was",
                          "Once upon a time, in a small village,",
                          "The largest planet in the solar system is",
                          "To make a cake you need flour, eggs and",
                          "The chemical symbol for gold is"};

enum class Kind { kLogits, kAblation, kLens, kMalformed, kUnknownModule, kShapeError, kOverSaves, kWrongKey, kOtherId };

struct Item {
  Kind kind;
  int prompt;
  int key;
};

json graph_for(Kind k) {
  auto get = [](const std::string& key) { return json{{"kind", "get"}, {"key", key}}; };
  auto save = [](const std::string& name, int arg) { return json{{"kind", "save"}, {"name", name}, {"args", {arg}}}; };
  json nodes = json::array();
  switch (k) {
    case Kind::kLogits:
      nodes = {get("logits"), save("logits", 0)};
      break;
    case Kind::kAblation:
      nodes = {get("model.layers.10.mlp.output"),
               {{"kind", "const"}, {"value", 0.0}},
               {{"kind", "op"}, {"op", "mul"}, {"args", {0, 1}}},
               {{"kind", "set"}, {"key", "model.layers.10.mlp.output"}, {"args", {2}}},
               get("model.layers.20.output"),
               save("h20", 4),
               get("logits"),
               save("logits", 6)};
      break;
    case Kind::kLens:
      for (int layer : {5, 15, 25}) {
        const int base = static_cast<int>(nodes.size());
        nodes.push_back(get("model.layers." + std::to_string(layer) + ".output"));
        nodes.push_back({{"kind", "call"}, {"module", "model.norm"}, {"args", {base}}});
        nodes.push_back({{"kind", "call"}, {"module", "lm_head"}, {"args", {base + 1}}});
        nodes.push_back(save("lens" + std::to_string(layer), base + 2));
      }
      break;
    case Kind::kUnknownModule:
      nodes = {get("model.layers.5.mpl.output"), save("x", 0)};
      break;
    case Kind::kShapeError:  // [T, 576] x [3, 3]: fails while it runs
      nodes = {get("model.layers.3.output"),
               {{"kind", "const"},
                {"value", {{"dtype", "float32"}, {"shape", {3, 3}}, {"data", {1, 0, 0, 0, 1, 0, 0, 0, 1}}}}},
               {{"kind", "op"}, {"op", "matmul"}, {"args", {0, 1}}},
               save("bad", 2)};
      break;
    case Kind::kOverSaves:
      for (int layer = 0; layer < 30; ++layer) {
        nodes.push_back(get("model.layers." + std::to_string(layer) + ".output"));
        nodes.push_back(save("l" + std::to_string(layer), 2 * layer));
      }
      break;
    default:
      nodes = {get("logits"), save("logits", 0)};
  }
  return {{"nodes", nodes}};
}

std::string body_for(const Item& it) {
  if (it.kind == Kind::kMalformed) return "{\"prompts\": [\"x\"], \"graphs\": [";
  std::string prompt = kPrompts[it.prompt];
  if (it.kind == Kind::kOverSaves)
    for (int i = 0; i < 40; ++i) prompt += " and more words to make the prompt long";
  return json{{"prompts", {prompt}},
              {"graphs", {graph_for(it.kind)}},
              {"sampling_params", {{"max_tokens", it.kind == Kind::kAblation ? 4 : 1}, {"temperature", 0}}}}
      .dump();
}

int64_t rss_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + std::strlen(field));
  return 0;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

bool same_saves(const TraceResult& a, const TraceResult& b) {
  if (a.saves().size() != b.saves().size()) return false;
  for (const auto& [name, v] : a.saves()) {
    auto it = b.saves().find(name);
    if (it == b.saves().end() || !v.tensor.equal(it->second.tensor)) return false;
  }
  return a.output().token_ids == b.output().token_ids;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = bench::default_model_path();
  int traces = 2000, clients = 64, keys = 4;
  int only = -1;  // diagnosis: every trace of this one kind (0 logits, 1 ablation, 2 lens)
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    if (!std::strcmp(argv[i], "--traces")) traces = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--clients")) clients = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--keys")) keys = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--only")) only = std::atoi(argv[i + 1]);
  }
  char dir[] = "/tmp/nnsight-load-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  const std::string keys_file = std::string(dir) + "/keys";
  {
    std::ofstream k(keys_file);
    for (int i = 0; i < keys; ++i) k << "tenant" << i << ":sk-load-test-key-" << i << "-0123456789\n";
  }
  auto key = [](int i) { return "sk-load-test-key-" + std::to_string(i) + "-0123456789"; };

  // The work list: 90% three sizes, 10% hostile, shuffled with a fixed seed.
  std::vector<Item> items;
  const Kind good[] = {Kind::kLogits, Kind::kAblation, Kind::kLens};
  const Kind bad[] = {Kind::kMalformed, Kind::kUnknownModule, Kind::kShapeError,
                      Kind::kOverSaves, Kind::kWrongKey,      Kind::kOtherId};
  for (int i = 0; i < traces; ++i) {
    Item it{i % 10 == 9 ? bad[(i / 10) % 6] : good[i % 3], (i * 7) % 8, i % keys};
    if (only >= 0) it.kind = good[only];
    items.push_back(it);
  }
  std::mt19937 rng(7);
  std::shuffle(items.begin(), items.end(), rng);

  server::ServeOptions o;
  o.engine = EngineArgs().model(model).show_progress(false).max_num_seqs(64);
  o.served_model_name = "smollm2-135m";
  o.port = 0;
  o.api_keys_file = keys_file;
  o.limits.max_concurrent_traces = 64;
  o.limits.max_queued_traces = 64;
  o.limits.max_saved_bytes = 8 << 20;
  const int64_t rss_before_server = rss_kb("VmRSS:");
  server::ModelServer srv(o);
  const std::string url = "http://127.0.0.1:" + std::to_string(srv.port());

  // Solo references: each good (kind, prompt) once, alone.
  std::map<std::pair<int, int>, TraceResult> solo;
  for (Kind k : good)
    for (int p = 0; p < 8; ++p) {
      remote::HttpClient c(url, key(0));
      auto r = c.request("POST", "/v1/traces?wait=1", body_for({k, p, 0}));
      if (r.status != 200) {
        std::fprintf(stderr, "solo run failed: %s\n", remote::error_message(r).c_str());
        return 1;
      }
      solo[{static_cast<int>(k), p}] = tracing::decode_trace_result(r.body, "solo");
    }
  // An id of tenant 0, for the other-tenant probes.
  std::string foreign_id;
  {
    remote::HttpClient c(url, key(0));
    auto r = c.request("POST", "/v1/traces", body_for({Kind::kLogits, 0, 0}));
    foreign_id = json::parse(r.body)["id"];
  }
  const int64_t rss_loaded = rss_kb("VmRSS:");

  std::atomic<size_t> next{0};
  std::atomic<int> ok{0}, expected_errors{0}, wrong{0};
  std::vector<int> answered(items.size(), 0);
  std::vector<double> latency(items.size(), 0);
  std::mutex mu;
  std::vector<std::string> problems;
  const auto t0 = clock_type::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < items.size();) {
        const Item& it = items[i];
        const auto s0 = clock_type::now();
        remote::HttpResult r;
        try {
          if (it.kind == Kind::kWrongKey) {
            r = remote::HttpClient(url, "sk-not-a-key-0123456789").request("POST", "/v1/traces?wait=1", body_for(it));
          } else if (it.kind == Kind::kOtherId) {
            r = remote::HttpClient(url, key(1 + it.key % (keys - 1)))
                    .request("GET", "/v1/traces/" + foreign_id + "/saves?wait=1");
          } else {
            r = remote::HttpClient(url, key(it.key)).request("POST", "/v1/traces?wait=1", body_for(it));
          }
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> g(mu);
          problems.push_back(std::string("lost: ") + e.what());
          ++wrong;
          continue;
        }
        latency[i] = std::chrono::duration<double, std::milli>(clock_type::now() - s0).count();
        ++answered[i];
        const int want = it.kind == Kind::kMalformed || it.kind == Kind::kUnknownModule ? 400
                         : it.kind == Kind::kShapeError                                 ? 422
                         : it.kind == Kind::kOverSaves                                  ? 413
                         : it.kind == Kind::kWrongKey                                   ? 401
                         : it.kind == Kind::kOtherId                                    ? 404
                                                                                        : 200;
        bool good_answer = r.status == want;
        if (good_answer && want == 200) {
          good_answer =
              same_saves(tracing::decode_trace_result(r.body, "load"), solo.at({static_cast<int>(it.kind), it.prompt}));
        } else if (good_answer) {
          good_answer = !remote::error_message(r).empty();
        }
        if (good_answer) {
          (want == 200 ? ok : expected_errors)++;
        } else {
          ++wrong;
          std::lock_guard<std::mutex> g(mu);
          problems.push_back("kind " + std::to_string(static_cast<int>(it.kind)) + ": HTTP " +
                             std::to_string(r.status) + " (wanted " + std::to_string(want) +
                             "): " + remote::error_message(r).substr(0, 200));
        }
      }
    });
  for (auto& t : threads) t.join();
  const double server_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  const int64_t rss_after = rss_kb("VmRSS:"), rss_peak = rss_kb("VmHWM:");
  int duplicated = 0, lost = 0;
  for (int a : answered) duplicated += a > 1, lost += a == 0;
  std::vector<double> good_latency;
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].kind == Kind::kLogits || items[i].kind == Kind::kAblation || items[i].kind == Kind::kLens)
      good_latency.push_back(latency[i]);
  srv.stop();

  // The same load through an in-process engine, same thread count: every
  // trace that reaches a model there (hostile ones too: a shape error runs
  // until it fails, over-limit saves run whole; a malformed or unknown-module
  // graph fails at its check). Wrong keys and foreign ids have no in-process
  // counterpart.
  LLM llm(EngineArgs().model(model).show_progress(false).max_num_seqs(64));
  std::vector<Item> local_items;
  size_t accepted = 0;
  for (const auto& it : items) {
    if (it.kind == Kind::kWrongKey || it.kind == Kind::kOtherId) continue;
    local_items.push_back(it);
    accepted += it.kind == Kind::kLogits || it.kind == Kind::kAblation || it.kind == Kind::kLens;
  }
  std::atomic<size_t> next_local{0};
  std::atomic<int> local_wrong{0};
  const auto t1 = clock_type::now();
  threads.clear();
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      for (size_t i; (i = next_local.fetch_add(1)) < local_items.size();) {
        const Item& it = local_items[i];
        const bool good_kind = it.kind == Kind::kLogits || it.kind == Kind::kAblation || it.kind == Kind::kLens;
        try {
          const json body = json::parse(body_for(it));
          std::vector<tracing::GraphFile> g{tracing::parse_graph_file("g", body["graphs"][0].dump())};
          TraceResult r =
              tracing::run_graph_trace(llm, std::vector<std::string>{body["prompts"][0].get<std::string>()}, g,
                                       SamplingParams().temperature(0).max_tokens(it.kind == Kind::kAblation ? 4 : 1));
          if (good_kind && !same_saves(r, solo.at({static_cast<int>(it.kind), it.prompt}))) ++local_wrong;
          if (it.kind == Kind::kMalformed || it.kind == Kind::kUnknownModule || it.kind == Kind::kShapeError)
            ++local_wrong;  // must have failed
        } catch (const std::exception&) {
          if (good_kind) ++local_wrong;
        }
      }
    });
  for (auto& t : threads) t.join();
  const double local_s = std::chrono::duration<double>(clock_type::now() - t1).count();

  const double server_tps = static_cast<double>(good_latency.size()) / server_s;
  const double local_tps = static_cast<double>(accepted) / local_s;
  std::printf("serve_load_bench: %d traces (%zu accepted, %zu hostile), %d clients, %d keys, model %s\n", traces,
              accepted, items.size() - accepted, clients, keys, model.c_str());
  std::printf("| | traces/s | p50 ms | p99 ms |\n|---|---|---|---|\n");
  std::printf("| nnsight serve, 127.0.0.1 (accepted traces) | %.1f | %.0f | %.0f |\n", server_tps,
              pct(good_latency, 0.5), pct(good_latency, 0.99));
  std::printf("| in-process engine, same load, %d threads (accepted traces) | %.1f | | |\n", clients, local_tps);
  std::printf("server / in-process throughput: %.2f\n", server_tps / local_tps);
  std::printf(
      "answers: %d results equal to solo runs, %d expected errors, %d wrong, %d lost, %d duplicated; "
      "in-process mismatches %d\n",
      ok.load(), expected_errors.load(), wrong.load(), lost, duplicated, local_wrong.load());
  std::printf("resident memory: %.0f MB before the server, %.0f MB loaded, %.0f MB after the load, peak %.0f MB\n",
              rss_before_server / 1024.0, rss_loaded / 1024.0, rss_after / 1024.0, rss_peak / 1024.0);
  for (size_t i = 0; i < std::min<size_t>(problems.size(), 10); ++i) std::printf("  %s\n", problems[i].c_str());
  return wrong.load() == 0 && lost == 0 && duplicated == 0 && local_wrong.load() == 0 ? 0 : 1;
}
