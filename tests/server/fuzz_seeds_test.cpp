// The HTTP fuzzer's seeds of traces recorded by a C++ client
// (tests/data/server/fuzz_corpus/payload_*; the fuzzer's last endpoint,
// src/server/fuzz/invokes_input.h): real binary trace payloads, so that the
// fuzzer mutates payload bytes from traces that run. Traces the C++ API
// records with a remote LanguageModel are caught on the wire by a loopback
// relay between the client and a server on the fuzzer's tiny model
// (tests/data/models/mistral_spm). The test checks that the seed form keeps
// every recorded invoke, and that each checked-in seed, sent as the fuzzer
// sends it, is a trace the server runs. NNSIGHT_WRITE_FUZZ_SEEDS=1 writes the
// seeds again from the traces recorded here.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "front/remote/http_client.h"
#include "server/fuzz/invokes_input.h"
#include "server/model_server.h"
#include "support/loopback.h"

namespace nnsight {
namespace {

using nlohmann::json;

const std::string kModel = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/models/mistral_spm";
const std::string kCorpus = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/server/fuzz_corpus";
// The fuzzer's first two bytes: structured, with the key, ?wait=1 (bits of
// byte 0); the payloads endpoint (byte 1, the last of its kEndpoints).
const char kSeedHead[] = {5, 13};

EngineArgs args() { return EngineArgs().model(kModel).kv_cache_memory_mb(4).show_progress(false); }
SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

// Relays loopback connections to `upstream_port`, keeping the bytes each
// client sent (one request per connection: the C++ client does not keep
// connections alive).
class WireRecorder {
 public:
  explicit WireRecorder(int upstream_port) : upstream_(upstream_port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listen_, 16), 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accepter_ = std::thread([this] {
      for (;;) {
        const int client = ::accept(listen_, nullptr, nullptr);
        if (client < 0) return;  // shut down
        std::lock_guard<std::mutex> lock(mu_);
        sent_.emplace_back();
        relays_.emplace_back([this, client, slot = sent_.size() - 1] { relay(client, slot); });
      }
    });
  }
  ~WireRecorder() {
    ::shutdown(listen_, SHUT_RDWR);
    accepter_.join();
    ::close(listen_);
    for (auto& t : relays_) t.join();
  }
  int port() const { return port_; }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }

 private:
  void relay(int client, size_t slot) {
    const int upstream = testing::connect_loopback(upstream_);
    int fds[2] = {client, upstream};
    while (fds[0] >= 0 || fds[1] >= 0) {
      pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
      if (::poll(p, 2, 30000) <= 0) break;
      for (int i = 0; i < 2; ++i) {
        if (fds[i] < 0 || p[i].revents == 0) continue;
        char buf[65536];
        const ssize_t n = ::recv(fds[i], buf, sizeof buf, 0);
        const int to = i == 0 ? upstream : client;
        if (n <= 0) {
          ::shutdown(to, SHUT_WR);
          fds[i] = -1;
          continue;
        }
        if (i == 0) {
          std::lock_guard<std::mutex> lock(mu_);
          sent_[slot].append(buf, static_cast<size_t>(n));
        }
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
          if (w <= 0) break;
          off += w;
        }
      }
    }
    ::close(client);
    ::close(upstream);
  }

  int upstream_;
  int listen_ = -1;
  int port_ = 0;
  std::thread accepter_;
  std::mutex mu_;
  std::vector<std::string> sent_;
  std::vector<std::thread> relays_;
};

// The JSON bodies of the POST /v1/traces requests among `requests`.
std::vector<json> trace_bodies(const std::vector<std::string>& requests) {
  std::vector<json> out;
  for (const std::string& r : requests) {
    if (r.rfind("POST /v1/traces ", 0) != 0) continue;
    const size_t head_end = r.find("\r\n\r\n");
    EXPECT_NE(head_end, std::string::npos) << r;
    if (head_end != std::string::npos) out.push_back(json::parse(r.substr(head_end + 4)));
  }
  return out;
}

struct Served {
  std::unique_ptr<server::ModelServer> srv;
  Served() {
    server::ServeOptions o;
    o.engine = args();
    o.served_model_name = "tiny";
    o.port = 0;
    srv = std::make_unique<server::ModelServer>(o);
  }
  std::string url(int port) const { return "http://127.0.0.1:" + std::to_string(port); }
};

// Traces of what the recorder writes into payloads: interventions, saves of
// a module and of the logits, iteration over steps, a condition with stop(),
// a cache, several invokes with their own sampling params, and a persistent
// edit (an invoke without a prompt, run first).
std::map<std::string, json> record_traces(const Served& s) {
  WireRecorder wire(s.srv->port());
  std::vector<std::string> names;
  {
    LanguageModel lm(EngineArgs().remote(s.url(wire.port())).model("tiny"));
    const std::string prompt = "The capital of France is";
    lm.trace(prompt, greedy(3), [&](Tracer&) {
      auto mlp = lm.envoy("model.layers.0.mlp");
      mlp.output() = mlp.output() * 0.0;
      lm.envoy("model.layers.1").output().save();
      lm.logits().save();
    });
    names.push_back("payload_ablate_save");
    lm.trace(std::vector<int32_t>{1, 20, 30, 40}, greedy(4), [&](Tracer& t) {
      t.all([&](const Step& st) {
        lm.envoy("model.layers.1.mlp").output().save_each();
        t.cond((lm.samples().sum() >= 0) * (st.index == 2), [&] { t.stop(); });
      });
    });
    names.push_back("payload_iter_stop");
    lm.trace(greedy(2), [&](Tracer& t) {
      t.invoke(prompt, [&] { lm.envoy("model.layers.0").output().save(); });
      t.invoke(std::vector<int32_t>{1, 5, 9}, greedy(3), [&] {
        t.cache({"model.layers.0.mlp", "model.layers.1.mlp"});
        lm.logits().save();
      });
    });
    names.push_back("payload_two_invokes_cache");
    LanguageModel edited = lm.edit([&](Tracer&) {
      auto mlp = lm.envoy("model.layers.1.mlp");
      mlp.output() = mlp.output() * 2.0;
    });
    edited.trace(prompt, greedy(2), [&](Tracer&) { edited.envoy("model.layers.1").output().save(); });
    names.push_back("payload_edit");
  }
  const std::vector<json> bodies = trace_bodies(wire.requests());
  EXPECT_EQ(bodies.size(), names.size());
  std::map<std::string, json> out;
  for (size_t i = 0; i < std::min(bodies.size(), names.size()); ++i) out[names[i]] = bodies[i];
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(HttpFuzzSeeds, RecordedTracesAreSeedsTheServerRuns) {
  Served s;
  const std::map<std::string, json> recorded = record_traces(s);
  ASSERT_EQ(recorded.size(), 4u);
  for (const auto& [name, body] : recorded) {
    // The seed form keeps every invoke's fields and payload bytes.
    const std::string input = server::fuzz::invokes_input(body);
    json back = json::parse(server::fuzz::invokes_body(input));
    EXPECT_EQ(back["invokes"], body["invokes"]) << name;
    EXPECT_GT(input.size(), 40u) << name;  // payload bytes, not an empty invoke
    if (std::getenv("NNSIGHT_WRITE_FUZZ_SEEDS"))
      std::ofstream(kCorpus + "/" + name, std::ios::binary) << std::string(kSeedHead, 2) << input;
  }

  // Each checked-in seed is a trace the server runs, as the fuzzer sends it.
  remote::HttpClient client(s.url(s.srv->port()), "");
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    if (entry.path().filename().string().rfind("payload_", 0) != 0) continue;
    ++seeds;
    const std::string seed = read_file(entry.path());
    ASSERT_GT(seed.size(), 2u);
    EXPECT_EQ(seed.substr(0, 2), std::string(kSeedHead, 2)) << entry.path();
    remote::HttpResult r = client.request("POST", "/v1/traces?wait=1", server::fuzz::invokes_body(seed.substr(2)));
    EXPECT_EQ(r.status, 200) << entry.path() << ": " << r.body;
  }
  EXPECT_EQ(seeds, 4);
}

}  // namespace
}  // namespace nnsight
