// logit_lens (include/nnsight/logit_lens.hpp): one trace whose graph runs the
// model's own final norm and LM head (`call` nodes) on the residual stream
// after each chosen decoder layer, where the model runs, and saves only the
// top token and its probability per (layer, position).
#include <nnsight/error.hpp>
#include <nnsight/language_model.hpp>
#include <nnsight/logit_lens.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

namespace nnsight {
namespace {

int64_t resolve_index(int64_t i, int64_t n, const char* what, const std::string& where) {
  const int64_t r = i < 0 ? i + n : i;
  if (r < 0 || r >= n)
    throw Error(where + ": logit lens " + what + " " + std::to_string(i) + " is out of range (there are " +
                std::to_string(n) + ")");
  return r;
}

// Where the decoder layers, the final norm and the LM head are, by the
// Hugging Face names of the supported architectures.
struct LensPaths {
  std::string layer_prefix, norm, head;
};

LensPaths lens_paths(const LanguageModel& lm, const std::string& where) {
  const LensPaths candidates[] = {{"model.layers.", "model.norm", "lm_head"},
                                  {"model.language_model.layers.", "model.language_model.norm", "lm_head"},
                                  {"transformer.h.", "transformer.ln_f", "lm_head"},
                                  {"gpt_neox.layers.", "gpt_neox.final_layer_norm", "embed_out"}};
  for (const LensPaths& c : candidates)
    if (!lm.type_name(c.layer_prefix + "0").empty() && lm.callable(c.norm) && lm.callable(c.head)) return c;
  throw Error(where + ": the logit lens cannot find the decoder layers, final norm and LM head of this '" +
              lm.architecture() + "' model");
}

}  // namespace

LogitLens logit_lens(LanguageModel& lm, const std::string& prompt, const LogitLensOptions& options, CallSite site) {
  const std::string where = site.loc().str();
  const LensPaths paths = lens_paths(lm, where);
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
  const at::Tensor columns = at::tensor(lens.positions, at::kLong);
  std::vector<Saved> top_prob(order.size()), top_id(order.size());
  auto out = lm.trace(
      lens.prompt_token_ids, SamplingParams().temperature(0).max_tokens(1),
      [&](Tracer&) {
        const Envoy norm = lm.envoy(paths.norm, site), head = lm.envoy(paths.head, site);
        for (size_t i = 0; i < order.size(); ++i) {
          Proxy h = lm.envoy(paths.layer_prefix + std::to_string(order[i]), site).output(site);  // [tokens, hidden]
          Proxy logits = head(norm(h.index({columns}, site), site), site);                       // [positions, vocab]
          Proxy best = logits.to(at::kFloat, site).softmax(-1, site).max(-1, false, site);
          top_prob[i] = best[0].save(site);  // [positions]
          top_id[i] = best[1].save(site);    // [positions]
        }
      },
      site);

  std::vector<at::Tensor> probs, ids;  // each [positions]
  for (int64_t layer : lens.layers) {
    const size_t k = static_cast<size_t>(std::lower_bound(order.begin(), order.end(), layer) - order.begin());
    probs.push_back(out[top_prob[k]].to(at::kFloat));
    ids.push_back(out[top_id[k]].to(at::kLong));
  }
  lens.top_probs = at::stack(probs).contiguous();  // [layers, positions]
  lens.top_ids = at::stack(ids).contiguous();      // [layers, positions]

  for (int64_t p : lens.positions)
    lens.input_tokens.push_back(lm.decode({lens.prompt_token_ids[static_cast<size_t>(p)]}));
  const int64_t* top = lens.top_ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < lens.top_ids.numel(); ++i)
    lens.top_tokens.push_back(lm.decode({static_cast<int32_t>(top[i])}));
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
