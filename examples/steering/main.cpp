// Steering: a direction in the residual stream -- the difference between the
// activations of two contrasting prompts -- added to one layer's output at
// every decode step. Prints the text generated with and without it.
//   steering [--model M] [--layer L] [--scale S] [--prompt TEXT] [--max-tokens N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include <nnsight/nnsight.hpp>

using namespace nnsight;

int main(int argc, char** argv) {
  std::string model = "smollm2-135m";
  std::string prompt = "My opinion of the weather today is that";
  int layer = 10;
  double scale = 4.0;
  int64_t max_tokens = 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model"))
      model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--layer"))
      layer = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--scale"))
      scale = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--prompt"))
      prompt = argv[i + 1];
    else if (!std::strcmp(argv[i], "--max-tokens"))
      max_tokens = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: steering [--model M] [--layer L] [--scale S] [--prompt TEXT] [--max-tokens N]\n");
      return 2;
    }
  }
  try {
    LanguageModel lm(EngineArgs().model(model).show_progress(false));
    const std::string path = "model.layers." + std::to_string(layer);

    // The direction: love minus hate, at the last token.
    Saved love, hate;
    TraceResult contrast = lm.trace(SamplingParams().temperature(0).max_tokens(1), [&](Tracer& t) {
      t.invoke("I love this. It is wonderful", [&] { love = lm.envoy(path).output()[{-1}].save(); });
      t.invoke("I hate this. It is terrible", [&] { hate = lm.envoy(path).output()[{-1}].save(); });
    });
    const at::Tensor direction = contrast[love] - contrast[hate];  // [hidden]

    const SamplingParams params = SamplingParams().temperature(0).max_tokens(max_tokens);
    TraceResult baseline = lm.trace(prompt, params, [&](Tracer&) {});
    // t.all: the body runs at every step (the prefill and each decode step);
    // the direction broadcasts over the step's tokens.
    TraceResult steered = lm.trace(prompt, params, [&](Tracer& t) {
      auto l = lm.envoy(path);
      t.all([&](const Step&) { l.output() = l.output() + direction * scale; });
    });

    std::cout << "prompt:   \"" << prompt << "\"\n";
    std::cout << "baseline: \"" << baseline.text() << "\"\n";
    std::cout << "steered:  \"" << steered.text() << "\" (" << path << " += " << scale << " * direction)\n";
    const bool changed = steered.text() != baseline.text();
    std::cout << (changed ? "steering changed the text\n" : "steering did not change the text\n");
    return changed ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "steering: %s\n", e.what());
    return 1;
  }
}
