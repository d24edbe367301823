#include "runner/model_runner/model_structure.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "support/tiny_engine.h"

namespace nnsight {
namespace {

TEST(ModelStructure, EventsFollowExecutionOrder) {
  auto model = testing::tiny_llama();
  auto kv = allocate_kv_caches(model->num_layers(), 2, 4, model->local_kv_heads(), model->head_dim(), model->options());
  auto s = runner::ModelStructure::probe(*model, kv);
  auto at = [&](const std::string& k) { return s.order_of(*parse_provider_key(k)); };
  EXPECT_GE(at("model.embed_tokens.output"), 0);
  EXPECT_LT(at("model.layers.0.input"), at("model.layers.0.input_layernorm.output"));
  EXPECT_LT(at("model.layers.0.self_attn.q_proj.output"), at("model.layers.0.self_attn.k_proj.output"));
  EXPECT_LT(at("model.layers.0.self_attn.o_proj.output"), at("model.layers.0.self_attn.output"));
  EXPECT_LT(at("model.layers.0.output"), at("model.layers.1.input"));
  EXPECT_LT(at("model.norm.output"), at("lm_head.input"));
  EXPECT_LT(at("lm_head.output"), at("logits"));
  EXPECT_LT(at("logits"), at("samples"));
  EXPECT_LT(at("samples"), at("result"));
  EXPECT_EQ(at("model.layers.1.mlp.inputs"), at("model.layers.1.mlp.input"));
  EXPECT_EQ(at("model.layers.7.output"), -1);
  EXPECT_EQ(s.closest_path("model.layer.1.mlp"), "model.layers.1.mlp");
  ASSERT_NE(s.find_module("model.layers.1.self_attn"), nullptr);
  EXPECT_EQ(s.find_module("model.layers.1.self_attn")->output_tuple_size, 2);
  EXPECT_EQ(s.find_module("model.layers.1.self_attn")->type_name, "LlamaAttention");
  // What a scan derives shapes from: each value as the probe's two tokens saw it.
  const runner::ModuleInfo* attn = s.find_module("model.layers.1.self_attn");
  ASSERT_EQ(attn->outputs.size(), 2u);
  EXPECT_EQ(attn->outputs[0].sizes, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(attn->outputs[0].dtype, static_cast<int8_t>(at::kFloat));
  EXPECT_FALSE(attn->outputs[1].defined());  // (attn_output, None)
  EXPECT_EQ(s.find_module("lm_head")->outputs[0].sizes, (std::vector<int64_t>{1, 97}));
  EXPECT_EQ(s.find_module("model.embed_tokens")->inputs[0].sizes, (std::vector<int64_t>{2}));
  EXPECT_EQ(s.logits().sizes, (std::vector<int64_t>{1, 97}));
  // The probe leaves no hooks behind.
  for (auto& [p, m] : model->named_hookable_modules()) EXPECT_FALSE(m->has_hooks()) << p;
}

}  // namespace
}  // namespace nnsight
