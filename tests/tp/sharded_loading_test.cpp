// Each tensor-parallel rank loads only its shard of an unsharded checkpoint:
// a recording WeightSource shows which slices every rank asks for, and the
// loaded parameters equal slices of the whole ones taken by hand.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "models/causal_lm.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

// A rank's place with no peers: loading needs no collective.
class RankOnlyGroup final : public tp::ProcessGroup {
 public:
  RankOnlyGroup(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "rank-only"; }
  void all_reduce_sum(at::Tensor&) override { throw std::logic_error("no collectives while loading"); }
  at::Tensor all_gather(const at::Tensor&, int64_t) override { throw std::logic_error("no collectives while loading"); }
  void broadcast(at::Tensor&, int) override { throw std::logic_error("no collectives while loading"); }
  void barrier() override {}

 private:
  int rank_, world_;
};

class RecordingSource final : public WeightSource {
 public:
  explicit RecordingSource(std::unique_ptr<WeightSource> inner) : inner_(std::move(inner)) {}
  const std::string& describe() const override { return inner_->describe(); }
  const ModelConfig& config() const override { return inner_->config(); }
  std::vector<std::string> names() const override { return inner_->names(); }
  bool has(const std::string& n) const override { return inner_->has(n); }
  std::vector<int64_t> shape(const std::string& n) const override { return inner_->shape(n); }
  at::Tensor load(const std::string& n, ShardSlice s) const override {
    at::Tensor t = inner_->load(n, s);
    loads[n].push_back(s);
    elements[n] += t.numel();
    return t;
  }
  mutable std::map<std::string, std::vector<ShardSlice>> loads;
  mutable std::map<std::string, int64_t> elements;

 private:
  std::unique_ptr<WeightSource> inner_;
};

struct Loaded {
  std::map<std::string, at::Tensor> params;  // this rank's
  std::map<std::string, std::vector<ShardSlice>> loads;
  std::map<std::string, int64_t> elements;
};

Loaded load_rank(const std::string& dir, int rank, int world) {
  auto src = std::make_unique<RecordingSource>(open_weights(dir));
  RecordingSource& rec = *src;
  tp::ParallelContext ctx{std::make_shared<RankOnlyGroup>(rank, world)};
  auto model = create_causal_lm(rec.config(), ctx, at::TensorOptions().dtype(at::kFloat));
  model->load(rec);
  return Loaded{testing::parameters_of(*model), rec.loads, rec.elements};
}

class ShardedLoading : public ::testing::Test {
 protected:
  void write(const ModelConfig& cfg) {
    whole_model_ = testing::tiny_random_model(cfg, 5);
    testing::write_hf_checkpoint(dir_.path(), *whole_model_);
    whole_ = testing::parameters_of(*whole_model_);
  }
  at::Tensor rows(const std::string& n, int64_t start, int64_t len) { return whole_.at(n).narrow(0, start, len); }
  at::Tensor cols(const std::string& n, int64_t start, int64_t len) { return whole_.at(n).narrow(1, start, len); }
  testing::ScratchDir dir_;
  std::shared_ptr<CausalLM> whole_model_;
  std::map<std::string, at::Tensor> whole_;
};

TEST_F(ShardedLoading, LlamaRankOneOfTwo) {
  write(testing::tiny_tp_llama_config());  // hidden 32, 4 heads x 8, 2 KV heads, MLP 48, vocab 96
  Loaded l = load_rank(dir_.path(), 1, 2);
  const std::string a = "model.layers.1.self_attn.", m = "model.layers.1.mlp.";
  EXPECT_TRUE(at::equal(l.params.at(a + "q_proj.weight"), rows(a + "q_proj.weight", 16, 16)));
  EXPECT_TRUE(at::equal(l.params.at(a + "k_proj.weight"), rows(a + "k_proj.weight", 8, 8)));
  EXPECT_TRUE(at::equal(l.params.at(a + "o_proj.weight"), cols(a + "o_proj.weight", 16, 16)));
  EXPECT_TRUE(at::equal(l.params.at(m + "up_proj.weight"), rows(m + "up_proj.weight", 24, 24)));
  EXPECT_TRUE(at::equal(l.params.at(m + "down_proj.weight"), cols(m + "down_proj.weight", 24, 24)));
  EXPECT_TRUE(at::equal(l.params.at("model.embed_tokens.weight"), rows("model.embed_tokens.weight", 48, 48)));
  EXPECT_TRUE(at::equal(l.params.at("lm_head.weight"), rows("lm_head.weight", 48, 48)));
  EXPECT_TRUE(at::equal(l.params.at("model.norm.weight"), whole_.at("model.norm.weight")));
  // No split tensor was read whole, and each read exactly its share.
  for (const auto& [name, slices] : l.loads) {
    const bool replicated = name.find("norm") != std::string::npos;
    for (const auto& s : slices) EXPECT_EQ(s.is_whole(), replicated) << name;
    if (!replicated) {
      EXPECT_EQ(l.elements.at(name) * 2, whole_.at(name).numel()) << name;
    }
  }
}

TEST_F(ShardedLoading, LlamaFewerKvHeadsThanRanksReplicatesTheirHead) {
  write(testing::tiny_tp_llama_config());
  // 4 ranks, 2 KV heads: ranks 2 and 3 both hold KV head 1 (rows 8..15).
  for (int r : {2, 3}) {
    Loaded l = load_rank(dir_.path(), r, 4);
    const std::string a = "model.layers.0.self_attn.";
    EXPECT_TRUE(at::equal(l.params.at(a + "q_proj.weight"), rows(a + "q_proj.weight", 8 * r, 8))) << r;
    EXPECT_TRUE(at::equal(l.params.at(a + "k_proj.weight"), rows(a + "k_proj.weight", 8, 8))) << r;
    EXPECT_TRUE(at::equal(l.params.at(a + "v_proj.weight"), rows(a + "v_proj.weight", 8, 8))) << r;
    EXPECT_TRUE(at::equal(l.params.at(a + "o_proj.weight"), cols(a + "o_proj.weight", 8 * r, 8))) << r;
  }
}

TEST_F(ShardedLoading, Gpt2FusedQkvTakesItsHeadsFromEachThird) {
  write(testing::tiny_tp_gpt2_config());  // hidden 32, 4 heads x 8, MLP 128, vocab 88
  Loaded l = load_rank(dir_.path(), 1, 2);
  const std::string a = "transformer.h.0.attn.";
  at::Tensor expect = at::cat(
      {rows(a + "c_attn.weight", 16, 16), rows(a + "c_attn.weight", 48, 16), rows(a + "c_attn.weight", 80, 16)}, 0);
  EXPECT_TRUE(at::equal(l.params.at(a + "c_attn.weight"), expect));
  at::Tensor b = whole_.at(a + "c_attn.bias");
  EXPECT_TRUE(at::equal(l.params.at(a + "c_attn.bias"),
                        at::cat({b.narrow(0, 16, 16), b.narrow(0, 48, 16), b.narrow(0, 80, 16)})));
  EXPECT_TRUE(at::equal(l.params.at(a + "c_proj.weight"), cols(a + "c_proj.weight", 16, 16)));
  EXPECT_TRUE(at::equal(l.params.at(a + "c_proj.bias"), whole_.at(a + "c_proj.bias")));  // added once, after the sum
  EXPECT_TRUE(
      at::equal(l.params.at("transformer.h.0.mlp.c_fc.weight"), rows("transformer.h.0.mlp.c_fc.weight", 64, 64)));
  EXPECT_TRUE(at::equal(l.params.at("transformer.wte.weight"), rows("transformer.wte.weight", 44, 44)));
}

TEST_F(ShardedLoading, ASizeThatDoesNotDivideIsRejectedWithTheCounts) {
  write(testing::tiny_tp_llama_config());
  try {
    load_rank(dir_.path(), 0, 3);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "number of attention heads (4) is not divisible by the tensor-parallel size (3)");
  }
}

}  // namespace
}  // namespace nnsight
