// The default model against an independent reference: a float64 numpy
// forward written from the Hugging Face Llama definition, on weights
// dequantized by the Python gguf package, with llama.cpp's q/k permutation
// undone there (tests/data/reference/make_reference.py).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "batching/flattener.h"
#include "support/seq_slots.h"
#include "core/weight_source.h"
#include "models/causal_lm.h"
#include "support/real_model.h"

namespace nnsight {
namespace {

TEST(RealModelReference, LogitsAndResidualStreamMatchNumpyReference) {
  std::ifstream in(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/reference/smollm2_logits.json");
  ASSERT_TRUE(in) << "missing tests/data/reference/smollm2_logits.json";
  nlohmann::json ref = nlohmann::json::parse(in);

  at::NoGradGuard no_grad;
  auto source = open_weights(testing::default_model_path());
  auto model = load_causal_lm(*source, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  at::Tensor layer5;
  Module* l5 = nullptr;
  for (auto& [p, m] : model->named_hookable_modules())
    if (p == "model.layers.5") l5 = m;
  ASSERT_NE(l5, nullptr);
  l5->register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO& out) {
    layer5 = out.tensor().clone();
    return std::optional<ModuleIO>();
  });

  for (const auto& [name, r] : ref.items()) {
    std::vector<int64_t> ids = r["ids"].get<std::vector<int64_t>>();
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<int32_t> blocks = {0, 1};
    auto meta = batching::flatten_slots({testing::seq_slot(0, n, blocks)}, 16).meta;
    auto kv =
        allocate_kv_caches(model->num_layers(), 2, 16, model->local_kv_heads(), model->head_dim(), model->options());
    at::Tensor hidden = model->forward(at::tensor(ids, at::kLong), meta, kv);
    at::Tensor logits = model->compute_logits(hidden, meta.logits_rows)[0];  // [vocab]

    auto head = r["logits_head"].get<std::vector<double>>();
    at::Tensor want_head = at::tensor(head, at::kDouble).to(at::kFloat);
    EXPECT_LE((logits.narrow(0, 0, 64) - want_head).abs().max().item<double>(), 2e-3) << name;
    auto top_ids = r["top_ids"].get<std::vector<int64_t>>();
    auto top_logits = r["top_logits"].get<std::vector<double>>();
    at::Tensor got_top = std::get<1>(logits.topk(3));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(got_top[i].item<int64_t>(), top_ids[static_cast<size_t>(i)]) << name;
    for (size_t i = 0; i < top_ids.size(); ++i)
      EXPECT_NEAR(logits[top_ids[i]].item<double>(), top_logits[i], 2e-3) << name << " top " << i;
    auto res = r["layer5_last"].get<std::vector<double>>();
    at::Tensor want_res = at::tensor(res, at::kDouble).to(at::kFloat);
    EXPECT_LE((layer5[n - 1] - want_res).abs().max().item<double>(), 1e-3) << name;
  }
}

}  // namespace
}  // namespace nnsight
