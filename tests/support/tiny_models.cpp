#include "support/tiny_models.h"

#include <cmath>
#include <stdexcept>

namespace nnsight::testing {

ModelConfig tiny_llama_config(bool tied) {
  ModelConfig c;
  c.architecture = "llama";
  c.name = "tiny-llama";
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position = 128;
  c.norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  c.hidden_act = "silu";
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

ModelConfig tiny_gpt2_config() {
  ModelConfig c;
  c.architecture = "gpt2";
  c.name = "tiny-gpt2";
  c.vocab_size = 89;
  c.hidden_size = 32;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  c.max_position = 64;
  c.norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.hidden_act = "gelu_new";
  c.bos_token_id = 0;
  c.eos_token_id = 0;
  return c;
}

ModelConfig tiny_tp_llama_config() {
  ModelConfig c = tiny_llama_config(false);
  c.name = "tiny-tp-llama";
  c.vocab_size = 96;
  c.max_position = 256;
  return c;
}

ModelConfig tiny_tp_gpt2_config() {
  ModelConfig c = tiny_gpt2_config();
  c.name = "tiny-tp-gpt2";
  c.vocab_size = 88;
  c.max_position = 128;
  return c;
}

std::shared_ptr<CausalLM> tiny_random_model(const ModelConfig& config, uint64_t seed) {
  auto model = create_causal_lm(config, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  randomize(*model, seed);
  return model;
}

void randomize(CausalLM& model, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::NoGradGuard no_grad;
  for (auto& p : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = p.key();
    at::Tensor t = p.value();
    at::Tensor r = at::normal(0.0, 1.0, t.sizes(), gen, at::TensorOptions().dtype(at::kFloat));
    bool is_norm = name.find("norm") != std::string::npos || name.find("ln_") != std::string::npos;
    if (is_norm && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) {
      r = 1.0 + 0.1 * r;
    } else {
      r = 0.3 * r;
    }
    t.copy_(r);
  }
}

std::map<std::string, at::Tensor> parameters_of(CausalLM& model) {
  std::map<std::string, at::Tensor> out;
  for (auto& p : model.named_parameters(true)) out[p.key()] = p.value().detach().to(at::kFloat).clone();
  return out;
}

namespace {

const at::Tensor& P(const std::map<std::string, at::Tensor>& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end()) throw std::runtime_error("reference: missing parameter " + name);
  return it->second;
}

at::Tensor linear(const at::Tensor& x, const std::map<std::string, at::Tensor>& params, const std::string& name,
                  bool bias) {
  at::Tensor y = at::matmul(x, P(params, name + ".weight").t());
  if (bias) y = y + P(params, name + ".bias");
  return y;
}

at::Tensor rms(const at::Tensor& x, const at::Tensor& w, double eps) {
  return w * (x / at::sqrt((x * x).mean(-1, true) + eps));
}

// Full causal softmax attention of q [len, heads, d] over k, v [len, kv_heads, d].
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t len = q.size(0), heads = q.size(1), d = q.size(2), kvh = k.size(1);
  at::Tensor out = at::zeros_like(q);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / (heads / kvh);
    at::Tensor qh = q.select(1, h), kh = k.select(1, g), vh = v.select(1, g);  // [len, d]
    at::Tensor scores = at::matmul(qh, kh.t()) / std::sqrt(static_cast<double>(d));
    at::Tensor mask = at::ones({len, len}, at::kBool).triu(1);
    scores = scores.masked_fill(mask, -INFINITY);
    out.select(1, h).copy_(at::matmul(at::softmax(scores, -1), vh));
  }
  return out;
}

// Rotate-half rotary embedding with angles computed in double precision
// (from ATen ops, so that autograd goes through it: the gradient tests
// differentiate this reference).
at::Tensor rope(const at::Tensor& x, double theta) {
  const int64_t len = x.size(0), d = x.size(2), half = d / 2;
  at::Tensor pos = at::arange(len, at::kDouble).unsqueeze(1);                                 // [len, 1]
  at::Tensor freq = at::pow(theta, at::arange(half, at::kDouble) * (-2.0 / d)).unsqueeze(0);  // [1, half]
  at::Tensor angle = (pos * freq).unsqueeze(1);                                               // [len, 1, half]
  at::Tensor c = angle.cos(), s = angle.sin();
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor x1 = xd.narrow(2, 0, half), x2 = xd.narrow(2, half, half);
  return at::cat({x1 * c - x2 * s, x2 * c + x1 * s}, 2).to(x.scalar_type());
}

}  // namespace

DenseOutput dense_reference(const ModelConfig& cfg, const std::map<std::string, at::Tensor>& params,
                            const std::vector<int64_t>& tokens, const DenseTap& tap_fn) {
  auto tap = [&](const std::string& name, const at::Tensor& t) { return tap_fn ? tap_fn(name, t) : t; };
  const int64_t len = static_cast<int64_t>(tokens.size()), d = cfg.head_dim;
  at::Tensor ids = at::tensor(tokens, at::kLong);
  DenseOutput out;
  if (cfg.architecture == "llama") {
    at::Tensor x = P(params, "model.embed_tokens.weight").index_select(0, ids);
    for (int64_t l = 0; l < cfg.num_layers; ++l) {
      const std::string pre = "model.layers." + std::to_string(l) + ".";
      at::Tensor h = rms(x, P(params, pre + "input_layernorm.weight"), cfg.norm_eps);
      at::Tensor q = linear(h, params, pre + "self_attn.q_proj", cfg.attention_bias).view({len, cfg.num_heads, d});
      at::Tensor k = linear(h, params, pre + "self_attn.k_proj", cfg.attention_bias).view({len, cfg.num_kv_heads, d});
      at::Tensor v = linear(h, params, pre + "self_attn.v_proj", cfg.attention_bias).view({len, cfg.num_kv_heads, d});
      at::Tensor a = causal_attention(rope(q, cfg.rope_theta), rope(k, cfg.rope_theta), v).reshape({len, -1});
      x = x + tap(pre + "self_attn", linear(a, params, pre + "self_attn.o_proj", cfg.attention_bias));
      h = rms(x, P(params, pre + "post_attention_layernorm.weight"), cfg.norm_eps);
      at::Tensor gate = linear(h, params, pre + "mlp.gate_proj", cfg.mlp_bias);
      at::Tensor up = linear(h, params, pre + "mlp.up_proj", cfg.mlp_bias);
      x = x + tap(pre + "mlp", linear(gate * at::sigmoid(gate) * up, params, pre + "mlp.down_proj", cfg.mlp_bias));
      x = tap("model.layers." + std::to_string(l), x);
    }
    out.hidden = tap("model.norm", rms(x, P(params, "model.norm.weight"), cfg.norm_eps));
    const std::string head = cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    out.logits = at::matmul(out.hidden, P(params, head).t());
    return out;
  }
  if (cfg.architecture == "gpt2") {
    at::Tensor pos = at::arange(len, at::kLong);
    at::Tensor x = P(params, "transformer.wte.weight").index_select(0, ids) +
                   P(params, "transformer.wpe.weight").index_select(0, pos);
    auto ln = [&](const at::Tensor& t, const std::string& n) {
      at::Tensor mu = t.mean(-1, true);
      at::Tensor var = ((t - mu) * (t - mu)).mean(-1, true);
      return (t - mu) / at::sqrt(var + cfg.norm_eps) * P(params, n + ".weight") + P(params, n + ".bias");
    };
    for (int64_t l = 0; l < cfg.num_layers; ++l) {
      const std::string pre = "transformer.h." + std::to_string(l) + ".";
      at::Tensor qkv = linear(ln(x, pre + "ln_1"), params, pre + "attn.c_attn", true);
      auto parts = qkv.chunk(3, -1);
      at::Tensor a =
          causal_attention(parts[0].reshape({len, cfg.num_heads, d}), parts[1].reshape({len, cfg.num_heads, d}),
                           parts[2].reshape({len, cfg.num_heads, d}))
              .reshape({len, -1});
      x = x + linear(a, params, pre + "attn.c_proj", true);
      at::Tensor f = linear(ln(x, pre + "ln_2"), params, pre + "mlp.c_fc", true);
      const double k0 = std::sqrt(2.0 / M_PI);
      at::Tensor g = 0.5 * f * (1.0 + at::tanh(k0 * (f + 0.044715 * f * f * f)));
      x = x + linear(g, params, pre + "mlp.c_proj", true);
    }
    out.hidden = ln(x, "transformer.ln_f");
    out.logits = at::matmul(out.hidden, P(params, "transformer.wte.weight").t());
    return out;
  }
  throw std::runtime_error("reference: unknown architecture " + cfg.architecture);
}

}  // namespace nnsight::testing
