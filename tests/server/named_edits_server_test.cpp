// Named edits on `nnsight serve` (POST/GET/DELETE /v1/edits, "edits" in
// POST /v1/traces) on a tiny random Llama: an edit registered by one API key
// runs before a trace's graphs when the trace names it -- the saves equal
// the same intervention written inline in the trace's graph, bitwise -- and
// is invisible to another key.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "dsl/base64.h"
#include "front/remote/http_client.h"
#include "front/trace_client/graph_file.h"
#include "front/trace_client/trace_result_file.h"
#include "front/trace_worker/trace_payload.h"
#include "server/model_server.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

using nlohmann::json;
const char* kAlice = "sk-alice-0123456789abcdef";
const char* kBob = "sk-bob-0123456789abcdef0";

json get(const std::string& key, int64_t step = 0) { return {{"kind", "get"}, {"key", key}, {"step", step}}; }

// Layer 0's MLP output doubled: nodes 0..3.
json double_mlp_nodes() {
  return {get("model.layers.0.mlp.output"),
          {{"kind", "const"}, {"value", 2.0}},
          {{"kind", "op"}, {"op", "mul"}, {"args", {0, 1}}},
          {{"kind", "set"}, {"key", "model.layers.0.mlp.output"}, {"step", 0}, {"args", {2}}}};
}

struct Server {
  testing::ScratchDir dir;
  std::unique_ptr<server::ModelServer> srv;
  Server() {
    testing::write_hf_checkpoint(dir.path(), *testing::tiny_llama());
    server::ServeOptions o;
    o.engine = EngineArgs().model(dir.path()).kv_cache_memory_mb(8).show_progress(false);
    o.served_model_name = "tiny";
    o.port = 0;
    o.api_keys_file = dir.write("keys", std::string("alice:") + kAlice + "\nbob:" + kBob + "\n");
    srv = std::make_unique<server::ModelServer>(o);
  }
  remote::HttpResult call(const std::string& method, const std::string& target, const json& body = nullptr,
                          const std::string& key = kAlice) const {
    remote::HttpClient c("http://127.0.0.1:" + std::to_string(srv->port()), key);
    return c.request(method, target, body.is_null() ? "" : body.dump());
  }
  // Layer 1's output of a trace whose graph is `nodes` plus that save, under `edits`.
  at::Tensor layer1(json nodes, const json& edits = nullptr, const std::string& key = kAlice) const {
    const int64_t n = static_cast<int64_t>(nodes.size());
    nodes.push_back(get("model.layers.1.output"));
    nodes.push_back({{"kind", "save"}, {"name", "h"}, {"args", {n}}});
    json body = {{"prompt_token_ids", {{5, 9, 13, 2, 40, 7}}}, {"graphs", {{{"nodes", nodes}}}}};
    if (!edits.is_null()) body["edits"] = edits;
    remote::HttpResult r = call("POST", "/v1/traces?wait=1", body, key);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return at::Tensor();
    return tracing::decode_trace_result(r.body, "saves").saves().at("h").tensor;
  }
};

TEST(NamedEditsServer, RegisterApplyListDeleteAndTenants) {
  Server s;
  remote::HttpResult made =
      s.call("POST", "/v1/edits", {{"name", "double-mlp"}, {"graph", {{"nodes", double_mlp_nodes()}}}});
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(json::parse(made.body)["id"], "double-mlp");

  // Applied by name: the same as the intervention written inline; not the plain trace.
  const at::Tensor edited = s.layer1(json::array(), {"double-mlp"});
  const at::Tensor inline_edit = s.layer1(double_mlp_nodes());
  const at::Tensor plain = s.layer1(json::array());
  ASSERT_TRUE(edited.defined() && inline_edit.defined() && plain.defined());
  EXPECT_TRUE(at::equal(edited, inline_edit));
  EXPECT_FALSE(at::equal(edited, plain));
  // Stacked with the trace's own write, the edit's first: 2x + 1.
  json plus_one = {get("model.layers.0.mlp.output"),
                   {{"kind", "const"}, {"value", 1.0}},
                   {{"kind", "op"}, {"op", "add"}, {"args", {0, 1}}},
                   {{"kind", "set"}, {"key", "model.layers.0.mlp.output"}, {"step", 0}, {"args", {2}}}};
  json both = {get("model.layers.0.mlp.output"),
               {{"kind", "const"}, {"value", 2.0}},
               {{"kind", "op"}, {"op", "mul"}, {"args", {0, 1}}},
               {{"kind", "const"}, {"value", 1.0}},
               {{"kind", "op"}, {"op", "add"}, {"args", {2, 3}}},
               {{"kind", "set"}, {"key", "model.layers.0.mlp.output"}, {"step", 0}, {"args", {4}}}};
  EXPECT_TRUE(at::equal(s.layer1(plus_one, {"double-mlp"}), s.layer1(both)));

  // Listed for its key only.
  json mine = json::parse(s.call("GET", "/v1/edits").body);
  ASSERT_EQ(mine["data"].size(), 1u);
  EXPECT_EQ(mine["data"][0]["id"], "double-mlp");
  EXPECT_EQ(json::parse(s.call("GET", "/v1/edits", nullptr, kBob).body)["data"].size(), 0u);
  EXPECT_EQ(s.call("GET", "/v1/edits/double-mlp").status, 200);
  EXPECT_EQ(s.call("GET", "/v1/edits/double-mlp", nullptr, kBob).status, 404);
  EXPECT_EQ(s.call("DELETE", "/v1/edits/double-mlp", nullptr, kBob).status, 404);
  // Another key cannot apply it: the same answer as for a name that does not exist.
  json body = {{"prompt_token_ids", {{5, 9}}},
               {"graphs", {{{"nodes", {get("logits"), {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}}}},
               {"edits", {"double-mlp"}}};
  remote::HttpResult theirs = s.call("POST", "/v1/traces", body, kBob);
  EXPECT_EQ(theirs.status, 400);
  EXPECT_NE(theirs.body.find("edits[0]: no edit named 'double-mlp' for this API key (its edits: none"),
            std::string::npos)
      << theirs.body;
  body["edits"] = {"double-mlp", "nope"};
  remote::HttpResult missing = s.call("POST", "/v1/traces", body);
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("edits[1]: no edit named 'nope' for this API key (its edits: 'double-mlp'"),
            std::string::npos)
      << missing.body;

  // A second edit of the same name is a conflict; deleted, it is gone.
  EXPECT_EQ(s.call("POST", "/v1/edits", {{"name", "double-mlp"}, {"graph", {{"nodes", double_mlp_nodes()}}}}).status,
            409);
  EXPECT_EQ(s.call("DELETE", "/v1/edits/double-mlp").status, 200);
  EXPECT_EQ(s.call("GET", "/v1/edits/double-mlp").status, 404);
  body["edits"] = {"double-mlp"};
  EXPECT_EQ(s.call("POST", "/v1/traces", body).status, 400);
  EXPECT_EQ(json::parse(s.call("GET", "/v1/edits").body)["data"].size(), 0u);
}

// A trace recorded by a C++ client ("invokes": payload bytes) gets the edit
// too: its graphs are renumbered after the edit's and the bytes written again.
TEST(NamedEditsServer, RecordedPayloadTracesApplyEdits) {
  Server s;
  ASSERT_EQ(s.call("POST", "/v1/edits", {{"name", "double-mlp"}, {"graph", {{"nodes", double_mlp_nodes()}}}}).status,
            201);
  json nodes = {get("model.layers.1.output"), {{"kind", "save"}, {"name", "h"}, {"args", {0}}}};
  tracing::TracePayload p;
  p.graphs.push_back(tracing::PayloadGraph{tracing::GraphRole::kInvoke,
                                           tracing::parse_graph_file("h", json{{"nodes", nodes}}.dump()).graph});
  json body = {{"invokes",
                {{{"prompt_token_ids", {5, 9, 13, 2, 40, 7}},
                  {"sampling_params", {{"max_tokens", 1}, {"temperature", 0}}},
                  {"invoke_index", 0},
                  {"payload", dsl::base64_encode(tracing::encode_payload(p))}}}},
               {"edits", {"double-mlp"}}};
  remote::HttpResult r = s.call("POST", "/v1/traces?wait=1", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const at::Tensor edited = tracing::decode_trace_result(r.body, "saves").saves().at("h").tensor;
  EXPECT_TRUE(at::equal(edited, s.layer1(double_mlp_nodes())));
  EXPECT_FALSE(at::equal(edited, s.layer1(json::array())));
}

TEST(NamedEditsServer, BadEditsAreRefusedWithTheirReason) {
  Server s;
  remote::HttpResult saves = s.call(
      "POST", "/v1/edits",
      {{"name", "s"}, {"graph", {{"nodes", {get("logits"), {{"kind", "save"}, {"name", "l"}, {"args", {0}}}}}}}});
  EXPECT_EQ(saves.status, 400);
  EXPECT_NE(saves.body.find("cannot save"), std::string::npos) << saves.body;
  remote::HttpResult unknown =
      s.call("POST", "/v1/edits", {{"name", "u"}, {"graph", {{"nodes", {get("model.layers.0.mpl.output")}}}}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("did you mean"), std::string::npos) << unknown.body;
  EXPECT_EQ(s.call("POST", "/v1/edits", {{"name", "bad name!"}, {"graph", {{"nodes", double_mlp_nodes()}}}}).status,
            400);
  EXPECT_EQ(s.call("POST", "/v1/edits", {{"name", "x"}}).status, 400);
}

}  // namespace
}  // namespace nnsight
