// gradient_bench: what gradients cost in a trace, on the default model, in one
// process, alternating the variants round after round (medians of per-round
// ratios):
//   forward      a one-token trace reading all 30 layer outputs and the logits
//   + backward   the same trace calling backward() on a logit difference and
//                reading the gradients of all 30 layer outputs (attribution
//                patching's trace, one invoke)
// The backward's cost is (+ backward) - (forward); the goal is at most 3x the
// forward. A prompt of --repeat copies of the sentence sets its length.
//
//   gradient_bench [--model PATH] [--rounds 9] [--repeat 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nnsight/nnsight.hpp>

using namespace nnsight;
using clock_type = std::chrono::steady_clock;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  std::string model = "smollm2-135m";
  int rounds = 9, repeat = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
  }
  std::string prompt;
  for (int i = 0; i < repeat; ++i) prompt += "The Eiffel Tower is located in the city of";
  LanguageModel lm(EngineArgs().model(model).show_progress(false));
  const int64_t paris = lm.encode(" Paris", false).at(0), rome = lm.encode(" Rome", false).at(0);
  const int64_t layers = lm.config().num_layers;
  const SamplingParams greedy = SamplingParams().temperature(0).max_tokens(1);
  auto body = [&](bool backward) {
    return [&, backward](Tracer&) {
      std::vector<Proxy> h;
      for (int64_t l = 0; l < layers; ++l) h.push_back(lm.envoy("model.layers." + std::to_string(l)).output());
      auto logits = lm.logits();
      auto metric = logits[{0, paris}] - logits[{0, rome}];
      metric.save();
      if (backward) {
        metric.backward();
        for (auto& x : h) x.grad().save();
      } else {
        for (auto& x : h) x.save();
      }
    };
  };
  auto forward = [&] { lm.trace(prompt, greedy, body(false)); };
  auto with_backward = [&] { lm.trace(prompt, greedy, body(true)); };
  auto time = [](const auto& f) {
    const auto t0 = clock_type::now();
    f();
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
  };
  for (int w = 0; w < 2; ++w) forward(), with_backward();  // warm up
  std::vector<double> tf, tb, ratio, cost;
  for (int r = 0; r < rounds; ++r) {
    const double a = time(forward), b = time(with_backward);
    tf.push_back(a), tb.push_back(b), ratio.push_back(b / a), cost.push_back((b - a) / a);
  }
  const size_t n = lm.encode(prompt).size();
  std::printf("model %s, prompt of %zu tokens, %d rounds, medians\n", model.c_str(), n, rounds);
  std::printf("| variant | ms | ratio to forward | backward / forward |\n|---|---|---|---|\n");
  std::printf("| forward: %lld layer outputs + logits | %.1f | 1.00 | - |\n", static_cast<long long>(layers),
              median(tf));
  std::printf("| + backward, %lld gradients | %.1f | %.2f | %.2f |\n", static_cast<long long>(layers), median(tb),
              median(ratio), median(cost));
  return 0;
}
