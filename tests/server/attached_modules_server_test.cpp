// Attached modules through the server: `nnsight serve` started with an SAE
// attached (ServeOptions.engine, as --attach sets it) lists its paths in the
// model's structure, and a remote LanguageModel's trace reads its feature
// activations and steers through it, getting what a local engine gets.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "core/safetensors/safetensors_writer.h"
#include "server/model_server.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

TEST(AttachedModulesServer, RemoteTracesReadAndSteerAnAttachedSae) {
  testing::ScratchDir dir;
  const std::string model = dir.file("model"), sae = dir.file("sae");
  ::mkdir(model.c_str(), 0755);
  ::mkdir(sae.c_str(), 0755);
  testing::write_hf_checkpoint(model, *testing::tiny_random_model(testing::tiny_tp_llama_config(), 7));
  at::manual_seed(5);
  write_safetensors(sae + "/sae_weights.safetensors", {{"W_enc", at::randn({32, 64}) * 0.3},
                                                       {"b_enc", at::randn({64}) * 0.1},
                                                       {"W_dec", at::randn({64, 32}) * 0.3},
                                                       {"b_dec", at::randn({32}) * 0.1}});
  testing::write_file(sae + "/cfg.json", R"({"architecture": "standard", "d_in": 32, "d_sae": 64})");
  const EngineArgs local_args =
      EngineArgs().model(model).kv_cache_memory_mb(8).show_progress(false).attach("sae=" + sae + "@model.layers.1");

  server::ServeOptions o;
  o.engine = local_args;
  o.served_model_name = "tiny";
  o.port = 0;
  server::ModelServer srv(o);
  LanguageModel remote(EngineArgs().remote("http://127.0.0.1:" + std::to_string(srv.port())));
  LanguageModel local(local_args);

  const std::vector<int32_t> prompt = {5, 9, 13, 2, 40, 7};
  auto body = [&](LanguageModel& lm, Saved& acts) {
    return [&](Tracer& t) {
      t.all([&](const Step&) {
        Envoy f = lm.envoy("sae.hook_sae_acts_post");
        acts = f.output().save_each();
        f.output() = f.output() + at::one_hot(at::tensor({int64_t{3}}), 64).to(at::kFloat)[0] * 40.0;
      });
    };
  };
  Saved a_remote, a_local;
  const SamplingParams greedy = SamplingParams().temperature(0).max_tokens(4);
  TraceResult there = remote.trace(prompt, greedy, body(remote, a_remote));
  TraceResult here = local.trace(prompt, greedy, body(local, a_local));
  ASSERT_EQ(there.list(a_remote).size(), here.list(a_local).size());
  EXPECT_TRUE(at::equal(there.list(a_remote)[0], here.list(a_local)[0]));
  EXPECT_EQ(there.output().token_ids, here.output().token_ids);
  EXPECT_NE(here.output().token_ids, local.trace(prompt, greedy, [](Tracer&) {}).output().token_ids);
  // The client's static checks know the attached paths from the server's structure.
  try {
    remote.trace(prompt, greedy, [&](Tracer&) { remote.envoy("sae.hook_sae_acts_pots").output().save(); });
    FAIL() << "a misspelt attached path must be refused";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'sae.hook_sae_acts_post'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nnsight
