// Attached modules (docs/attached-modules.md) on a tiny random Llama: an SAE,
// a linear probe and a steering vector loaded from files and attached at
// model.layers.0. Traces read their points per request (the values equal a
// reference computed here with plain ATen), call them like modules, steer
// generation through them; requests that do not touch them keep their exact
// outputs; the same in worker processes and at TP=2; bad files and hook
// points fail start-up naming the file and field.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "core/safetensors/safetensors_writer.h"
#include "front/trace_client/graph_file.h"
#include "front/trace_client/graph_trace.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

constexpr int64_t kHidden = 32, kDSae = 64;

struct Files {
  testing::ScratchDir dir;
  at::Tensor W_enc, b_enc, W_dec, b_dec;  // the SAE
  at::Tensor probe_w, probe_b;            // [3, 32], [3]
  at::Tensor vector;                      // [32]
  std::string model, sae, probe, steer;
};

const Files& files() {
  static Files* f = [] {
    auto* f = new Files();
    f->model = f->dir.file("model");
    ::mkdir(f->model.c_str(), 0755);
    testing::write_hf_checkpoint(f->model, *testing::tiny_random_model(testing::tiny_tp_llama_config(), 7));
    at::manual_seed(5);
    f->W_enc = at::randn({kHidden, kDSae}) * 0.3;
    f->b_enc = at::randn({kDSae}) * 0.1;
    f->W_dec = at::randn({kDSae, kHidden}) * 0.3;
    f->b_dec = at::randn({kHidden}) * 0.1;
    f->sae = f->dir.file("sae");
    ::mkdir(f->sae.c_str(), 0755);
    write_safetensors(f->sae + "/sae_weights.safetensors",
                      {{"W_enc", f->W_enc}, {"b_enc", f->b_enc}, {"W_dec", f->W_dec}, {"b_dec", f->b_dec}});
    testing::write_file(f->sae + "/cfg.json",
                        nlohmann::json{{"architecture", "standard"}, {"d_in", kHidden}, {"d_sae", kDSae}}.dump());
    f->probe_w = at::randn({3, kHidden});
    f->probe_b = at::randn({3});
    f->probe = f->dir.file("probe.safetensors");
    write_safetensors(f->probe, {{"weight", f->probe_w}, {"bias", f->probe_b}});
    f->vector = at::randn({kHidden});
    f->steer = f->dir.file("steer.safetensors");
    write_safetensors(f->steer, {{"vector", f->vector}});
    return f;
  }();
  return *f;
}

EngineArgs args() {
  const Files& f = files();
  return EngineArgs()
      .model(f.model)
      .kv_cache_memory_mb(8)
      .show_progress(false)
      .attach("sae", f.sae, "model.layers.0")
      .attach("probe=" + f.probe + "@model.layers.0")
      .attach("steer", f.steer, "model.layers.0");
}

// The reference, written out: SAELens's standard SAE with b_dec subtracted.
at::Tensor ref_acts(const at::Tensor& h) {
  const Files& f = files();
  return at::relu(at::matmul(h - f.b_dec, f.W_enc) + f.b_enc);
}
at::Tensor ref_recon(const at::Tensor& acts) {
  const Files& f = files();
  return at::matmul(acts, f.W_dec) + f.b_dec;
}

const std::vector<int32_t> kA = {5, 9, 13, 2, 40, 7};
const std::vector<int32_t> kB = {11, 3, 60, 21};
SamplingParams greedy(int n) { return SamplingParams().temperature(0).max_tokens(n); }

TEST(AttachedModules, AreModulesOfTheModel) {
  LanguageModel lm(args());
  const auto paths = lm.module_paths();
  for (const char* p : {"sae", "sae.encode", "sae.decode", "sae.hook_sae_acts_post", "sae.hook_sae_error", "probe",
                        "steer", "steer.coeff"})
    EXPECT_NE(std::find(paths.begin(), paths.end(), p), paths.end()) << p;
  EXPECT_EQ(lm.type_name("sae"), "SAE");
}

TEST(AttachedModules, TheirPointsAreReadPerRequestAndOthersKeepTheirBits) {
  LanguageModel lm(args());
  Saved h, acts, pre, recons, error, output, probe, logits_b;
  TraceResult out = lm.trace(greedy(3), [&](Tracer& t) {
    t.invoke(kA, [&] {
      h = lm.envoy("model.layers.0").output().save();
      Envoy sae = lm.envoy("sae");
      pre = sae["hook_sae_acts_pre"].output().save();
      acts = sae["hook_sae_acts_post"].output().save();
      recons = sae["hook_sae_recons"].output().save();
      error = sae["hook_sae_error"].output().save();
      output = sae["hook_sae_output"].output().save();
      probe = lm.envoy("probe").output().save();
    });
    t.invoke(kB, [&] { logits_b = lm.logits().save(); });
  });
  const at::Tensor x = out[h];  // [6, 32]
  ASSERT_EQ(out[acts].sizes(), (std::vector<int64_t>{6, kDSae}));
  EXPECT_TRUE(at::allclose(out[acts], ref_acts(x), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out[pre], at::matmul(x - files().b_dec, files().W_enc) + files().b_enc, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out[recons], ref_recon(ref_acts(x)), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out[error], x - out[recons], 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(out[output], x, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out[probe], at::matmul(x, files().probe_w.t()) + files().probe_b, 1e-5, 1e-5));
  EXPECT_GT(out[acts].ne(0).sum().item<int64_t>(), 0);

  // Reading changes nothing: both requests generate exactly what they do untraced.
  Saved alone_b;
  TraceResult plain = lm.trace(greedy(3), [&](Tracer& t) {
    t.invoke(kA, [&] {});
    t.invoke(kB, [&] { alone_b = lm.logits().save(); });
  });
  EXPECT_EQ(out.output(0).token_ids, plain.output(0).token_ids);
  EXPECT_TRUE(at::equal(out[logits_b], plain[alone_b]));
}

TEST(AttachedModules, AreCalledLikeModelModules) {
  LanguageModel lm(args());
  Saved h, recon, acts, decoded, probe, steered;
  TraceResult out = lm.trace(kA, greedy(1), [&](Tracer&) {
    Proxy x = lm.envoy("model.layers.1").output();
    h = x.save();
    recon = lm.envoy("sae")(x).save();
    acts = lm.envoy("sae.encode")(x).save();
    decoded = lm.envoy("sae.decode")(lm.envoy("sae.encode")(x)).save();
    probe = lm.envoy("probe")(x).save();
    steered = lm.envoy("steer")(x).save();
  });
  const at::Tensor x = out[h];
  EXPECT_TRUE(at::allclose(out[acts], ref_acts(x), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out[recon], ref_recon(ref_acts(x)), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out[decoded], out[recon], 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(out[probe], at::matmul(x, files().probe_w.t()) + files().probe_b, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out[steered], x + files().vector, 1e-6, 1e-6));
}

// Steering by one feature: its activation raised at every step, in invoke 0
// only; h0 and logits (when given) save each step's layer-1 input and logits.
TraceResult steer_feature(LanguageModel& lm, int64_t feature, double amount, Saved* h0, Saved* logits) {
  return lm.trace(greedy(6), [&](Tracer& t) {
    t.invoke(kA, [&] {
      t.all([&](const Step&) {
        Envoy acts = lm.envoy("sae.hook_sae_acts_post");
        acts.output() = acts.output() + at::one_hot(at::tensor({feature}), kDSae).to(at::kFloat)[0] * amount;
        if (h0) *h0 = lm.envoy("model.layers.1").input().save_each();
        if (logits) *logits = lm.logits().save_each();
      });
    });
    t.invoke(kB, [&] {});
  });
}

TEST(AttachedModules, SteeringByAFeatureAddsItsDecoderRowAndChangesGeneration) {
  LanguageModel lm(args());
  TraceResult plain = lm.trace(greedy(6), [&](Tracer& t) {
    t.invoke(kA, [&] {});
    t.invoke(kB, [&] {});
  });
  Saved steered_in, steered_logits;
  TraceResult steered = steer_feature(lm, 7, 40.0, &steered_in, &steered_logits);
  EXPECT_NE(steered.output(0).token_ids, plain.output(0).token_ids);
  EXPECT_EQ(steered.output(1).token_ids, plain.output(1).token_ids);  // the other request: untouched

  // At the prefill, the same as adding 40 * W_dec[7] to the layer's output by hand.
  Saved by_hand_in, by_hand_logits;
  TraceResult hand = lm.trace(kA, greedy(1), [&](Tracer&) {
    Envoy layer = lm.envoy("model.layers.0");
    layer.output() = layer.output() + files().W_dec[7] * 40.0;
    by_hand_in = lm.envoy("model.layers.1").input().save();
    by_hand_logits = lm.logits().save();
  });
  EXPECT_TRUE(at::allclose(steered.list(steered_in)[0], hand[by_hand_in], 1e-4, 1e-4));
  EXPECT_TRUE(at::allclose(steered.list(steered_logits)[0], hand[by_hand_logits], 1e-4, 1e-4));
}

TEST(AttachedModules, ASteeringVectorSteersTheRowsWhoseCoefficientATraceWrites) {
  LanguageModel lm(args());
  Saved with_vector, by_hand, b_logits, b_plain;
  TraceResult out = lm.trace(greedy(1), [&](Tracer& t) {
    t.invoke(kA, [&] {
      lm.envoy("steer.coeff").output() = 3.0;
      with_vector = lm.envoy("model.layers.1").input().save();
    });
    t.invoke(kB, [&] { b_logits = lm.logits().save(); });
  });
  TraceResult ref = lm.trace(greedy(1), [&](Tracer& t) {
    t.invoke(kA, [&] {
      Envoy layer = lm.envoy("model.layers.0");
      layer.output() = layer.output() + files().vector * 3.0;
      by_hand = lm.envoy("model.layers.1").input().save();
    });
    t.invoke(kB, [&] { b_plain = lm.logits().save(); });
  });
  EXPECT_TRUE(at::allclose(out[with_vector], ref[by_hand], 1e-6, 1e-6));
  EXPECT_TRUE(at::equal(out[b_logits], ref[b_plain]));
}

TEST(AttachedModules, JsonGraphsNameTheirPaths) {
  LanguageModel lm(args());
  const char* graph = R"({"format": "nnsight.graph", "version": 1, "nodes": [
    {"kind": "get", "key": "model.layers.0.output"},
    {"kind": "save", "name": "h", "args": [0]},
    {"kind": "get", "key": "sae.hook_sae_acts_post.output"},
    {"kind": "save", "name": "acts", "args": [2]}]})";
  TraceResult out = tracing::run_graph_trace(lm.llm(), std::vector<std::vector<int32_t>>{kA},
                                             {tracing::parse_graph_file("g.json", graph)}, greedy(1));
  EXPECT_TRUE(at::allclose(out[Saved("acts")], ref_acts(out[Saved("h")]), 1e-5, 1e-5));
}

TEST(AttachedModules, WorkInWorkerProcessesAndUnderTensorParallelism) {
  Saved acts_in, h_in;
  TraceResult in_process = [&] {
    LanguageModel lm(args());
    return lm.trace(kA, greedy(1), [&](Tracer&) {
      h_in = lm.envoy("model.layers.0").output().save();
      acts_in = lm.envoy("sae.hook_sae_acts_post").output().save();
    });
  }();
  std::vector<int32_t> steered_tokens;
  {
    LanguageModel lm(args());
    steered_tokens = steer_feature(lm, 7, 40.0, nullptr, nullptr).output(0).token_ids;
  }
  for (int tp : {1, 2}) {
    SCOPED_TRACE("mp, tp " + std::to_string(tp));
    LanguageModel lm(args().executor("mp").tensor_parallel_size(tp));
    Saved acts;
    TraceResult out =
        lm.trace(kA, greedy(1), [&](Tracer&) { acts = lm.envoy("sae.hook_sae_acts_post").output().save(); });
    EXPECT_TRUE(at::allclose(out[acts], in_process[acts_in], 1e-5, 1e-5));
    EXPECT_EQ(steer_feature(lm, 7, 40.0, nullptr, nullptr).output(0).token_ids, steered_tokens);
  }
}

void expect_start_error(const EngineArgs& a, const std::vector<std::string>& parts) {
  try {
    LanguageModel lm(a);
    FAIL() << "expected start-up to fail";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(AttachedModules, BadAttachmentsFailStartUpNamingTheFileAndField) {
  const Files& f = files();
  const EngineArgs base = EngineArgs().model(f.model).kv_cache_memory_mb(8).show_progress(false);
  // An SAE 16 wide on a 32-wide hook point.
  const std::string narrow = f.dir.file("narrow");
  ::mkdir(narrow.c_str(), 0755);
  write_safetensors(narrow + "/sae_weights.safetensors", {{"W_enc", at::zeros({16, 8})},
                                                          {"b_enc", at::zeros({8})},
                                                          {"W_dec", at::zeros({8, 16})},
                                                          {"b_dec", at::zeros({16})}});
  testing::write_file(narrow + "/cfg.json", R"({"architecture": "standard"})");
  expect_start_error(EngineArgs(base).attach("sae", narrow, "model.layers.0"),
                     {"'sae'", narrow + "/sae_weights.safetensors", "d_in is 16", "'model.layers.0'", "[2, 32]"});
  expect_start_error(EngineArgs(base).attach("sae", f.sae, "model.layers.0.mpl"),
                     {"'sae'", "no module 'model.layers.0.mpl'"});
  expect_start_error(EngineArgs(base).attach("model", f.sae, "model.layers.0"), {"already has a module called"});
  expect_start_error(
      EngineArgs(base).attach("sae", f.sae, "model.layers.0.mlp.up_proj").tensor_parallel_size(2).executor("mp"),
      {"split across tensor-parallel ranks"});
}

}  // namespace
}  // namespace nnsight
