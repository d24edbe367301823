// POST /v1/scan on `nnsight serve` with a tiny random Llama: the shapes and
// dtypes it answers for a posted graph equal those of the saves a real trace
// of the same body returns, and a write of the wrong shape is a 400 with the
// message the real trace fails with.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "dsl/dtype.h"
#include "front/remote/http_client.h"
#include "front/trace_client/trace_result_file.h"
#include "server/model_server.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

using nlohmann::json;

json get(const std::string& key, int64_t step = 0) { return {{"kind", "get"}, {"key", key}, {"step", step}}; }
json save(const std::string& name, int64_t arg) { return {{"kind", "save"}, {"name", name}, {"args", {arg}}}; }

TEST(ScanServer, AnswersTheShapesARealTraceSaves) {
  testing::ScratchDir dir;
  testing::write_hf_checkpoint(dir.path(), *testing::tiny_llama());
  server::ServeOptions o;
  o.engine = EngineArgs().model(dir.path()).kv_cache_memory_mb(8).show_progress(false);
  o.served_model_name = "tiny";
  o.port = 0;
  server::ModelServer srv(o);
  remote::HttpClient c("http://127.0.0.1:" + std::to_string(srv.port()), "");

  json nodes = {get("model.layers.0.self_attn.pattern.output"),
                save("pattern", 0),
                get("model.layers.1.output"),
                save("h", 2),
                get("logits"),
                save("logits", 4),
                {{"kind", "const"}, {"value", -1}},
                {{"kind", "op"}, {"op", "softmax"}, {"args", {2, 6}}},
                save("soft", 7)};
  const json body = {{"prompt_token_ids", {{5, 9, 13, 2, 40, 7, 11}}}, {"graphs", {{{"nodes", nodes}}}}};

  remote::HttpResult scanned = c.request("POST", "/v1/scan", body.dump());
  ASSERT_EQ(scanned.status, 200) << scanned.body;
  const json s = json::parse(scanned.body);
  remote::HttpResult run = c.request("POST", "/v1/traces?wait=1", body.dump());
  ASSERT_EQ(run.status, 200) << run.body;
  const TraceResult real = tracing::decode_trace_result(run.body, "saves");
  for (const char* name : {"h", "pattern", "logits", "soft"}) {
    const at::Tensor t = real.saves().at(name).tensor;
    EXPECT_EQ(s["saves"][name]["shape"].get<std::vector<int64_t>>(), t.sizes().vec()) << name << ": " << s.dump();
    EXPECT_EQ(s["saves"][name]["dtype"], dsl::dtype_name(t.scalar_type())) << name;
  }
  EXPECT_EQ(s["values"][0]["what"], "get model.layers.0.self_attn.pattern.output (step 0)") << s.dump();

  // A write of the wrong shape: the real trace's message, without running.
  json wrong = {get("model.layers.0.mlp.output"),
                {{"kind", "const"}, {"value", {{"dtype", "float32"}, {"shape", {3}}, {"data", {1, 2, 3}}}}},
                {{"kind", "set"}, {"key", "model.layers.0.mlp.output"}, {"step", 0}, {"args", {1}}}};
  remote::HttpResult bad =
      c.request("POST", "/v1/scan", json{{"prompt_token_ids", {{5, 9, 13}}}, {"graphs", {{{"nodes", wrong}}}}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("shape mismatch: cannot set `model.layers.0.mlp.output` of this invoke (shape [3, 32]) to "
                          "a value of shape [3]"),
            std::string::npos)
      << bad.body;
  // An unknown path: the static checks' message.
  remote::HttpResult unknown = c.request(
      "POST", "/v1/scan",
      json{{"prompt_token_ids", {{5}}}, {"graphs", {{{"nodes", {get("model.layers.0.mpl.output")}}}}}}.dump());
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("did you mean"), std::string::npos) << unknown.body;
}

}  // namespace
}  // namespace nnsight
