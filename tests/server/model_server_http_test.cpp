// nnsight serve on the tiny SentencePiece model (tests/data/models/mistral_spm),
// in process, spoken to with raw sockets: what the HTTP fuzzer
// (src/server/fuzz/http_fuzzer.cpp) found, one test each.
#include <gtest/gtest.h>

#include <unistd.h>

#include <memory>
#include <string>

#include <nnsight/nnsight.hpp>

#include "server/model_server.h"
#include "support/loopback.h"

namespace nnsight {
namespace {

struct TinyServer {
  std::unique_ptr<server::ModelServer> srv;
  TinyServer() {
    server::ServeOptions o;
    o.engine = EngineArgs()
                   .model(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/models/mistral_spm")
                   .kv_cache_memory_mb(4)
                   .show_progress(false);
    o.served_model_name = "tiny";
    o.port = 0;
    srv = std::make_unique<server::ModelServer>(o);
  }

  // Sends `text`, half-closes, and reads until the server closes.
  // Sends `text`, half-closes, and reads until the server closes.
  std::string exchange(const std::string& text) const {
    return testing::exchange_loopback(srv->port(), text, /*half_close=*/true, 30);
  }
};

TinyServer& tiny() {
  static TinyServer* s = new TinyServer();
  return *s;
}

// HEAD is GET without the body: a body after its answer would be read as the
// start of the next answer on the connection.
TEST(ModelServerHttp, HeadIsGetWithoutTheBody) {
  const std::string out = tiny().exchange(
      "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
      "HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  size_t second = out.find("\r\n\r\n") + 4;
  ASSERT_EQ(out.compare(second, 12, "HTTP/1.1 200"), 0) << out;
  size_t third = out.find("\r\n\r\n", second) + 4;
  ASSERT_EQ(out.compare(third, 12, "HTTP/1.1 200"), 0) << out;
  EXPECT_EQ(out.substr(out.size() - 15), "{\"status\":\"ok\"}") << out;
  EXPECT_EQ(out.find("\"object\""), std::string::npos) << "HEAD /v1/models carried its body: " << out;
}

}  // namespace
}  // namespace nnsight
