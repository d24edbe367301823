// Sparse autoencoders in SAELens's layout: encode/decode against a reference
// written here with plain loops, loading from a directory (sae_weights +
// cfg.json), and the precise errors of bad files.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <sys/stat.h>

#include <algorithm>
#include <functional>

#include <nlohmann/json.hpp>
#include <nnsight/attached.hpp>
#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_writer.h"
#include "models/attached/attach_spec.h"
#include "models/attached/attached_file.h"
#include "models/attached/sparse_autoencoder.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

constexpr int64_t kDIn = 6, kDSae = 10;

struct RefWeights {
  at::Tensor W_enc, b_enc, W_dec, b_dec, threshold;
};

RefWeights random_weights(int64_t d_out = kDIn) {
  at::manual_seed(3);
  return {at::randn({kDIn, kDSae}), at::randn({kDSae}) * 0.3, at::randn({kDSae, d_out}), at::randn({d_out}) * 0.2,
          at::rand({kDSae}) * 0.8};
}

// The reference: one row, one feature at a time.
at::Tensor reference_encode(const RefWeights& w, const at::Tensor& x, const std::string& act, int64_t k,
                            bool b_dec_in) {
  at::Tensor out = at::zeros({x.size(0), kDSae});
  for (int64_t r = 0; r < x.size(0); ++r) {
    std::vector<double> pre(kDSae);
    for (int64_t j = 0; j < kDSae; ++j) {
      double s = w.b_enc[j].item<double>();
      for (int64_t i = 0; i < kDIn; ++i)
        s += (x[r][i].item<double>() - (b_dec_in ? w.b_dec[i].item<double>() : 0.0)) * w.W_enc[i][j].item<double>();
      pre[j] = s;
    }
    for (int64_t j = 0; j < kDSae; ++j) {
      double v = pre[j] > 0 ? pre[j] : 0.0;
      if (act == "jumprelu" && !(pre[j] > w.threshold[j].item<double>())) v = 0;
      if (act == "topk") {
        int64_t larger = 0;  // features ranked above j
        for (int64_t o = 0; o < kDSae; ++o) larger += pre[o] > pre[j];
        if (larger >= k) v = 0;
      }
      out[r][j] = v;
    }
  }
  return out;
}

at::Tensor reference_decode(const RefWeights& w, const at::Tensor& acts) {
  const int64_t d_out = w.W_dec.size(1);
  at::Tensor out = at::zeros({acts.size(0), d_out});
  for (int64_t r = 0; r < acts.size(0); ++r)
    for (int64_t o = 0; o < d_out; ++o) {
      double s = w.b_dec[o].item<double>();
      for (int64_t j = 0; j < kDSae; ++j) s += acts[r][j].item<double>() * w.W_dec[j][o].item<double>();
      out[r][o] = s;
    }
  return out;
}

// Writes an SAELens directory: sae_weights.safetensors and cfg.json.
std::string write_sae(const testing::ScratchDir& dir, const std::string& sub, const RefWeights& w,
                      const nlohmann::json& cfg, const std::vector<std::string>& drop = {}) {
  const std::string d = dir.file(sub);
  ::mkdir(d.c_str(), 0755);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (auto& [n, t] : std::vector<std::pair<std::string, at::Tensor>>{
           {"W_enc", w.W_enc}, {"b_enc", w.b_enc}, {"W_dec", w.W_dec}, {"b_dec", w.b_dec}, {"threshold", w.threshold}})
    if (std::find(drop.begin(), drop.end(), n) == drop.end()) tensors.emplace_back(n, t);
  write_safetensors(d + "/sae_weights.safetensors", tensors);
  testing::write_file(d + "/cfg.json", cfg.dump());
  return d;
}

void expect_load_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

struct Case {
  std::string name;
  nlohmann::json cfg;
  std::string act;
  int64_t k;
  bool b_dec_in;
};

TEST(SparseAutoencoder, EncodeAndDecodeEqualAPlainReference) {
  testing::ScratchDir dir;
  const RefWeights w = random_weights();
  at::manual_seed(11);
  const at::Tensor x = at::randn({5, kDIn});
  const std::vector<Case> cases = {
      {"relu", {{"architecture", "standard"}, {"d_in", kDIn}, {"d_sae", kDSae}}, "relu", 0, true},
      {"relu_old", {{"activation_fn_str", "relu"}, {"apply_b_dec_to_input", false}}, "relu", 0, false},
      {"jumprelu", {{"architecture", "jumprelu"}, {"apply_b_dec_to_input", false}}, "jumprelu", 0, false},
      {"topk", {{"architecture", "topk"}, {"k", 3}}, "topk", 3, true},
      {"topk_old", {{"activation_fn_str", "topk"}, {"activation_fn_kwargs", {{"k", 2}}}}, "topk", 2, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto m = std::dynamic_pointer_cast<SparseAutoencoder>(load_attached_module(write_sae(dir, c.name, w, c.cfg)));
    ASSERT_TRUE(m);
    const at::Tensor acts = m->encode_plain(x);
    const at::Tensor ref_acts = reference_encode(w, x, c.act, c.k, c.b_dec_in);
    EXPECT_TRUE(at::allclose(acts, ref_acts, 1e-5, 1e-5)) << acts << ref_acts;
    EXPECT_GT(ref_acts.ne(0).sum().item<int64_t>(), 0);  // the case exercises something
    if (c.act == "topk") {
      EXPECT_LE(acts.ne(0).sum(1).max().item<int64_t>(), c.k);
    }
    EXPECT_TRUE(at::allclose(m->decode_plain(acts), reference_decode(w, ref_acts), 1e-5, 1e-5));
    EXPECT_TRUE(at::allclose(m->call(x), reference_decode(w, ref_acts), 1e-5, 1e-5));
    // The hooked path (the one spliced into the model) computes the same.
    EXPECT_TRUE(at::equal(m->encode->forward(x), acts));
  }
}

TEST(SparseAutoencoder, SaveSaeWritesWhatTheLoaderReads) {
  testing::ScratchDir dir;
  const RefWeights w = random_weights();
  SaeFiles files;
  files.W_enc = w.W_enc;
  files.b_enc = w.b_enc;
  files.W_dec = w.W_dec;
  files.b_dec = w.b_dec;
  files.architecture = "topk";
  files.k = 4;
  save_sae(dir.file("saved"), files);
  auto m = std::dynamic_pointer_cast<SparseAutoencoder>(load_attached_module(dir.file("saved")));
  ASSERT_TRUE(m);
  const at::Tensor x = at::randn({3, kDIn});
  EXPECT_TRUE(at::allclose(m->encode_plain(x), reference_encode(w, x, "topk", 4, true), 1e-5, 1e-5));
  files.b_enc = at::zeros({3});
  expect_load_error([&] { save_sae(dir.file("bad"), files); }, {"b_enc is [3], expected [10]"});
}

TEST(SparseAutoencoder, AnUneditedRunKeepsTheHostValue) {
  testing::ScratchDir dir;
  auto m = std::dynamic_pointer_cast<SparseAutoencoder>(
      load_attached_module(write_sae(dir, "s", random_weights(), {{"architecture", "standard"}})));
  const at::Tensor x = at::randn({4, kDIn});
  EXPECT_FALSE(m->run_at_host(x).has_value());
}

TEST(SparseAutoencoder, ATranscoderHasNoErrorTerm) {
  testing::ScratchDir dir;
  RefWeights w = random_weights(/*d_out=*/4);
  auto m = std::dynamic_pointer_cast<SparseAutoencoder>(
      load_attached_module(write_sae(dir, "t", w, {{"architecture", "standard"}, {"d_out", 4}})));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->is_transcoder());
  EXPECT_EQ(m->hook_sae_error, nullptr);
  const at::Tensor x = at::randn({3, kDIn});
  EXPECT_TRUE(at::allclose(m->call(x), reference_decode(w, reference_encode(w, x, "relu", 0, false)), 1e-5, 1e-5));
}

TEST(SparseAutoencoder, BadFilesNameTheFileAndTheField) {
  testing::ScratchDir dir;
  const RefWeights w = random_weights();
  const std::string missing = write_sae(dir, "missing", w, {{"architecture", "standard"}}, {"b_dec"});
  expect_load_error([&] { load_attached_module(missing); },
                    {missing + "/sae_weights.safetensors", "no tensor 'b_dec'", "[d_out]"});
  const std::string unknown = write_sae(dir, "unknown", w, {{"architecture", "gated"}});
  expect_load_error([&] { load_attached_module(unknown); },
                    {unknown + "/cfg.json", "field 'architecture'", "'gated'", "not supported"});
  const std::string no_threshold = write_sae(dir, "nothr", w, {{"architecture", "jumprelu"}}, {"threshold"});
  expect_load_error([&] { load_attached_module(no_threshold); }, {"sae_weights.safetensors", "no tensor 'threshold'"});
  const std::string bad_k = write_sae(dir, "badk", w, {{"architecture", "topk"}, {"k", 50}});
  expect_load_error([&] { load_attached_module(bad_k); }, {bad_k + "/cfg.json", "field 'k'", "50"});
  const std::string cfg_d_in = write_sae(dir, "dinmismatch", w, {{"architecture", "standard"}, {"d_in", 7}});
  expect_load_error([&] { load_attached_module(cfg_d_in); }, {"cfg.json", "field 'd_in' is 7", "W_enc"});
  RefWeights bad_shape = w;
  bad_shape.b_enc = at::zeros({kDSae + 1});
  const std::string shape = write_sae(dir, "shape", bad_shape, {{"architecture", "standard"}});
  expect_load_error([&] { load_attached_module(shape); }, {"tensor 'b_enc' is [11], expected [10]"});
  const std::string norm = write_sae(dir, "norm", w, {{"normalize_activations", "expected_average_only_in"}});
  expect_load_error([&] { load_attached_module(norm); }, {"field 'normalize_activations'"});
  expect_load_error([&] { load_attached_module(dir.file("nothing_here")); }, {"nothing_here", "no such file"});
  write_safetensors(dir.file("other.safetensors"), {{"foo", at::zeros({2})}});
  expect_load_error([&] { load_attached_module(dir.file("other.safetensors")); },
                    {"other.safetensors", "not an attached module"});
}

TEST(AttachSpec, SplitsNameFileAndHookPoint) {
  AttachSpec s = parse_attach_spec("sae_l3=/a@b/sae@model.layers.3");
  EXPECT_EQ(s.name, "sae_l3");
  EXPECT_EQ(s.file, "/a@b/sae");
  EXPECT_EQ(s.hook_point, "model.layers.3");
  for (const char* bad : {"sae", "=/x@model.norm", "s=/x", "s=@model.norm", "s=/x@"})
    expect_load_error([&] { parse_attach_spec(bad); }, {std::string("'") + bad + "'", "NAME=FILE@HOOK_POINT"});
}

}  // namespace
}  // namespace nnsight
