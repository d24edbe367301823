// logit_lens (include/nnsight/logit_lens.hpp): one trace that saves the
// residual stream after each chosen decoder layer, then the model's own final
// norm and LM head applied to it in the user's process.
#include <nnsight/error.hpp>
#include <nnsight/language_model.hpp>
#include <nnsight/llm.hpp>
#include <nnsight/logit_lens.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runner/engine/llm_access.h"
#include "runner/engine/async_engine.h"

namespace nnsight {
namespace {

int64_t resolve_index(int64_t i, int64_t n, const char* what, const std::string& where) {
  const int64_t r = i < 0 ? i + n : i;
  if (r < 0 || r >= n)
    throw Error(where + ": logit lens " + what + " " + std::to_string(i) + " is out of range (there are " +
                std::to_string(n) + ")");
  return r;
}

// The decoder layer module path of layer i, as Hugging Face names it.
std::string layer_path(const std::string& arch, int64_t i) {
  return (arch == "gpt2" ? "transformer.h." : "model.layers.") + std::to_string(i);
}

// The final norm of the architecture, in float32. x: [n, hidden].
at::Tensor final_norm(LanguageModel& lm, const std::string& arch, const at::Tensor& x, double eps) {
  if (arch == "gpt2") {
    at::Tensor w = lm.parameter("transformer.ln_f.weight");
    at::Tensor b = lm.parameter("transformer.ln_f.bias");
    return at::layer_norm(x, {x.size(-1)}, w, b, eps);
  }
  // RMSNorm: x / sqrt(mean(x^2) + eps) * w.
  at::Tensor w = lm.parameter("model.norm.weight");
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
}

}  // namespace

LogitLens logit_lens(LanguageModel& lm, const std::string& prompt, const LogitLensOptions& options, CallSite site) {
  const std::string where = site.loc().str();
  const std::string arch = lm.architecture();
  if (arch != "llama" && arch != "gpt2")
    throw Error(where + ": the logit lens supports llama and gpt2 models, not '" + arch + "'");
  LogitLens lens;
  lens.prompt = prompt;
  lens.prompt_token_ids = lm.encode(prompt);
  if (lens.prompt_token_ids.empty()) throw Error(where + ": the logit lens needs a non-empty prompt");
  const int64_t num_positions = static_cast<int64_t>(lens.prompt_token_ids.size());
  const int64_t total_layers = lm.num_layers();

  if (options.layers().empty()) {
    for (int64_t i = 0; i < total_layers; ++i) lens.layers.push_back(i);
  } else {
    for (int64_t i : options.layers()) lens.layers.push_back(resolve_index(i, total_layers, "layer", where));
  }
  if (options.positions().empty()) {
    for (int64_t i = 0; i < num_positions; ++i) lens.positions.push_back(i);
  } else {
    for (int64_t i : options.positions()) lens.positions.push_back(resolve_index(i, num_positions, "position", where));
  }

  // Layer outputs in execution order (reads must move forward through the model).
  std::vector<int64_t> order = lens.layers;
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  std::vector<Saved> saved(order.size());
  auto out = lm.trace(
      lens.prompt_token_ids, SamplingParams().temperature(0).max_tokens(1),
      [&](Tracer&) {
        for (size_t i = 0; i < order.size(); ++i)
          saved[i] = lm.envoy(layer_path(arch, order[i]), site).output(site).save(site);
      },
      site);

  std::vector<at::Tensor> rows;  // each [positions, hidden]
  at::Tensor index = at::tensor(lens.positions, at::kLong);
  for (int64_t layer : lens.layers) {
    const size_t k = static_cast<size_t>(std::lower_bound(order.begin(), order.end(), layer) - order.begin());
    at::Tensor h = out[saved[k]].to(at::kFloat);  // [prompt tokens, hidden]
    rows.push_back(h.index_select(0, index));
  }
  at::Tensor residual = at::stack(rows);             // [layers, positions, hidden]
  at::Tensor head = lm.parameter("lm_head.weight");  // [vocab, hidden]
  const double eps = runner::LLMAccess::engine(lm.llm()).model_config().norm_eps;
  at::Tensor normed = final_norm(lm, arch, residual, eps);
  at::Tensor logits = at::matmul(normed, head.t());  // [layers, positions, vocab]
  at::Tensor probs = at::softmax(logits, -1);
  auto top = probs.max(-1);
  lens.top_probs = std::get<0>(top).contiguous();              // [layers, positions]
  lens.top_ids = std::get<1>(top).to(at::kLong).contiguous();  // [layers, positions]

  for (int64_t p : lens.positions)
    lens.input_tokens.push_back(lm.decode({lens.prompt_token_ids[static_cast<size_t>(p)]}));
  const int64_t* ids = lens.top_ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < lens.top_ids.numel(); ++i)
    lens.top_tokens.push_back(lm.decode({static_cast<int32_t>(ids[i])}));
  return lens;
}

namespace {
size_t cell(const LogitLens& lens, int64_t row, int64_t column) {
  const int64_t r = resolve_index(row, lens.num_layers(), "row", "LogitLens");
  const int64_t c = resolve_index(column, lens.num_positions(), "column", "LogitLens");
  return static_cast<size_t>(r * lens.num_positions() + c);
}
}  // namespace

const std::string& LogitLens::token(int64_t row, int64_t column) const {
  const size_t i = cell(*this, row, column);
  if (i >= top_tokens.size()) throw Error("LogitLens: no decoded tokens (the result is empty)");
  return top_tokens[i];
}

int32_t LogitLens::token_id(int64_t row, int64_t column) const {
  const size_t i = cell(*this, row, column);
  return static_cast<int32_t>(top_ids.view({-1})[static_cast<int64_t>(i)].item<int64_t>());
}

double LogitLens::prob(int64_t row, int64_t column) const {
  const size_t i = cell(*this, row, column);
  return top_probs.view({-1})[static_cast<int64_t>(i)].item<double>();
}

}  // namespace nnsight
