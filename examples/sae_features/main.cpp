// SAE features: trains a small ReLU sparse autoencoder on the model's own
// residual stream at one layer (5-6 minutes in all on a busy 2-core machine), saves it in
// SAELens's layout, attaches it to the served model (EngineArgs::attach), then
//   1. prints a prompt's strongest features at the layer, with the tokens
//      where each fires most;
//   2. steers generation by the feature that fires most on " dog": its activation raised at every step,
//      which adds its decoder row to the layer's output for this request only.
//   sae_features [--model M] [--layer L] [--features N] [--steps S] [--strength X] [--out DIR]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nnsight/nnsight.hpp>

using namespace nnsight;

namespace {

// Text for the SAE to learn from: the model continues these, and every token
// it reads or writes is one training row.
const std::vector<std::string> kSeeds = {
    "The history of the Roman Empire",
    "My favourite recipe for chocolate cake",
    "In quantum mechanics, the wave function",
    "The dog ran across the park and",
    "Stock markets fell sharply today after",
    "To install the package, open a terminal and",
    "The weather in London this week",
    "Once upon a time, in a small village,",
    "The human heart pumps blood through",
    "Football fans gathered outside the stadium",
    "def fibonacci(n):",
    "The Eiffel Tower is located in",
    "Photosynthesis is the process by which plants",
    "I love my cat because she",
    "The election results were announced",
    "A good night's sleep helps",
    "The spacecraft entered orbit around Mars",
    "Learning to play the guitar",
    "The ocean is home to many creatures, such as",
    "The best way to learn a new language is",
    "Coffee is one of the most popular drinks",
    "The French Revolution began in",
    "My grandmother used to tell me stories about",
    "Machine learning models are trained on",
};

struct Options {
  std::string model = "smollm2-135m";
  int layer = 8;
  int64_t features = 1152;  // twice the default model's width
  int64_t steps = 1000;
  double strength = 0;  // 0: twice the feature's activation at " dog" in the prompt
  std::string out = "sae_features_sae";
};

// Rows [N, hidden] of the layer's output over generated text; *max_norm: the
// largest row norm kept.
at::Tensor collect(LanguageModel& lm, const std::string& path, double* max_norm) {
  std::vector<at::Tensor> rows;
  const size_t per_trace = 8;
  for (size_t first = 0; first < 2 * kSeeds.size(); first += per_trace) {  // each seed twice, sampled
    std::vector<Saved> saved;
    TraceResult out = lm.trace(SamplingParams().temperature(1.0).max_tokens(96).seed(first), [&](Tracer& t) {
      for (size_t i = first; i < std::min(2 * kSeeds.size(), first + per_trace); ++i)
        t.invoke(kSeeds[i % kSeeds.size()],
                 [&] { t.all([&](const Step&) { saved.push_back(lm.envoy(path).output().save_each()); }); });
    });
    for (const Saved& s : saved)
      for (const at::Tensor& step : out.list(s)) rows.push_back(step.reshape({-1, step.size(-1)}));
  }
  at::Tensor x = at::cat(rows);  // [N, hidden]
  // The first position's residual stream is far larger than the rest (an
  // attention sink); rows that large would dominate the loss.
  at::Tensor norms = x.norm(2, 1);
  *max_norm = norms.median().item<double>() * 3;
  return x.index({norms < *max_norm});
}

// Trains on x / scale (rows of norm about sqrt(hidden)) and folds the scale
// back into the weights, so the saved SAE reads the model's own activations.
SaeFiles train(const at::Tensor& x_raw, int64_t d_sae, int64_t steps) {
  const int64_t d = x_raw.size(1);
  const double scale = x_raw.norm(2, 1).mean().item<double>() / std::sqrt(static_cast<double>(d));
  const at::Tensor x = x_raw / scale;
  torch::manual_seed(0);
  at::Tensor W_dec = torch::randn({d_sae, d});
  W_dec = (W_dec / W_dec.norm(2, 1, true) * 0.1).requires_grad_();
  at::Tensor W_enc = W_dec.detach().t().clone().requires_grad_();
  at::Tensor b_enc = torch::zeros({d_sae}, torch::requires_grad());
  at::Tensor b_dec = x.mean(0).clone().requires_grad_();
  torch::optim::Adam opt({W_enc, b_enc, W_dec, b_dec}, torch::optim::AdamOptions(1e-3));
  const int64_t batch = 512;
  for (int64_t step = 1; step <= steps; ++step) {
    // The sparsity penalty grows over the first third (features die when it starts high).
    const double l1 = 0.8 * std::min(1.0, 3.0 * static_cast<double>(step) / static_cast<double>(steps));
    at::Tensor xb = x.index({torch::randint(x.size(0), {batch}, torch::kLong)});
    at::Tensor acts = torch::relu(torch::matmul(xb - b_dec, W_enc) + b_enc);  // [batch, d_sae]
    at::Tensor recon = torch::matmul(acts, W_dec) + b_dec;
    at::Tensor mse = (recon - xb).pow(2).sum(1).mean();
    at::Tensor sparsity = (acts * W_dec.norm(2, 1)).sum(1).mean();
    at::Tensor loss = mse + l1 * sparsity;
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 250 == 0 || step == steps) {
      torch::NoGradGuard no_grad;
      const double var = (xb - xb.mean(0)).pow(2).sum(1).mean().item<double>();
      std::printf("  step %4lld  mse %.3f  explained variance %.3f  L0 %.1f\n", static_cast<long long>(step),
                  mse.item<double>(), 1 - mse.item<double>() / var,
                  (acts > 0).sum(1).to(at::kFloat).mean().item<double>());
    }
  }
  torch::NoGradGuard no_grad;
  SaeFiles sae;
  sae.W_enc = W_enc.detach() / scale;
  sae.b_enc = b_enc.detach().clone();
  sae.W_dec = W_dec.detach() * scale;
  sae.b_dec = b_dec.detach() * scale;
  return sae;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model"))
      o.model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--layer"))
      o.layer = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--features"))
      o.features = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps"))
      o.steps = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--strength"))
      o.strength = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--out"))
      o.out = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: sae_features [--model M] [--layer L] [--features N] [--steps S] [--strength X] "
                   "[--out DIR]\n");
      return 2;
    }
  }
  try {
    const std::string path = "model.layers." + std::to_string(o.layer);
    at::Tensor x;
    double max_norm = 0;
    {
      LanguageModel lm(EngineArgs().model(o.model).show_progress(false));
      std::printf("collecting %s activations over %zu generated texts...\n", path.c_str(), 2 * kSeeds.size());
      x = collect(lm, path, &max_norm);
    }
    std::printf("training a ReLU SAE (%lld features) on %lld rows:\n", static_cast<long long>(o.features),
                static_cast<long long>(x.size(0)));
    SaeFiles sae = train(x, o.features, o.steps);
    sae.hook_name = path;
    save_sae(o.out, sae);
    // How often each feature fires on the training rows: the ones that fire on
    // most tokens say little about a prompt.
    const at::Tensor frequency =
        (at::relu(at::matmul(x - sae.b_dec, sae.W_enc) + sae.b_enc) > 0).to(at::kFloat).mean(0);  // [features]
    std::printf("saved %s/sae_weights.safetensors and cfg.json\n\n", o.out.c_str());

    // The served model with the SAE attached at the layer it was trained on.
    LanguageModel lm(EngineArgs().model(o.model).show_progress(false).attach("sae", o.out, path));

    // 1. A prompt's top features.
    const std::string prompt = "I adopted a little puppy, and my dog loves to play fetch in the park";
    Saved acts_saved, h_saved;
    TraceResult read = lm.trace(prompt, SamplingParams().max_tokens(1), [&](Tracer&) {
      h_saved = lm.envoy(path).output().save();
      acts_saved = lm.envoy("sae.hook_sae_acts_post").output().save();
    });
    // The rows like the ones it was trained on (no attention-sink rows).
    const at::Tensor kept = (read[h_saved].norm(2, 1) < max_norm).nonzero().squeeze(1);  // [rows]
    const at::Tensor acts = read[acts_saved].index_select(0, kept);                      // [rows, features]
    const std::vector<int32_t>& ids = read.output().prompt_token_ids;
    const at::Tensor strongest = std::get<0>(acts.max(0)).masked_fill(frequency > 0.1, 0);  // [features]
    const auto top = at::topk(strongest, 5);
    std::printf(
        "prompt: \"%s\"\ntop features at %s (strongest activation over the prompt, where; features firing on more "
        "than 10%% of training tokens left out):\n",
        prompt.c_str(), path.c_str());
    for (int64_t j = 0; j < 5; ++j) {
      const int64_t f = std::get<1>(top)[j].item<int64_t>();
      const int64_t row = acts.select(1, f).argmax().item<int64_t>();
      std::printf("  feature %5lld  %7.2f  at \"%s\"  (fires on %.1f%% of training tokens)\n",
                  static_cast<long long>(f), std::get<0>(top)[j].item<double>(),
                  lm.decode({ids[kept[row].item<int64_t>()]}).c_str(), 100 * frequency[f].item<double>());
    }

    // 2. Steering by the feature that fires most on " dog" (the last such token).
    int64_t dog_row = -1;
    for (int64_t r = 0; r < kept.size(0); ++r)
      if (lm.decode({ids[kept[r].item<int64_t>()]}) == " dog") dog_row = r;
    if (dog_row < 0) throw std::runtime_error("the prompt's \" dog\" was not among the kept rows");
    const at::Tensor at_dog = acts[dog_row].masked_fill(frequency > 0.1, 0);  // [features]
    const int64_t feature = at_dog.argmax().item<int64_t>();
    const double strength = o.strength > 0 ? o.strength : 2 * at_dog[feature].item<double>();
    std::printf("\nthe strongest feature at \" dog\": %lld (%.2f)\n", static_cast<long long>(feature),
                at_dog[feature].item<double>());
    const std::string start = "My favourite thing to do on the weekend is";
    const SamplingParams params = SamplingParams().temperature(0).max_tokens(16);
    TraceResult baseline = lm.trace(start, params, [&](Tracer&) {});
    const at::Tensor add = at::one_hot(at::tensor({feature}), o.features).to(at::kFloat)[0] * strength;  // [features]
    TraceResult steered = lm.trace(start, params, [&](Tracer& t) {
      t.all([&](const Step&) {
        Envoy f = lm.envoy("sae.hook_sae_acts_post");
        f.output() = f.output() + add;
      });
    });
    std::printf("prompt:   \"%s\"\nbaseline: \"%s\"\nsteered:  \"%s\" (feature %lld + %.1f at every step)\n",
                start.c_str(), baseline.text().c_str(), steered.text().c_str(), static_cast<long long>(feature),
                strength);
    const bool changed = steered.text() != baseline.text();
    std::printf(changed ? "steering changed the text\n" : "steering did not change the text\n");
    return changed ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sae_features: %s\n", e.what());
    return 1;
  }
}
